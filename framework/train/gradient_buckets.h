#pragma once
// Data-parallel gradient exchange: the parameters' gradients are packed into
// buckets of about `bucket_bytes`, in the order the backward pass finishes
// them, and each bucket is summed over the ranks asynchronously as soon as it
// is full, so communication overlaps the rest of the backward pass.
//
// Buckets start in reverse registration order (the last layers finish first);
// after the first exchange they are rebuilt in the order rank 0 observed, the
// same on every rank. Buckets are always launched in index order, so every
// rank issues the same collectives in the same order even if its hooks fire
// in another one. A parameter with no gradient on any rank keeps none (as with
// one process); one with a gradient on some rank gets the sum.
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/communicator.h"
#include "tensor/tensor.h"

namespace cmha::train {

// Bucket sizes, as PyTorch DDP's: the first bucket (the last layers, whose
// gradients are ready first) is small so that the exchange starts early in
// the backward pass; the others hold up to bucket_bytes. A model of less than
// 8 × bucket_bytes gets buckets of an eighth of its size instead (at least
// 1 MiB), so that a small model still has buckets to overlap: with one bucket
// of the whole model, nothing goes out before the backward pass ends.
struct BucketOptions {
  int64_t bucket_bytes = 25 << 20;
  bool overlap = true;  // false: every bucket goes out after the backward pass, blocking
  int64_t first_bucket_bytes = 1 << 20;
  // All-reduce in bf16 (train.dist_grad_dtype=bf16): half the bytes on the
  // wire; each bucket is rounded to bf16 before the exchange and every
  // partial sum after it, and the summed bucket widens back to f32 before
  // the gradients are unpacked. (Sizes above count f32 bytes either way.)
  bool bf16 = false;
};

class GradientBuckets {
 public:
  GradientBuckets(const std::vector<Tensor>& params, distributed::Communicator& comm, BucketOptions options);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // The next backward pass is the update's last micro-batch: its gradients are
  // final, and buckets go out as they fill (earlier micro-batches only accumulate).
  void arm();
  // Sends what is left, waits for every bucket, and leaves each gradient as
  // its sum over the ranks times `scale`.
  void finish(float scale);

  int64_t buckets() const;
  // The parameter order of the buckets once agreed (after the first exchange; empty before), and
  // its restoration from a checkpoint, so that a resumed run exchanges the same buckets.
  std::vector<int64_t> agreed_order() const;
  void use_order(const std::vector<int64_t>& order);
  // Seconds spent inside finish(): the communication the backward pass did not hide.
  double exposed_seconds() const;

 private:
  struct State;
  std::shared_ptr<State> state_;  // the hooks hold it weakly: they outlive this object on the parameters
};

}  // namespace cmha::train
