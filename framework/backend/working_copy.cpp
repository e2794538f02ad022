#include "backend/working_copy.h"

#include <mutex>
#include <unordered_map>

#include "backend/kernels.h"

namespace cmha::backend {

namespace {

struct Kept {
  std::weak_ptr<TensorImpl> owner;  // the parameter's handle (a dead one's address may be reused)
  std::weak_ptr<Storage> of;        // the storage the copy was made from (move_to_ replaces it)
  uint64_t version = 0;             // that storage's version then
  Tensor copy;                      // contiguous bf16, the parameter's shape and device
};

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

std::unordered_map<const TensorImpl*, Kept>& table() {
  static std::unordered_map<const TensorImpl*, Kept> t;
  return t;
}

// Leaves only (parameters): a weight computed by an op is new every step.
bool keeps_copy(const Tensor& w) {
  return w.dtype() == DType::f32 && w.is_leaf() && w.is_contiguous() && w.numel() > 0;
}

// The entry of w when it is w's and fits w's shape and device (table_mutex held).
Kept* entry_of(const Tensor& w) {
  auto it = table().find(w.impl_ptr().get());
  if (it == table().end()) return nullptr;
  Kept& k = it->second;
  if (k.owner.lock() != w.impl_ptr() || k.copy.shape() != w.shape() || k.copy.device() != w.device()) return nullptr;
  return &k;
}

}  // namespace

Tensor bf16_working_copy(const Tensor& w) {
  if (!keeps_copy(w)) return w.detach().to(DType::bf16);
  std::lock_guard<std::mutex> lock(table_mutex());
  const std::shared_ptr<Storage>& storage = w.impl().storage;
  if (Kept* k = entry_of(w); k != nullptr && k->of.lock() == storage && k->version == storage->version())
    return k->copy;
  Kept* k = entry_of(w);
  if (k == nullptr) {
    // Copies of parameters that are gone go first.
    std::erase_if(table(), [](const auto& e) { return e.second.owner.expired(); });
    k = &table()[w.impl_ptr().get()];
    *k = Kept{w.impl_ptr(), {}, 0, Tensor::empty(w.shape(), DType::bf16, w.device())};
  }
  // copy_ bumps the copy's version: a graph that saved it stale refuses its backward.
  k->copy.copy_(w.detach());
  k->of = storage;
  k->version = storage->version();
  return k->copy;
}

Tensor bf16_copy_to_rewrite(const Tensor& w) {
  if (!keeps_copy(w)) return Tensor();
  std::lock_guard<std::mutex> lock(table_mutex());
  const Kept* k = entry_of(w);
  return k != nullptr ? k->copy : Tensor();
}

void mark_bf16_copy_current(const Tensor& w) {
  std::lock_guard<std::mutex> lock(table_mutex());
  Kept* k = entry_of(w);
  CMHA_CHECK(k != nullptr, "mark_bf16_copy_current: " + w.describe() + " has no bf16 working copy");
  k->of = w.impl().storage;
  k->version = w.impl().storage->version();
}

}  // namespace cmha::backend
