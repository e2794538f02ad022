#pragma once
// Checks of device values that would make the host wait in every step: an
// embedding id or a loss target out of range. On a GPU, reading such a
// check's answer drains the device's queue at the start of the forward pass
// and defeats the batch-ahead copy. While a DeferredChecks lives on a thread
// (the trainer's loop, cmha bench), the checks of device tensors made on it
// queue there instead and run at run() -- the trainer's log cadence
// (train.log_every), before a checkpoint or a validation, at the end -- each
// raising the error it would have raised at once, with the batch it came
// from. On the CPU, and outside such a scope, they run at once. Until they
// run, the kernels take ids and targets out of range without faulting (a
// zero row, an ignored target), so a bad batch costs at most the updates up
// to the next check, never a checkpoint.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/device.h"

namespace cmha::autograd {

class DeferredChecks {
 public:
  DeferredChecks();
  ~DeferredChecks();  // forgets what did not run (an error is already on its way)
  DeferredChecks(const DeferredChecks&) = delete;
  DeferredChecks& operator=(const DeferredChecks&) = delete;

  // The batch the next checks come from, named in their errors ("update 12").
  void set_batch(std::string name) { batch_ = std::move(name); }
  // Runs the queued checks in order and forgets them; the first failure is
  // its error with ", in <batch>" added.
  void run();
  size_t pending() const { return checks_.size(); }

  // Queues `check` (at most kMaxPending: more are run at once, one wait).
  void add(std::function<void()> check);
  static constexpr size_t kMaxPending = 4096;

 private:
  struct Check {
    std::function<void()> check;
    std::string batch;
  };
  std::vector<Check> checks_;
  std::string batch_;
  DeferredChecks* outer_;
};

// Runs `check` now, or queues it in this thread's innermost DeferredChecks
// when one is open and `device` is not the CPU.
void check_now_or_deferred(Device device, std::function<void()> check);

}  // namespace cmha::autograd

namespace cmha {
class Tensor;
// The loss's target check (autograd/loss.cpp): the rows of target [N]
// (contiguous i64) that are not ignore_index, when `count` (a mean's divisor,
// read on the host at once); else -1, the range check then run through
// check_now_or_deferred (the loss kernels ignore a target out of range until
// it runs). A target out of range is an error naming it and its row.
int64_t checked_target_count(const Tensor& target, int64_t classes, int64_t ignore_index, bool count);
}  // namespace cmha
