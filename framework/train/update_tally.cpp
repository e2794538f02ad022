#include "train/update_tally.h"

#include <cmath>

#include "optim/clip.h"
#include "tensor/read_together.h"

namespace cmha::train {

bool ResolvedUpdate::applied() const { return std::isfinite(gnorm); }

std::vector<ResolvedUpdate> UpdateTally::resolve(distributed::Communicator& comm) {
  std::vector<UpdateTallyEntry> due;
  due.swap(pending_);
  std::vector<ResolvedUpdate> out;
  if (due.empty()) return out;
  // Every device value of the window, read together: one wait per dtype.
  std::vector<Tensor> values;
  for (const UpdateTallyEntry& e : due) {
    values.push_back(e.norm);
    for (const MicroBatchTally& b : e.batches) {
      values.push_back(b.loss);
      if (b.correct_count.defined()) values.push_back(b.correct_count);
    }
  }
  const std::vector<Tensor> read = read_together(values);
  size_t at = 0;
  // [loss, correct] of each update on this rank, then summed over ranks.
  std::vector<double> sums;
  for (const UpdateTallyEntry& e : due) {
    ResolvedUpdate r;
    r.update = e.update;
    r.units = e.units;
    r.seconds = e.seconds;
    r.gnorm = optim::norm_of(read[at++]);
    double loss = 0, correct = 0;
    for (const MicroBatchTally& b : e.batches) {
      loss += read[at++].item();  // float to double, in micro-batch order (as an item() after each)
      const double counted = b.correct_count.defined() ? static_cast<double>(*read[at++].data<int64_t>()) : 0.0;
      correct += b.correct + counted;
    }
    sums.push_back(loss);
    sums.push_back(correct);
    out.push_back(r);
  }
  if (comm.size() > 1) comm.all_reduce(sums.data(), sums.size(), distributed::ReduceOp::sum);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].loss = sums[2 * i];
    out[i].correct = sums[2 * i + 1];
  }
  return out;
}

}  // namespace cmha::train
