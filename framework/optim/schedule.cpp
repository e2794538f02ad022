#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tensor/error.h"

namespace cmha::optim {
namespace {

void check_options(const ScheduleOptions& o) {
  const std::string kind = schedule_kind_name(o.kind);
  const std::string where = "learning-rate schedule '" + kind + "': ";
  if (o.kind != ScheduleKind::noam) {
    CMHA_CHECK(std::isfinite(o.lr) && o.lr >= 0.0,
               where + "lr " + number_str(o.lr) + " must be a finite non-negative number");
  }
  CMHA_CHECK(o.warmup >= 0, where + "warmup " + std::to_string(o.warmup) + " is negative");
  CMHA_CHECK(std::isfinite(o.warmup_init_lr) && o.warmup_init_lr >= 0.0,
             where + "warmup_init_lr " + number_str(o.warmup_init_lr) + " must be a finite non-negative number");
  CMHA_CHECK(!o.per_epoch || o.kind == ScheduleKind::constant || o.kind == ScheduleKind::cosine,
             where + "per-epoch stepping is only for the constant and cosine schedules");
  switch (o.kind) {
    case ScheduleKind::constant:
      break;
    case ScheduleKind::inverse_sqrt:
      CMHA_CHECK(o.warmup >= 1, where + "warmup must be at least 1 update, as the decay is lr·sqrt(warmup/update)");
      break;
    case ScheduleKind::noam:
      CMHA_CHECK(std::isfinite(o.factor) && o.factor > 0.0,
                 where + "factor " + number_str(o.factor) + " must be positive");
      CMHA_CHECK(o.d_model >= 1, where + "d_model " + std::to_string(o.d_model) + " must be at least 1");
      CMHA_CHECK(o.warmup >= 1, where + "warmup must be at least 1 update");
      break;
    case ScheduleKind::cosine:
      CMHA_CHECK(o.total >= 1, where + "total " + std::to_string(o.total) + " must be at least 1 " +
                                   (o.per_epoch ? "epoch" : "update"));
      CMHA_CHECK(o.warmup_prefix || o.warmup <= o.total,
                 where + "warmup " + std::to_string(o.warmup) + " exceeds the schedule's total length " +
                     std::to_string(o.total));
      CMHA_CHECK(std::isfinite(o.lr_min) && o.lr_min >= 0.0 && o.lr_min <= o.lr,
                 where + "lr_min " + number_str(o.lr_min) + " must lie between 0 and lr " + number_str(o.lr));
      break;
  }
}

}  // namespace

const char* schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::constant: return "constant";
    case ScheduleKind::inverse_sqrt: return "inverse_sqrt";
    case ScheduleKind::noam: return "noam";
    case ScheduleKind::cosine: return "cosine";
  }
  return "?";
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  for (ScheduleKind k : {ScheduleKind::constant, ScheduleKind::inverse_sqrt, ScheduleKind::noam, ScheduleKind::cosine})
    if (name == schedule_kind_name(k)) return k;
  throw Error("unknown learning-rate schedule '" + name + "'; choose constant, inverse_sqrt, noam or cosine");
}

LrSchedule::LrSchedule(ScheduleOptions options) : options_(options) { check_options(options_); }

LrSchedule LrSchedule::constant(double lr, int64_t warmup, double warmup_init_lr) {
  ScheduleOptions o;
  o.kind = ScheduleKind::constant;
  o.lr = lr;
  o.warmup = warmup;
  o.warmup_init_lr = warmup_init_lr;
  return LrSchedule(o);
}

LrSchedule LrSchedule::inverse_sqrt(double lr, int64_t warmup_updates, double warmup_init_lr) {
  ScheduleOptions o;
  o.kind = ScheduleKind::inverse_sqrt;
  o.lr = lr;
  o.warmup = warmup_updates;
  o.warmup_init_lr = warmup_init_lr;
  return LrSchedule(o);
}

LrSchedule LrSchedule::noam(double factor, int64_t d_model, int64_t warmup) {
  ScheduleOptions o;
  o.kind = ScheduleKind::noam;
  o.factor = factor;
  o.d_model = d_model;
  o.warmup = warmup;
  return LrSchedule(o);
}

LrSchedule LrSchedule::cosine(double lr, int64_t total, int64_t warmup, double lr_min, double warmup_init_lr,
                              bool per_epoch, bool warmup_prefix) {
  ScheduleOptions o;
  o.kind = ScheduleKind::cosine;
  o.lr = lr;
  o.total = total;
  o.warmup = warmup;
  o.lr_min = lr_min;
  o.warmup_init_lr = warmup_init_lr;
  o.per_epoch = per_epoch;
  o.warmup_prefix = warmup_prefix;
  return LrSchedule(o);
}

// fairseq and timm both step by (lr - init)/warmup from init.
double LrSchedule::warmup_lr(double t) const {
  const ScheduleOptions& o = options_;
  return o.warmup_init_lr + t * ((o.lr - o.warmup_init_lr) / static_cast<double>(o.warmup));
}

double LrSchedule::lr_at(int64_t update, double epoch) const {
  const ScheduleOptions& o = options_;
  CMHA_CHECK(update >= 0, "learning-rate schedule: update " + std::to_string(update) + " is negative");
  CMHA_CHECK(epoch >= 0.0 && std::isfinite(epoch),
             "learning-rate schedule: epoch " + number_str(epoch) + " must be a finite non-negative number");
  const double t = o.per_epoch ? std::floor(epoch) : static_cast<double>(update);
  switch (o.kind) {
    case ScheduleKind::constant:
      return t < static_cast<double>(o.warmup) ? warmup_lr(t) : o.lr;
    case ScheduleKind::inverse_sqrt: {
      if (t < static_cast<double>(o.warmup)) return warmup_lr(t);
      const double decay_factor = o.lr * std::pow(static_cast<double>(o.warmup), 0.5);
      return decay_factor * std::pow(t, -0.5);
    }
    case ScheduleKind::noam: {
      const double step = t + 1.0;
      return o.factor * std::pow(static_cast<double>(o.d_model), -0.5) *
             std::min(std::pow(step, -0.5), step * std::pow(static_cast<double>(o.warmup), -1.5));
    }
    case ScheduleKind::cosine: {
      if (t < static_cast<double>(o.warmup)) return warmup_lr(t);
      const double tc = o.warmup_prefix ? t - static_cast<double>(o.warmup) : t;
      const double total = static_cast<double>(o.total);
      if (tc >= total) return o.lr_min;
      return o.lr_min + 0.5 * (o.lr - o.lr_min) * (1.0 + std::cos(std::numbers::pi * tc / total));
    }
  }
  return o.lr;
}

}  // namespace cmha::optim
