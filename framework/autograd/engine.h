#pragma once
// Define-by-run autograd. Every differentiable op calls `record` after its
// forward pass; `run_backward` walks the recorded graph in reverse, sums the
// gradients that reach each tensor, and frees the graph as it goes.
#include <functional>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace cmha::autograd {

// Gradient of the loss w.r.t. each recorded input, given the gradient w.r.t.
// the output. An undefined Tensor means "no gradient for this input".
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_out)>;

struct Node {
  const char* name = "";
  // The edges: an op result as its grad_fn and shape only (no storage), a leaf
  // whole, an input that wants no gradient undefined (record() makes them).
  std::vector<Tensor> inputs;
  BackwardFn backward;         // reset after use: the graph is freed by backward
  uint64_t sequence = 0;       // creation order; later nodes run first
  Shape out_shape;             // the gradient must have this shape
  // Optional, for nodes of one input whose gradient touches only part of it
  // (a slice): adds this node's gradient for g straight into `pending`, the
  // gradient already summed for the input, in place. The engine calls it
  // instead of `backward` when such a gradient exists and nothing else holds
  // it, so the pieces of a split tensor cost their own size, not a full-size
  // zero tensor and a full-size add each.
  std::function<void(Tensor& pending, const Tensor& grad_out)> accumulate;
};

// Gradient recording is on by default, per thread.
bool grad_enabled();
void set_grad_enabled(bool on);

class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// bf16 autocast (per thread): linear layers run their GEMMs with bf16 inputs
// and f32 accumulation and output, while weights and gradients stay f32
// (f32 master weights). AVX-512 BF16 CPUs run these about twice as fast.
bool autocast_bf16();
void set_autocast_bf16(bool on);

class AutocastGuard {
 public:
  explicit AutocastGuard(bool on) : prev_(autocast_bf16()) { set_autocast_bf16(on); }
  ~AutocastGuard() { set_autocast_bf16(prev_); }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool prev_;
};

// True when recording is on and any input requires a gradient.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// A tensor an op keeps for its backward, with the version of its storage at
// the forward (tensor/storage.h). The tensors share memory with the op's
// inputs and outputs, so an in-place write to one of them between the forward
// and the backward would silently change the gradient; get() refuses instead,
// naming the op, as PyTorch does. Only writes through the Tensor API are seen
// (copy_, fill_, the random fills, the optimiser and EMA steps, clipping,
// gradient buckets): a raw data<T>() write is not, unless its writer calls
// Tensor::bump_version(). Undefined tensors are allowed (an optional input,
// or one the backward does not need) and get() returns them as they are.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(Tensor t) : tensor_(std::move(t)), version_(tensor_.defined() ? tensor_.version() : 0) {}
  // The saved tensor; throws cmha::Error naming `op` (e.g. "softmax backward")
  // when its storage was written in place after the forward.
  const Tensor& get(const char* op) const {
    if (tensor_.defined() && tensor_.version() != version_) throw_modified(op);
    return tensor_;
  }
  bool defined() const { return tensor_.defined(); }

 private:
  [[noreturn]] void throw_modified(const char* op) const;
  Tensor tensor_;
  uint64_t version_ = 0;
};

// Attaches a node to `out` (which then requires grad); returns it (to set
// Node::accumulate).
Node& record(Tensor& out, const char* name, std::vector<Tensor> inputs, BackwardFn backward);

// Backpropagates `grad` (same shape as `root`) through root's graph.
void run_backward(const Tensor& root, const Tensor& grad);

}  // namespace cmha::autograd
