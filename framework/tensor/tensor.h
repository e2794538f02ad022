#pragma once
// The one Tensor type: shape, strides, storage offset, dtype, device and
// optional autograd meta. Tensor is a cheap handle (shared_ptr to TensorImpl);
// copies alias the same data, as in PyTorch.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/storage.h"

namespace cmha {

using Shape = std::vector<int64_t>;

class Tensor;
namespace autograd {
struct Node;
}

using GradReadyHook = std::function<void(Tensor& param)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;  // in elements
  int64_t offset = 0;
  DType dtype = DType::f32;

  // Autograd meta: a leaf has requires_grad and no grad_fn; an op result has a grad_fn.
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;
  std::vector<GradReadyHook> grad_ready_hooks;
  std::string name;  // optional, shown in errors (parameter names)
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories (contiguous, on `device`) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu());
  // On the CPU, in page-locked memory when a GPU is present (Storage::pinned_host):
  // what a data loader fills with a batch that goes to the GPU next.
  static Tensor empty_pinned(const Shape& shape, DType dtype = DType::f32);
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape);
  static Tensor from_vector_i64(const std::vector<int64_t>& values, const Shape& shape);
  static Tensor from_vector_i32(const std::vector<int32_t>& values, const Shape& shape);
  static Tensor arange(int64_t n, DType dtype = DType::f32);
  // A contiguous tensor over memory owned elsewhere, on `device` (as
  // torch.from_blob): never freed by cmha; the owner keeps it alive.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device);
  static Tensor scalar(float v) { return from_vector({v}, {}); }

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t size(int64_t d) const;    // negative d counts from the end
  int64_t numel() const;
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  bool is_contiguous() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  std::string describe() const;  // "f32[2, 3] on cpu"
  // Wraps a possibly negative dim into [0, dim()); throws naming `op` when out of range.
  int64_t wrap_dim(int64_t d, const char* op) const;

  // ---- raw data ----
  // Host access: the elements of a CPU tensor. On another device it is an
  // error naming `op` (host code must not read device memory; copy with
  // to(Device::cpu()) or run a kernel of that device).
  template <typename T>
  T* data(const char* op = "data<T>()") const {
    check_dtype(dtype_of<T>(), op);
    check_host(op);
    return static_cast<T*>(raw_data());
  }
  // The first element's address in the tensor's own memory, host or device
  // (for the kernels of that device; no host-access check).
  void* raw_data() const;
  float item() const;  // the value of a one-element tensor, as float
  std::vector<float> to_float_vector() const;
  std::vector<int64_t> to_i64_vector() const;

  // ---- copies and conversions (not recorded by autograd unless stated) ----
  Tensor contiguous() const;          // autograd-aware; returns *this when already contiguous
  Tensor clone() const;               // autograd-aware deep copy
  Tensor to(DType dtype) const;       // autograd-aware between floating types
  Tensor to(Device device) const;     // copy to another device
  // A contiguous copy of this CPU tensor in page-locked memory when a GPU is
  // present (empty_pinned), whose copy to the GPU then does not make the host wait.
  Tensor pinned() const;
  bool is_pinned() const;
  // Moves this tensor's values to `device` in place: every handle of it
  // (a layer's member, the module's list, a tied parameter) then sees a
  // contiguous tensor there, with its autograd meta and name kept. For
  // parameters before training (nn::Module::to); views of the old storage
  // keep the old memory.
  void move_to_(Device device);
  Tensor detach() const;              // same data, no autograd history
  void copy_(const Tensor& src);      // in place, no autograd; shapes must match (src may broadcast)
  void fill_(double value);           // in place, no autograd
  void zero_() { fill_(0.0); }
  // The in-place writes into this tensor's storage so far (storage.h). Every
  // Tensor-API write bumps it; code that writes through data<T>() or a kernel
  // into an existing tensor calls bump_version() itself, so that a backward
  // which saved this memory sees the change (autograd/engine.h, SavedTensor).
  uint64_t version() const { return impl().storage->version(); }
  void bump_version() const { impl().storage->bump_version(); }

  // ---- views (autograd-aware; share storage when possible) ----
  Tensor reshape(const Shape& shape) const;   // one dim may be -1; copies when not viewable
  Tensor view(const Shape& shape) const;      // never copies; throws when not viewable (strided
                                              // inputs view when no merged dims straddle a gap)
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // drops `dim`
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const {
    return slice(dim, start, start + length);
  }
  Tensor expand(const Shape& shape) const;    // -1 keeps a size; size-1 dims broadcast
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;

  // ---- autograd ----
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& set_requires_grad(bool on);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  Tensor grad() const { return Tensor(impl().grad); }
  void set_grad(const Tensor& g) { impl().grad = g.impl_; }
  void zero_grad() { impl().grad.reset(); }
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl().grad_fn; }
  // Runs backward from this tensor. `grad` defaults to 1 for a one-element tensor.
  void backward(const Tensor& grad = Tensor()) const;
  // Called once per backward pass when this leaf's gradient is final.
  void register_grad_ready_hook(GradReadyHook hook) { impl().grad_ready_hooks.push_back(std::move(hook)); }
  const std::string& name() const { return impl().name; }
  Tensor& set_name(std::string n) {
    impl().name = std::move(n);
    return *this;
  }

  // ---- checks that raise clear errors naming `op` ----
  void check_dtype(DType expected, const char* op) const;
  void check_host(const char* op) const;  // CPU memory, readable by host code

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// The device that every defined tensor of `ts` lives on; mixing devices in
// one op is an error naming `op` and both tensors.
Device common_device(const char* op, std::initializer_list<Tensor> ts);

// The shape two operands broadcast to (NumPy rules); throws naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Strides of `t` as seen from `out_shape` after broadcasting (0 on broadcast dims).
Shape broadcast_strides(const Tensor& t, const Shape& out_shape);

// Contiguous strides for a shape (row-major).
Shape contiguous_strides(const Shape& shape);
int64_t shape_numel(const Shape& shape);
// A new tensor that views `base`'s storage with the given geometry (no autograd).
Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);

}  // namespace cmha
