#include "autograd/engine.h"

#include <atomic>
#include <queue>
#include <unordered_map>

#include "autograd/ops.h"
#include "backend/profile.h"

namespace cmha::autograd {

namespace {
thread_local bool g_grad_enabled = true;
thread_local bool g_autocast_bf16 = false;
std::atomic<uint64_t> g_sequence{0};

bool input_wants_grad(const Tensor& t) { return t.defined() && t.requires_grad(); }

// A gradient handed to a leaf must not alias a buffer someone else can
// still see (optimisers and clipping update .grad in place): keep it only
// when this is the last handle to its storage, else copy.
Tensor owned(Tensor g) {
  if (!g.is_contiguous() || g.impl_ptr().use_count() > 1 || g.impl().storage.use_count() > 1) return g.clone();
  return g;
}
}  // namespace

void SavedTensor::throw_modified(const char* op) const {
  throw Error(std::string(op) + ": a tensor it saved (" + dtype_name(tensor_.dtype()) + shape_str(tensor_.shape()) +
              ") was modified in place after the forward (version " + std::to_string(version_) + " → " +
              std::to_string(tensor_.version()) + "); write into a clone, or run the backward first");
}

bool grad_enabled() { return g_grad_enabled; }
bool autocast_bf16() { return g_autocast_bf16; }
void set_autocast_bf16(bool on) { g_autocast_bf16 = on; }
void set_grad_enabled(bool on) { g_grad_enabled = on; }

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (input_wants_grad(t)) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (input_wants_grad(t)) return true;
  return false;
}

// What the backward pass needs of an input: for an op result, its grad_fn,
// shape and requires_grad, without its storage; so an activation that no
// backward saved is freed as soon as the forward pass drops it (as PyTorch's
// edges do), instead of living until the backward pass reaches this node.
// The input of a linear layer, a layer norm or a ReLU stayed alive this way:
// 300 MB of a 1.3 GB step of the local EN-DE recipe. A leaf is kept whole:
// the pass writes its .grad and runs its hooks. An input that wants no
// gradient is dropped (it is skipped by the pass).
Tensor edge_of(Tensor in) {
  if (!input_wants_grad(in)) return Tensor();
  if (!in.grad_fn()) return in;
  auto edge = std::make_shared<TensorImpl>();
  edge->shape = in.shape();
  edge->strides = in.strides();
  edge->dtype = in.dtype();
  edge->requires_grad = true;
  edge->grad_fn = in.grad_fn();
  return Tensor(std::move(edge));
}

Node& record(Tensor& out, const char* name, std::vector<Tensor> inputs, BackwardFn backward) {
  auto node = std::make_shared<Node>();
  node->name = name;
  for (Tensor& in : inputs) in = edge_of(std::move(in));
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  node->sequence = g_sequence.fetch_add(1);
  node->out_shape = out.shape();
  Node& recorded = *node;
  out.impl().grad_fn = std::move(node);
  out.impl().requires_grad = true;
  return recorded;
}

