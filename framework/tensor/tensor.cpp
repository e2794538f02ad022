#include "tensor/tensor.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "tensor/emulated_stream.h"

namespace cmha {

Shape contiguous_strides(const Shape& shape) {
  Shape s(shape.size());
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    // An empty tensor's other sizes may multiply past 2^63 (an IDX header of
    // [0, 2^32-1, 2^32-1]): it addresses no element, so its strides saturate.
    if (__builtin_mul_overflow(acc, std::max<int64_t>(shape[i], 1), &acc)) acc = INT64_MAX;
  }
  return s;
}

int64_t shape_numel(const Shape& shape) {
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) throw Error("the shape " + shape_str(shape) + " has more than 2^63 elements");
  return n;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    CMHA_CHECK(da == db || da == 1 || db == 1, std::string(op) + ": shapes " + shape_str(a) + " and " +
                                                   shape_str(b) + " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Tensor& t, const Shape& out_shape) {
  const size_t n = out_shape.size(), m = t.shape().size();
  Shape s(n, 0);
  for (size_t i = 0; i < m; ++i) {
    const size_t o = n - m + i;
    s[o] = t.shape()[i] == 1 && out_shape[o] != 1 ? 0 : t.strides()[i];
  }
  return s;
}

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl().storage;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// ---------------------------------------------------------------- factories

namespace {
Tensor contiguous_over(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}
void check_sizes(const Shape& shape) {
  for (int64_t d : shape)
    CMHA_CHECK(d >= 0, "cannot create a tensor of shape " + shape_str(shape) + ": negative size");
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  check_sizes(shape);
  return contiguous_over(
      std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype), device), shape, dtype);
}

Tensor Tensor::empty_pinned(const Shape& shape, DType dtype) {
  check_sizes(shape);
  return contiguous_over(Storage::pinned_host(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype)), shape,
                         dtype);
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape) {
  CMHA_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
             "from_vector: " + std::to_string(values.size()) + " values for shape " + shape_str(shape));
  Tensor t = empty(shape, DType::f32);
  std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::from_vector_i64(const std::vector<int64_t>& values, const Shape& shape) {
  CMHA_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
             "from_vector_i64: " + std::to_string(values.size()) + " values for shape " + shape_str(shape));
  Tensor t = empty(shape, DType::i64);
  std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

Tensor Tensor::from_vector_i32(const std::vector<int32_t>& values, const Shape& shape) {
  CMHA_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
             "from_vector_i32: " + std::to_string(values.size()) + " values for shape " + shape_str(shape));
  Tensor t = empty(shape, DType::i32);
  std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    CMHA_CHECK(d >= 0, "from_blob: shape " + shape_str(shape) + " has a negative size");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::borrowed(data, static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

// ---------------------------------------------------------------- metadata

TensorImpl& Tensor::impl() const {
  if (!impl_) throw Error("use of an undefined (empty) Tensor");
  return *impl_;
}

int64_t Tensor::wrap_dim(int64_t d, const char* op) const {
  const int64_t n = dim();
  CMHA_CHECK(d >= -n && d < n, std::string(op) + ": dim " + std::to_string(d) + " is out of range for " +
                                   describe());
  return d < 0 ? d + n : d;
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, "size")]; }

int64_t Tensor::numel() const { return shape_numel(shape()); }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element to address: any strides (as PyTorch)
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

std::string Tensor::describe() const {
  if (!impl_) return "undefined tensor";
  std::string s = std::string(dtype_name(dtype())) + shape_str(shape()) + " on " + device().str();
  if (!impl_->name.empty()) s = "'" + impl_->name + "' " + s;
  return s;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(impl().storage->data()) + offset() * static_cast<int64_t>(dtype_size(dtype()));
}

void Tensor::check_dtype(DType expected, const char* op) const {
  CMHA_CHECK(dtype() == expected, std::string(op) + ": expected " + dtype_name(expected) + ", got " + describe());
}

void Tensor::check_host(const char* op) const {
  if (device().is_cpu() || (impl().storage->on_host() && emulated_memory_readable())) return;
  CMHA_CHECK(false, std::string(op) + ": host code cannot read " + describe() +
                                    " (device memory); copy it with to(Device::cpu()) or run a kernel of " +
                                    device().str());
}

Device common_device(const char* op, std::initializer_list<Tensor> ts) {
  const Tensor* first = nullptr;
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    if (first == nullptr) first = &t;
    else
      CMHA_CHECK(t.device() == first->device(), std::string(op) + ": its inputs are on different devices (" +
                                                    first->describe() + " and " + t.describe() + ")");
  }
  return first ? first->device() : Device::cpu();
}

// ---------------------------------------------------------------- autograd meta
// (The methods that compute -- copy_, fill_, zeros/full/arange, to(Device) --
// are defined in backend/tensor_copy.cpp, through the kernel table; those that
// record autograd history -- clone, contiguous, to(DType), item and the vector
// reads, the views -- in autograd/tensor_methods.cpp and autograd/view.cpp:
// Tensor's header sits below both layers so that kernels can take Tensors.)

Tensor Tensor::detach() const { return make_view(*this, shape(), strides(), offset()); }

Tensor& Tensor::set_requires_grad(bool on) {
  CMHA_CHECK(!on || is_floating(dtype()), "set_requires_grad: only floating-point tensors can require grad, got " +
                                              describe());
  CMHA_CHECK(is_leaf(), "set_requires_grad: " + describe() + " is the result of an op; only leaves can be set");
  impl().requires_grad = on;
  return *this;
}

}  // namespace cmha
