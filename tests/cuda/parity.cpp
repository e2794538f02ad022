#include "cuda/parity.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "backend/kernels.h"
#include "tensor/rng.h"

namespace cmha::test {

namespace {
std::set<std::string>& registered() {
  static std::set<std::string> entries;
  return entries;
}
}  // namespace

const std::set<std::string>& parity_entries() { return registered(); }

ParityRegistration::ParityRegistration(std::initializer_list<const char*> entries) {
  for (const char* e : entries) registered().insert(e);
}

std::string parity_skip_reason() {
#ifndef CMHA_WITH_CUDA
  return "GPU parity test skipped: this cmha was built without CUDA (CMHA_CUDA=OFF or no nvcc)";
#else
  if (cuda_device_count() == 0)
    return "GPU parity test skipped: no CUDA device is visible here (run tests/gpu/check.sh on a GPU machine)";
  return "";
#endif
}

void CudaParity::SetUp() {
  const std::string why = parity_skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
}

double normalized_error(const Tensor& actual, const Tensor& expected) {
  const std::vector<float> a = actual.to(Device::cpu()).to_float_vector();
  const std::vector<float> b = expected.to(Device::cpu()).to_float_vector();
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  if (num == 0.0) return 0.0;
  return den == 0.0 ? INFINITY : num / den;
}

::testing::AssertionResult close_to_cpu(const Tensor& gpu_result, const Tensor& cpu_result, double max_error) {
  if (gpu_result.shape() != cpu_result.shape())
    return ::testing::AssertionFailure() << "GPU shape " << gpu_result.describe() << " vs CPU " << cpu_result.describe();
  const std::vector<float> a = gpu_result.to(Device::cpu()).to_float_vector();
  const std::vector<float> b = cpu_result.to(Device::cpu()).to_float_vector();
  // NaN and infinities must sit where the CPU has them.
  for (size_t i = 0; i < a.size(); ++i)
    if (std::isfinite(a[i]) != std::isfinite(b[i]) || (std::isnan(a[i]) != std::isnan(b[i])) ||
        (std::isinf(b[i]) && a[i] != b[i]))
      return ::testing::AssertionFailure() << "element " << i << ": GPU " << a[i] << ", CPU " << b[i];
  double num = 0.0, den = 0.0, worst = -1.0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(b[i])) continue;
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
    if (std::fabs(d) > worst) {
      worst = std::fabs(d);
      at = i;
    }
  }
  const double err = num == 0.0 ? 0.0 : (den == 0.0 ? INFINITY : num / den);
  if (err <= max_error) return ::testing::AssertionSuccess();
  std::ostringstream msg;
  msg << "normalised error " << err << " > " << max_error << " over " << a.size() << " elements; worst at " << at
      << ": GPU " << a[at] << ", CPU " << b[at];
  return ::testing::AssertionFailure() << msg.str();
}

::testing::AssertionResult same_as_cpu(const Tensor& gpu_result, const Tensor& cpu_result) {
  const Tensor a = gpu_result.to(Device::cpu()).contiguous(), b = cpu_result.contiguous();
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return ::testing::AssertionFailure() << "GPU " << gpu_result.describe() << " vs CPU " << cpu_result.describe();
  const auto* pa = static_cast<const unsigned char*>(a.raw_data());
  const auto* pb = static_cast<const unsigned char*>(b.raw_data());
  const size_t width = dtype_size(a.dtype());
  for (size_t i = 0; i < a.nbytes(); ++i)
    if (pa[i] != pb[i])
      return ::testing::AssertionFailure() << "element " << i / width << " differs (GPU "
                                           << a.view({-1}).slice(0, i / width, i / width + 1).to(DType::f32).item()
                                           << ", CPU "
                                           << b.view({-1}).slice(0, i / width, i / width + 1).to(DType::f32).item()
                                           << ")";
  return ::testing::AssertionSuccess();
}

Tensor random_of(const Shape& shape, DType dtype, uint64_t seed, double low, double high) {
  Tensor u = Tensor::empty(shape);
  Generator gen(seed);
  uniform_(u, gen, 0.0f, 1.0f);
  const std::vector<float> v = u.to_float_vector();
  Tensor out = Tensor::empty(shape, dtype);
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = low + (high - low) * v[i];
    switch (dtype) {
      case DType::f32: out.data<float>()[i] = static_cast<float>(x); break;
      case DType::bf16: out.data<bf16>()[i] = float_to_bf16(static_cast<float>(x)); break;
      case DType::f16: out.data<f16>()[i] = float_to_f16(static_cast<float>(x)); break;
      case DType::i32: out.data<int32_t>()[i] = static_cast<int32_t>(std::floor(x)); break;
      case DType::i64: out.data<int64_t>()[i] = static_cast<int64_t>(std::floor(x)); break;
      case DType::b8: out.data<bool>()[i] = v[i] < 0.5f; break;
    }
  }
  return out;
}

}  // namespace cmha::test
