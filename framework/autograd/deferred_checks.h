#pragma once
// Checks of device values that would make the host wait in every step: an
// embedding id or a loss target out of range. On a GPU, reading such a
// check's answer drains the device's queue at the start of the forward pass
// and defeats the batch-ahead copy. A check's kernel writes its answer into
// device memory; while a DeferredChecks::Scope lives on a thread (the
// trainer's forward and backward passes, cmha bench's step), the checks made
// on it queue in its DeferredChecks, and run() -- the trainer's log cadence
// (train.log_every), before a checkpoint or a validation, at the end -- reads
// all their answers with one host wait, each raising the error it would have
// raised at once, with the batch it came from. On the CPU, and outside such
// a scope, they run at once. Until they run, the kernels take ids and
// targets out of range without faulting (a zero row, an ignored target), so
// a bad batch costs at most the updates up to the next check, never a
// checkpoint.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace cmha::autograd {

// A check's verdict on its answer, read on the host (a CPU tensor): throws
// the check's error when the answer is bad.
using CheckVerdict = std::function<void(const Tensor& answer)>;

class DeferredChecks {
 public:
  DeferredChecks() = default;
  ~DeferredChecks() = default;  // forgets what did not run (an error is already on its way)
  DeferredChecks(const DeferredChecks&) = delete;
  DeferredChecks& operator=(const DeferredChecks&) = delete;

  // The batch the next checks come from, named in their errors ("update 12").
  void set_batch(std::string name) { batch_ = std::move(name); }
  // Reads every queued answer with one host wait (tensor/read_together.h),
  // gives each to its verdict in order and forgets them; the first failure
  // is its error with ", in <batch>" added.
  void run();
  size_t pending() const { return checks_.size(); }

  // Queues a check whose answer a kernel is writing on the device (at most
  // kMaxPending: more are run at once, one wait).
  void add(Tensor answer, CheckVerdict verdict);
  static constexpr size_t kMaxPending = 4096;

  // While a Scope lives, the device checks made on its thread queue in
  // `checks` (the innermost scope's) instead of running at once. The
  // trainer opens one around each update's forward and backward passes, not
  // around validation, whose checks then run at once.
  class Scope {
   public:
    explicit Scope(DeferredChecks& checks);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    DeferredChecks* outer_;
  };

 private:
  struct Check {
    Tensor answer;
    CheckVerdict verdict;
    std::string batch;
  };
  std::vector<Check> checks_;
  std::string batch_;
};

// Gives `answer` to `verdict` now (read on the host: a wait on a GPU), or
// queues it in this thread's innermost DeferredChecks when one is open and
// the answer is not on the CPU.
void check_now_or_deferred(const Tensor& answer, CheckVerdict verdict);

}  // namespace cmha::autograd

namespace cmha {
// The loss's target check (autograd/loss.cpp): the rows of target [N]
// (contiguous i64) that are not ignore_index, when `count` (a mean's divisor,
// read on the host at once); else -1, the range check then run through
// check_now_or_deferred (the loss kernels ignore a target out of range until
// it runs). A target out of range is an error naming it and its row.
int64_t checked_target_count(const Tensor& target, int64_t classes, int64_t ignore_index, bool count);
}  // namespace cmha
