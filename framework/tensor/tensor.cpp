#include "tensor/tensor.h"

#include <cstring>
#include <sstream>

#include "autograd/engine.h"
#include "backend/cpu/dispatch.h"
#include "backend/cpu/strided.h"

namespace cmha {

Shape contiguous_strides(const Shape& shape) {
  Shape s(shape.size());
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
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

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    CMHA_CHECK(d >= 0, "cannot create a tensor of shape " + shape_str(shape) + ": negative size");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (device.is_cpu()) std::memset(t.raw_data(), 0, t.nbytes());
  else t.fill_(0.0);
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
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

Tensor Tensor::arange(int64_t n, DType dtype) {
  Tensor t = empty({n}, dtype);
  CMHA_DISPATCH(dtype, {
    T* p = static_cast<T*>(t.raw_data());
    for (int64_t i = 0; i < n; ++i) p[i] = cpu::store_from_double<T>(static_cast<double>(i));
  });
  return t;
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
  CMHA_CHECK(device().is_cpu(), std::string(op) + ": host code cannot read " + describe() +
                                    " (device memory); copy it with to(Device::cpu()) or run a kernel of " +
                                    device().str());
}

void Tensor::check_cpu(const char* op) const {
  CMHA_CHECK(device().is_cpu(), std::string(op) + ": this op runs on the CPU only so far, got " + describe());
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

float Tensor::item() const {
  CMHA_CHECK(numel() == 1, "item: expected a one-element tensor, got " + describe());
  return to_float_vector()[0];
}

std::vector<float> Tensor::to_float_vector() const {
  autograd::NoGradGuard no_grad;
  Tensor c = contiguous().to(DType::f32);
  const float* p = c.data<float>();
  return std::vector<float>(p, p + c.numel());
}

std::vector<int64_t> Tensor::to_i64_vector() const {
  autograd::NoGradGuard no_grad;
  Tensor c = contiguous().to(DType::i64);
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

// ---------------------------------------------------------------- copies

void Tensor::copy_(const Tensor& src) {
  check_cpu("copy_");
  src.check_cpu("copy_");
  const Shape out_shape = cpu::broadcast_shapes(shape(), src.shape(), "copy_");
  CMHA_CHECK(out_shape == shape(), "copy_: source " + src.describe() + " does not broadcast to " + describe());
  const Shape src_strides = cpu::broadcast_strides(src, shape());
  const Shape& dst_strides = strides();
  char* dst_base = static_cast<char*>(raw_data());
  const char* src_base = static_cast<const char*>(src.raw_data());
  const DType dt = dtype(), st = src.dtype();
  CMHA_DISPATCH(dt, {
    using D = T;
    D* d = reinterpret_cast<D*>(dst_base);
    CMHA_DISPATCH(st, {
      const T* s = reinterpret_cast<const T*>(src_base);
      cpu::for_each_row<2>(shape(), {&dst_strides, &src_strides},
                           [&](const std::array<int64_t, 2>& base, int64_t n, const std::array<int64_t, 2>& step) {
                             D* dp = d + base[0];
                             const T* sp = s + base[1];
                             for (int64_t i = 0; i < n; ++i) dp[i * step[0]] = cpu::convert<D>(sp[i * step[1]]);
                           });
    });
  });
}

void Tensor::fill_(double value) {
  check_cpu("fill_");
  const Shape& st = strides();
  char* base = static_cast<char*>(raw_data());
  CMHA_DISPATCH(dtype(), {
    T* p = reinterpret_cast<T*>(base);
    const T v = cpu::store_from_double<T>(value);
    cpu::for_each_row<1>(shape(), {&st},
                         [&](const std::array<int64_t, 1>& b, int64_t n, const std::array<int64_t, 1>& step) {
                           for (int64_t i = 0; i < n; ++i) p[b[0] + i * step[0]] = v;
                         });
  });
}

Tensor Tensor::detach() const {
  Tensor t = make_view(*this, shape(), strides(), offset());
  return t;
}

Tensor Tensor::clone() const {
  Tensor out = Tensor::empty(shape(), dtype(), device());
  out.copy_(*this);
  if (autograd::needs_grad({*this}))
    autograd::record(out, "clone", {*this}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  return out;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = Tensor::empty(shape(), target, device());
  out.copy_(*this);
  if (is_floating(target) && is_floating(dtype()) && autograd::needs_grad({*this})) {
    const DType source = dtype();
    autograd::record(out, "to_dtype", {*this}, [source](const Tensor& g) { return std::vector<Tensor>{g.to(source)}; });
  }
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  throw Error("to(" + target.str() + "): copies between devices need the CUDA backend, which this cmha lacks (" +
              describe() + ")");
}

Tensor& Tensor::set_requires_grad(bool on) {
  CMHA_CHECK(!on || is_floating(dtype()), "set_requires_grad: only floating-point tensors can require grad, got " +
                                              describe());
  CMHA_CHECK(is_leaf(), "set_requires_grad: " + describe() + " is the result of an op; only leaves can be set");
  impl().requires_grad = on;
  return *this;
}

}  // namespace cmha
