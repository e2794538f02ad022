#pragma once
// The GPU parity suite (ggml's test-backend-ops, for cmha's kernel table):
// every entry, run on cuda:0 and on the CPU with the same inputs (random
// data of odd sizes, strided and broadcast views, empty tensors), must give
// the CPU's result within a normalised error, or bit for bit where the
// result is exact (masks, indices, integers, copies).
//
// Each test is a PARITY_TEST naming the entries it covers; coverage_test.cpp
// checks, on every machine, that together they name every entry of the table.
// Without a CUDA device (or in a build without CUDA) the tests skip and say why.
#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <set>
#include <string>

#include "tensor/tensor.h"

namespace cmha::test {

// The entries ("family.entry") named by the PARITY_TESTs linked in.
const std::set<std::string>& parity_entries();
struct ParityRegistration {
  ParityRegistration(std::initializer_list<const char*> entries);
};

// Why the parity suite cannot run here ("" when cuda:0 is usable).
std::string parity_skip_reason();

class CudaParity : public ::testing::Test {
 protected:
  void SetUp() override;
  static Device gpu() { return Device::cuda(0); }
  // A contiguous copy of a CPU tensor on cuda:0 (to test a strided or
  // broadcast view, copy the base and take the same view on both sides).
  static Tensor on_gpu(const Tensor& cpu) { return cpu.contiguous().to(gpu()); }
  // The GPU tensor's values on the CPU, contiguous.
  static Tensor on_cpu(const Tensor& gpu) { return gpu.to(Device::cpu()); }
};

// ggml's normalised mean squared error Σ(a - b)² / Σ b², with the worst
// element in the message. Shapes must match; both empty gives 0.
double normalized_error(const Tensor& actual, const Tensor& expected);
::testing::AssertionResult close_to_cpu(const Tensor& gpu_result, const Tensor& cpu_result,
                                        double max_error = 1e-10);
// Exactly the CPU's bytes (dtype, shape and every byte of the values).
::testing::AssertionResult same_as_cpu(const Tensor& gpu_result, const Tensor& cpu_result);

// Random data of any dtype: floats uniform in [low, high), integers in
// [low, high), b8 true with probability 1/2.
Tensor random_of(const Shape& shape, DType dtype, uint64_t seed, double low = -1.0, double high = 1.0);

// A contiguous copy of a CPU tensor on cuda:0, for helpers outside the
// fixture (CudaParity::on_gpu inside it).
inline Tensor gpu_copy(const Tensor& cpu) { return cpu.contiguous().to(Device::cuda(0)); }

// Every dtype, for the entries that take any.
inline constexpr DType kEveryDType[] = {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64, DType::b8};

// A view taken the same way of the CPU and the GPU tensor (a transpose, a
// slice, a broadcast), and the tensor itself.
using View = std::function<Tensor(const Tensor&)>;
inline const View kWhole = [](const Tensor& t) { return t; };

}  // namespace cmha::test

// PARITY_TEST(Name, "family.entry", ...) { body } — a test of CudaParity
// that skips without a GPU, registered as covering the entries named.
#define PARITY_TEST(name, ...)                                                                  \
  static const ::cmha::test::ParityRegistration cmha_parity_registration_##name{__VA_ARGS__}; \
  TEST_F(CudaParity, name)