void run_backward(const Tensor& root, const Tensor& grad) {
  CMHA_CHECK(root.requires_grad(),
             "backward: the tensor " + root.describe() + " does not require grad (no parameter or input "
             "with requires_grad reached it, or it was computed under NoGradGuard)");
  CMHA_CHECK(grad.shape() == root.shape(), "backward: gradient shape " + shape_str(grad.shape()) +
                                               " differs from the tensor's shape " + shape_str(root.shape()));
  CMHA_CHECK(grad.dtype() == root.dtype(), std::string("backward: gradient dtype ") + dtype_name(grad.dtype()) +
                                               " differs from the tensor's " + dtype_name(root.dtype()));
  NoGradGuard no_grad;  // backward formulas are not themselves recorded
  backend::ProfilePhase phase("backward");

  // Leaves: gradients are summed here, then added to .grad once every
  // consumer has delivered (that is when the "gradient ready" hook fires).
  struct LeafState {
    Tensor tensor;
    Tensor pending;
    int remaining = 0;
  };
  std::unordered_map<TensorImpl*, LeafState> leaves;
  auto leaf_delivered = [&](LeafState& ls) {
    if (--ls.remaining > 0) return;
    TensorImpl& impl = ls.tensor.impl();
    Tensor total = impl.grad ? add(Tensor(impl.grad), ls.pending) : owned(std::move(ls.pending));
    impl.grad = total.impl_ptr();
    for (auto& hook : impl.grad_ready_hooks) hook(ls.tensor);
  };
  auto deliver_to_leaf = [&](LeafState& ls, Tensor g) {
    ls.pending = ls.pending.defined() ? add(ls.pending, g) : std::move(g);
    leaf_delivered(ls);
  };

  if (root.is_leaf()) {
    LeafState ls{root, Tensor(), 1};
    deliver_to_leaf(ls, grad);
    return;
  }

  // Count, for each node, how many edges point at it; for each leaf, how many uses.
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, Tensor> node_grads;
  // Freeing a node's edges can drop the last owner of a node still queued:
  // hold every node of the graph until the pass ends.
  std::vector<std::shared_ptr<Node>> alive{root.grad_fn()};
  {
    std::vector<Node*> stack{root.grad_fn().get()};
    dependencies[root.grad_fn().get()] = 0;
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      CMHA_CHECK(n->backward, std::string("backward: the graph through '") + n->name +
                                  "' was already freed by an earlier backward()");
      for (const Tensor& in : n->inputs) {
        if (!input_wants_grad(in)) continue;
        if (Node* child = in.grad_fn().get()) {
          auto [it, fresh] = dependencies.try_emplace(child, 0);
          ++it->second;
          if (fresh) {
            stack.push_back(child);
            alive.push_back(in.grad_fn());
          }
        } else {
          auto [it, fresh] = leaves.try_emplace(in.impl_ptr().get(), LeafState{in, Tensor(), 0});
          ++it->second.remaining;
        }
      }
    }
  }

  auto later_first = [](Node* a, Node* b) { return a->sequence < b->sequence; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  node_grads[root.grad_fn().get()] = grad;
  ready.push(root.grad_fn().get());
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    Tensor g = std::move(node_grads[n]);
    node_grads.erase(n);
    if (n->accumulate && n->inputs.size() == 1 && input_wants_grad(n->inputs[0])) {
      // Into the gradient already summed for the input, when nothing else holds it.
      const Tensor& in = n->inputs[0];
      Node* child = in.grad_fn().get();
      Tensor* pending = nullptr;
      if (child) {
        auto it = node_grads.find(child);
        if (it != node_grads.end()) pending = &it->second;
      } else if (LeafState& ls = leaves.at(in.impl_ptr().get()); ls.pending.defined()) {
        pending = &ls.pending;
      }
      if (pending && pending->impl_ptr().use_count() == 1 && pending->impl().storage.use_count() == 1) {
        n->accumulate(*pending, g);
        if (!child) leaf_delivered(leaves.at(in.impl_ptr().get()));
        else if (--dependencies[child] == 0) ready.push(child);
        n->backward = nullptr;
        n->accumulate = nullptr;
        n->inputs.clear();
        continue;
      }
    }
    std::vector<Tensor> grads = n->backward(g);
    CMHA_CHECK(grads.size() == n->inputs.size(), std::string("backward of '") + n->name + "' returned " +
                                                     std::to_string(grads.size()) + " gradients for " +
                                                     std::to_string(n->inputs.size()) + " inputs");
    for (size_t i = 0; i < grads.size(); ++i) {
      const Tensor& in = n->inputs[i];
      if (!input_wants_grad(in)) continue;
      Tensor gi = std::move(grads[i]);
      CMHA_CHECK(gi.defined(), std::string("backward of '") + n->name + "' gave no gradient for input " +
                                   std::to_string(i) + ", which requires one");
      CMHA_CHECK(gi.shape() == in.shape(), std::string("backward of '") + n->name + "' gave gradient " +
                                               shape_str(gi.shape()) + " for input " + std::to_string(i) +
                                               " of shape " + shape_str(in.shape()));
      CMHA_CHECK(gi.dtype() == in.dtype(), std::string("backward of '") + n->name + "' gave a " +
                                               dtype_name(gi.dtype()) + " gradient for input " + std::to_string(i) +
                                               " of dtype " + dtype_name(in.dtype()));
      if (Node* child = in.grad_fn().get()) {
        auto it = node_grads.find(child);
        if (it == node_grads.end()) node_grads.emplace(child, gi);
        else it->second = add(it->second, gi);
        if (--dependencies[child] == 0) ready.push(child);
      } else {
        deliver_to_leaf(leaves.at(in.impl_ptr().get()), std::move(gi));
      }
    }
    // Free the graph: saved tensors and edges go now, not when the outputs die.
    n->backward = nullptr;
    n->accumulate = nullptr;
    n->inputs.clear();
  }
}

}  // namespace cmha::autograd

namespace cmha {
void Tensor::backward(const Tensor& grad) const {
  if (grad.defined()) {
    autograd::run_backward(*this, grad);
    return;
  }
  CMHA_CHECK(numel() == 1, "backward: an implicit gradient needs a one-element tensor, got " + describe() +
                               "; pass the gradient explicitly");
  autograd::run_backward(*this, Tensor::ones(shape(), dtype(), device()));
}
}  // namespace cmha
