#pragma once
// Learning-rate schedules, each a pure function of the training position, so a
// resumed run needs no schedule state: the trainer sets
//   optimiser.set_lr(schedule.lr_at(update, epoch))
// before every update.
//
// Conventions (the same as fairseq's step_update(num_updates) and timm's
// step_update / step(epoch), which are called after each update or epoch):
//   update  the number of optimiser updates already applied: 0 for the first
//           update, so lr_at(u) is the learning rate of the (u+1)-th update;
//   epoch   the epochs completed, with the fraction of the current one
//           (2.5 = half-way through the third epoch). Only per-epoch
//           schedules read it, and they use whole epochs, floor(epoch), as
//           timm does: the rate changes at epoch boundaries.
//
//   constant      lr, after an optional linear warmup (below).
//   inverse_sqrt  fairseq's inverse_sqrt: t < warmup:
//                   warmup_init_lr + t·(lr - warmup_init_lr)/warmup
//                 then lr·√warmup / √t. So update 0 runs at warmup_init_lr
//                 and update `warmup` at lr.
//   noam          Vaswani et al. (2017) eq. 3 with step_num = update + 1 (the
//                 1-based number of the update being taken):
//                   factor · d_model^-0.5 · min(step^-0.5, step·warmup^-1.5)
//                 peaking at update warmup-1. The same curve as inverse_sqrt
//                 from 0 with lr = factor·(d_model·warmup)^-0.5, one update
//                 earlier. (The Annotated Transformer's LambdaLR clamps step 0
//                 to 1 and so runs its first two updates at step 1's rate.)
//   cosine        timm's CosineLRScheduler (one cycle, no noise, k = 1) over t
//                 = update, or t = floor(epoch) when per_epoch (timm's
//                 t_in_epochs; DeiT: 300 epochs, 5 warmup epochs from 1e-6,
//                 lr_min 1e-5): t < warmup: the linear warmup; otherwise
//                   lr_min + ½(lr - lr_min)(1 + cos(π·t'/total))
//                 with t' = t (t - warmup with warmup_prefix), and lr_min once
//                 t' >= total. Without warmup_prefix the warmup is part of the
//                 `total` steps, as in timm's default.
//
// Linear warmup (constant, inverse_sqrt, cosine): from warmup_init_lr at
// t = 0 towards lr, reaching it at t = warmup; warmup 0 means none.
#include <cstdint>
#include <string>

namespace cmha::optim {

enum class ScheduleKind { constant, inverse_sqrt, noam, cosine };

// "constant", "inverse_sqrt", "noam", "cosine".
const char* schedule_kind_name(ScheduleKind kind);
// The kind a recipe names; an unknown name is an error listing the choices.
ScheduleKind parse_schedule_kind(const std::string& name);

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::constant;
  double lr = 5e-4;             // peak (constant, inverse_sqrt, cosine); unused by noam
  int64_t warmup = 0;           // warmup length, in updates (epochs when per_epoch)
  double warmup_init_lr = 0.0;  // the rate at t = 0 of the warmup
  // noam
  double factor = 1.0;
  int64_t d_model = 512;
  // cosine
  int64_t total = 0;            // timm's t_initial: the cosine's length, in updates (epochs when per_epoch)
  double lr_min = 0.0;
  bool warmup_prefix = false;   // the cosine starts after the warmup instead of including it
  // constant and cosine: step per epoch instead of per update
  bool per_epoch = false;
};

class LrSchedule {
 public:
  // Checks the settings; a bad one is an error naming it.
  explicit LrSchedule(ScheduleOptions options);

  static LrSchedule constant(double lr, int64_t warmup = 0, double warmup_init_lr = 0.0);
  static LrSchedule inverse_sqrt(double lr, int64_t warmup_updates, double warmup_init_lr = 0.0);
  static LrSchedule noam(double factor, int64_t d_model, int64_t warmup);
  static LrSchedule cosine(double lr, int64_t total, int64_t warmup = 0, double lr_min = 0.0,
                           double warmup_init_lr = 0.0, bool per_epoch = false, bool warmup_prefix = false);

  // The learning rate of the update after `update` updates, in epoch `epoch`
  // (see the conventions above). Negative positions are an error.
  double lr_at(int64_t update, double epoch = 0.0) const;

  const ScheduleOptions& options() const { return options_; }

 private:
  double warmup_lr(double t) const;
  ScheduleOptions options_;
};

}  // namespace cmha::optim
