#pragma once
// What the trainer's updates leave on the device until its log cadence
// (train.log_every), a checkpoint, a validation or the end: each micro-batch's
// summed loss and correct count, each update's gradient norm (the gate of its
// optimiser step: optim/clip.h). A GPU step that read them would make the host
// wait in every step; resolve() reads the whole window with one wait per
// dtype (tensor/read_together.h) and hands back, update by update, the sums
// the trainer logs -- the same doubles, added in the same order, as reading
// each value right after its micro-batch.
#include <cstdint>
#include <vector>

#include "distributed/communicator.h"
#include "tensor/tensor.h"

namespace cmha::train {

struct MicroBatchTally {
  Tensor loss;           // f32 [] on the device: the summed loss (detached)
  double correct = 0;    // counted on the host (BatchLoss::correct)
  Tensor correct_count;  // optional: i64 [] on the device (BatchLoss::correct_count)
};

// One update on this rank: its micro-batches, its norm, and what the host knows.
struct UpdateTallyEntry {
  int64_t update = 0;   // its number, 1-based
  std::vector<MicroBatchTally> batches;
  Tensor norm;          // i64 [1]: the bits of the gradients' norm (optim::clip_grad_norm_on_device)
  double units = 0;     // over all ranks
  double seconds = 0;   // host wall time from its first forward pass to its optimiser step
};

// An update, read: loss and correct summed over its micro-batches and over ranks.
struct ResolvedUpdate {
  int64_t update = 0;
  double loss = 0, correct = 0, units = 0, seconds = 0, gnorm = 0;
  bool applied() const;  // false: the norm was not finite and the optimiser's gate skipped it
};

class UpdateTally {
 public:
  void add(UpdateTallyEntry entry) { pending_.push_back(std::move(entry)); }
  bool empty() const { return pending_.empty(); }
  // Collective when comm has several ranks (every rank holds as many updates):
  // the updates so far in order, read, their losses and counts summed over
  // ranks; forgets them.
  std::vector<ResolvedUpdate> resolve(distributed::Communicator& comm);

 private:
  std::vector<UpdateTallyEntry> pending_;
};

}  // namespace cmha::train
