// GPU parity of the embedding family: the row gather and its scatter-add
// backward, which sums each row in position order on both devices (the same
// f32 additions in the same order), so both are exact.
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "backend/kernels.h"
#include "cuda/parity.h"

using namespace cmha;
using namespace cmha::test;

namespace {

struct Sizes {
  int64_t V, D, N;
};
const Sizes kEmbeddingSizes[] = {{1, 1, 1}, {7, 33, 0}, {5, 1, 1003}, {50, 7, 1003}, {1003, 129, 33}, {3, 1003, 7}};

// N ids in [0, V): uniform, or skewed so that id `V / 2` (a padding id, a
// common token) owns about 60% of the positions.
Tensor ids_of(const Sizes& s, bool skewed, uint64_t seed) {
  Tensor ids = random_of({s.N}, DType::i64, seed, 0.0, static_cast<double>(s.V));
  if (skewed) {
    const Tensor coin = random_of({s.N}, DType::f32, seed + 1, 0.0, 1.0);
    for (int64_t i = 0; i < s.N; ++i)
      if (coin.data<float>()[i] < 0.6f) ids.data<int64_t>()[i] = s.V / 2;
  }
  return ids;
}

// Gradients of mixed magnitude: a different summation order shows in the bits.
Tensor grads_of(int64_t N, int64_t D, uint64_t seed) {
  Tensor g = random_of({N, D}, DType::f32, seed, -1.0, 1.0);
  float* p = g.data<float>();
  for (int64_t i = 0; i < g.numel(); i += 5) p[i] *= 4096.0f;
  return g;
}

::testing::AssertionResult forward_matches(const Sizes& s, const Tensor& ids) {
  const Tensor w = random_of({s.V, s.D}, DType::f32, 7);
  Tensor cpu = Tensor::empty({s.N, s.D}), gpu = Tensor::empty({s.N, s.D}, DType::f32, Device::cuda(0));
  CMHA_KERNEL(Device::cpu(), embedding.forward)(w, ids, cpu);
  CMHA_KERNEL(Device::cuda(0), embedding.forward)(gpu_copy(w), gpu_copy(ids), gpu);
  return same_as_cpu(gpu, cpu);
}

// grad_w starts at zero or (accumulating) at `start`.
::testing::AssertionResult backward_matches(const Sizes& s, const Tensor& ids, const Tensor& start) {
  const Tensor g = grads_of(s.N, s.D, 8);
  Tensor cpu = start.clone(), gpu = gpu_copy(start);
  CMHA_KERNEL(Device::cpu(), embedding.backward)(g, ids, cpu);
  CMHA_KERNEL(Device::cuda(0), embedding.backward)(gpu_copy(g), gpu_copy(ids), gpu);
  return same_as_cpu(gpu, cpu);
}

std::string name(const Sizes& s, bool skewed) {
  return "V " + std::to_string(s.V) + ", D " + std::to_string(s.D) + ", N " + std::to_string(s.N) +
         (skewed ? ", skewed" : ", uniform");
}

}  // namespace

PARITY_TEST(EmbeddingForwardOddSizes, "embedding.forward") {
  for (const Sizes& s : kEmbeddingSizes)
    for (bool skewed : {false, true}) EXPECT_TRUE(forward_matches(s, ids_of(s, skewed, 11))) << name(s, skewed);
}

PARITY_TEST(EmbeddingBackwardSumsInPositionOrder, "embedding.backward") {
  for (const Sizes& s : kEmbeddingSizes)
    for (bool skewed : {false, true}) {
      const Tensor ids = ids_of(s, skewed, 21);
      EXPECT_TRUE(backward_matches(s, ids, Tensor::zeros({s.V, s.D}))) << name(s, skewed);
      EXPECT_TRUE(backward_matches(s, ids, random_of({s.V, s.D}, DType::f32, 22))) << name(s, skewed) << ", accumulating";
    }
  // Every position on one id.
  const Sizes one{9, 65, 2000};
  EXPECT_TRUE(backward_matches(one, Tensor::full({one.N}, 4.0, DType::i64), Tensor::zeros({one.V, one.D})));
}

PARITY_TEST(EmbeddingAtTranslationModelSize, "embedding.forward", "embedding.backward") {
  // A batch of ~30k target tokens, a 40k vocabulary, D = 512 (odd V and N).
  const Sizes s{40009, 512, 30011};
  for (bool skewed : {false, true}) {
    const Tensor ids = ids_of(s, skewed, 31);
    EXPECT_TRUE(forward_matches(s, ids)) << name(s, skewed);
    EXPECT_TRUE(backward_matches(s, ids, Tensor::zeros({s.V, s.D}))) << name(s, skewed);
  }
}

PARITY_TEST(EmbeddingOpWithBackward, "embedding.forward", "embedding.backward", "index.find_out_of_range") {
  // i32 ids [B, T] through the op: conversion, range check, lookup, backward.
  const Tensor w = random_of({37, 16}, DType::f32, 41), g = random_of({4, 9, 16}, DType::f32, 42);
  const Tensor ids = random_of({4, 9}, DType::i32, 43, 0.0, 37.0);
  auto run = [&](Device device) {
    auto on = [&](const Tensor& t) { return device.is_cpu() ? t.clone() : gpu_copy(t); };
    Tensor leaf = on(w).set_requires_grad(true);
    Tensor y = embedding(leaf, on(ids));
    y.backward(on(g));
    return std::vector<Tensor>{y, leaf.grad()};
  };
  const std::vector<Tensor> cpu = run(Device::cpu()), gpu = run(Device::cuda(0));
  EXPECT_TRUE(same_as_cpu(gpu[0], cpu[0]));
  EXPECT_TRUE(same_as_cpu(gpu[1], cpu[1]));
  // An id out of range names the same position and id.
  Tensor bad = ids.clone();
  bad.data<int32_t>()[20] = -1;
  bad.data<int32_t>()[30] = 37;
  std::string cpu_msg, gpu_msg;
  try {
    embedding(w, bad);
  } catch (const Error& e) {
    cpu_msg = e.what();
  }
  try {
    embedding(gpu_copy(w), gpu_copy(bad));
  } catch (const Error& e) {
    gpu_msg = e.what();
  }
  EXPECT_NE(cpu_msg.find("id -1 at position"), std::string::npos) << cpu_msg;
  EXPECT_EQ(gpu_msg.substr(0, gpu_msg.find(" (weight")), cpu_msg.substr(0, cpu_msg.find(" (weight")));
}
