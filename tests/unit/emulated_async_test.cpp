// The asynchronous emulated CUDA device (tensor/emulated_stream.h,
// CMHA_EMULATE_CUDA=async): kernels and copies run later, on stream threads;
// fresh blocks hold poison; the host thread never touches device memory;
// events order streams; every host wait is counted. And the GPU defects it
// (or a host-side rule) catches: padded keys' gradients, loss chunks sized
// for a GPU, cuBLASLt's declared alignment, one read event per stream.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>

#include "autograd/deferred_checks.h"
#include "autograd/loss_chunks.h"
#include "autograd/ops.h"
#include "backend/cuda/gemm_alignment.h"
#include "support/check.h"
#include "support/emulated_cuda.h"
#include "support/files.h"
#include "support/text.h"
#include "tensor/emulated_stream.h"
#include "tensor/pinned_reads.h"
#include "support/source_paths.h"

namespace cmha {
namespace {

using cmha::test::has;
using cmha::test::AsyncEmulated;

const Device kGpu = Device::cuda(0);

TEST(EmulatedAsync, FreshBlocksHoldPoison) {
  AsyncEmulated on;
  const std::vector<float> f = Tensor::empty({5}, DType::f32, kGpu).to(Device::cpu()).to_float_vector();
  for (float x : f) EXPECT_TRUE(std::isnan(x));
  const std::vector<float> b = Tensor::empty({3}, DType::bf16, kGpu).to(Device::cpu()).to(DType::f32).to_float_vector();
  for (float x : b) EXPECT_TRUE(std::isnan(x));
  const Tensor i = Tensor::empty({4}, DType::i64, kGpu).to(Device::cpu());
  for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(i.data<int64_t>()[k], -1);  // 0xFF bytes
}

TEST(EmulatedAsync, TheHostNeverTouchesDeviceMemory) {
  AsyncEmulated on;
  Tensor x = Tensor::full({2, 3}, 1.5, DType::f32, kGpu);
  const std::string e = test::error_of([&] { x.data<float>("my_host_op"); });
  EXPECT_TRUE(has(e, "my_host_op") && has(e, "host code cannot read") && has(e, "cuda:0")) << e;
  // Work queued on the stream comes back right through a finished copy.
  Tensor y = add(x, x);
  EXPECT_EQ(y.to(Device::cpu()).to_float_vector(), std::vector<float>(6, 3.0f));
  EXPECT_FLOAT_EQ(sum(y, {0, 1}).item(), 18.0f);
}

TEST(EmulatedAsync, KernelsRunLaterOnTheStreamAndTheHostWaitsOnlyToRead) {
  AsyncEmulated on;
  // Hold the compute stream on an event of the copy stream that the host
  // releases: the queued kernels cannot have run before, whatever the host does.
  std::atomic<bool> released{false};
  emulated_enqueue(EmulatedStreamId::copy, [&] {
    while (!released) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  EmulatedEvent gate;
  gate.record(EmulatedStreamId::copy);
  gate.wait_on(EmulatedStreamId::compute);
  const uint64_t syncs = emulated_host_syncs();
  Tensor x = Tensor::full({4}, 2.0, DType::f32, kGpu);
  Tensor y = mul(x, x);
  EXPECT_FALSE(gate.query());
  EXPECT_EQ(emulated_host_syncs(), syncs);  // queueing never waits
  released = true;
  EXPECT_EQ(y.to(Device::cpu()).to_float_vector(), std::vector<float>(4, 4.0f));
  EXPECT_TRUE(gate.query());
  EXPECT_EQ(emulated_host_syncs(), syncs + 1);
  EXPECT_EQ(emulated_host_syncs_by_cause()["copy to host"] > 0, true);
}

TEST(EmulatedAsync, AFailedKernelIsReportedAtTheNextWait) {
  AsyncEmulated on;
  emulated_enqueue(EmulatedStreamId::compute, [] { throw Error("kernel X failed on the stream"); });
  const std::string e = test::error_of([&] { emulated_synchronize(EmulatedStreamId::compute, "test"); });
  EXPECT_TRUE(has(e, "kernel X failed")) << e;
  // Reported once: the stream goes on.
  EXPECT_EQ(Tensor::full({2}, 1.0, DType::f32, kGpu).to(Device::cpu()).to_float_vector(), std::vector<float>(2, 1.0f));
}

TEST(EmulatedAsync, CopiesAheadAreAwaitedBeforeUse) {
  AsyncEmulated on;
  Tensor host = Tensor::full({256}, 7.0).pinned();
  ASSERT_TRUE(host.is_pinned());
  Tensor dev;
  {
    const CopyAheadScope ahead;
    dev = host.to(kGpu);  // on the copy stream, up to 2 ms late
  }
  await_copies_ahead(kGpu);
  EXPECT_EQ(mul_scalar(dev, 2.0f).to(Device::cpu()).to_float_vector(), std::vector<float>(256, 14.0f));
  // A copy ahead dropped unawaited: its block is freed after the copy, not under it.
  {
    const CopyAheadScope ahead;
    Tensor dropped = host.to(kGpu);
  }
  EXPECT_EQ(Tensor::full({256}, 1.0, DType::f32, kGpu).to(Device::cpu()).to_float_vector(), std::vector<float>(256, 1.0f));
}

// cuDNN leaves the rows of padding keys in dK and dV unwritten; the
// emulator's stand-in does the same and a fresh block holds NaN, so the
// gradient of every padded key must be zeroed by fused_attention itself.
TEST(EmulatedAsync, FusedAttentionGradientsOfPaddingKeysAreZero) {
  AsyncEmulated on;
  const int64_t B = 2, H = 2, Tq = 3, Tk = 5, D = 8;
  auto leaf = [&](const Shape& s, uint64_t seed) {
    return test::random_tensor(s, seed).to(DType::bf16).to(kGpu).set_requires_grad(true);
  };
  Tensor q = leaf({B, H, Tq, D}, 1), k = leaf({B, H, Tk, D}, 2), v = leaf({B, H, Tk, D}, 3);
  // Row 0: 3 keys then 2 padding; row 1: 4 keys then 1.
  FusedAttentionOptions o;
  o.scale = 0.35f;
  o.key_padding = Tensor::from_vector({0, 0, 0, 1, 1, 0, 0, 0, 0, 1}, {B, Tk}).to(DType::b8).to(kGpu);
  std::string reason;
  ASSERT_TRUE(fused_attention_supported(q, k, v, o, reason)) << reason;
  sum(fused_attention(q, k, v, o).to(DType::f32)).backward();
  const std::vector<float> dk = k.grad().to(Device::cpu()).to(DType::f32).to_float_vector();
  const std::vector<float> dv = v.grad().to(Device::cpu()).to(DType::f32).to_float_vector();
  const int64_t length[2] = {3, 4};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < Tk; ++j)
        for (int64_t d = 0; d < D; ++d) {
          const size_t i = static_cast<size_t>(((b * H + h) * Tk + j) * D + d);
          EXPECT_TRUE(std::isfinite(dk[i]) && std::isfinite(dv[i])) << "b " << b << " key " << j;
          if (j >= length[b]) {
            EXPECT_TRUE(dk[i] == 0.0f && dv[i] == 0.0f) << "padding key " << j << " of row " << b;
          }
        }
  // And the values' gradients of real keys are not all zero (the stand-in ran).
  float total = 0;
  for (float x : dv) total += std::fabs(x);
  EXPECT_GT(total, 0.0f);
}

// `cmha bench --device cuda` on the asynchronous emulator: host_syncs_per_step
// counts the times a timed step made the host wait for the device before its
// loss is read. The embedding's id check and the loss's target check write
// their answers on the device and are read after the step
// (autograd/deferred_checks.h); the bench's mean loss is a sum times a host
// number (a mean's divisor would be counted on the device and read). A step
// of the transformer (concat and collaborative) and the ViT, f32 and bf16,
// makes no host wait (issue 33).
long long host_syncs_of(const std::string& bench_args) {
  setenv("CMHA_EMULATE_CUDA", "async", 1);
  const test::CommandResult r = test::run_cmha("bench " + bench_args + " --device cuda --steps 2 --warmup 1 --threads 1");
  unsetenv("CMHA_EMULATE_CUDA");
  EXPECT_EQ(r.code, 0) << r.output;
  const std::string key = "\"host_syncs_per_step\":";
  const size_t at = r.output.find(key);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no host_syncs_per_step in: " << r.output;
    return -2;
  }
  EXPECT_TRUE(has(r.output, "host waits for the (emulated) GPU per timed step")) << r.output;
  return std::stoll(r.output.substr(at + key.size()));
}

TEST(EmulatedAsync, ABenchStepMakesNoHostWait) {
  const std::string small = " bench.batch_size=2 bench.src_len=5 bench.tgt_len=6 model.encoder_layers=1 model.decoder_layers=1";
  for (const char* recipe : {"transformer_small_collab_dk64.yaml", "transformer_small_concat_dk256.yaml"})
    for (const char* bf16 : {"false", "true"})
      EXPECT_EQ(host_syncs_of(std::string(CMHA_SOURCE_DIR) + "/recipes/bench/" + recipe + small + " train.bf16=" + bf16),
                0)
          << recipe << " bf16 " << bf16;
  for (const char* bf16 : {"false", "true"})
    EXPECT_EQ(host_syncs_of(std::string(CMHA_SOURCE_DIR) +
                            "/recipes/local/fashion_mnist_vit.yaml bench.batch_size=4 train.bf16=" + bf16),
              0)
        << "vit bf16 " << bf16;
  // On the CPU there is nothing to count.
  const test::CommandResult cpu = test::run_cmha("bench " + std::string(CMHA_SOURCE_DIR) +
                                                 "/recipes/bench/transformer_small_collab_dk64.yaml" + small +
                                                 " --steps 1 --warmup 0 --threads 1");
  EXPECT_TRUE(has(cpu.output, "\"host_syncs_per_step\":-1")) << cpu.output;
}

// An id out of range in a step on the GPU is still one sentence naming it,
// raised when the deferred check runs.
TEST(EmulatedAsync, DeferredIdCheckGivesTheSameError) {
  AsyncEmulated on;
  Tensor w = Tensor::full({5, 3}, 1.0, DType::f32, kGpu);
  Tensor ids = Tensor::from_vector_i64({1, 7, 2}, {3}).to(kGpu);
  std::string e;
  {
    autograd::DeferredChecks checks;
    const autograd::DeferredChecks::Scope scope(checks);
    checks.set_batch("update 3's batch 1");
    Tensor y = embedding(w, ids);  // no wait, no error yet: the bad row reads as zeros
    EXPECT_EQ(checks.pending(), 1u);
    EXPECT_EQ(y.to(Device::cpu()).to_float_vector(), std::vector<float>({1, 1, 1, 0, 0, 0, 1, 1, 1}));
    e = test::error_of([&] { checks.run(); });
  }
  EXPECT_TRUE(has(e, "embedding: id 7 at position") && has(e, "vocabulary of 5") && has(e, "in update 3's batch 1"))
      << e;
  // Outside a scope the check runs at once, as on the CPU.
  EXPECT_TRUE(has(test::error_of([&] { embedding(w, ids); }), "embedding: id 7"));
  // A target out of range likewise.
  Tensor logits = Tensor::zeros({2, 4}, DType::f32, kGpu);
  Tensor target = Tensor::from_vector_i64({1, 9}, {2}).to(kGpu);
  {
    autograd::DeferredChecks checks;
    const autograd::DeferredChecks::Scope scope(checks);
    Tensor l = cross_entropy(logits, target, 0.0f, -100, Reduction::sum);
    EXPECT_TRUE(std::isfinite(l.item()));
    EXPECT_TRUE(has(test::error_of([&] { checks.run(); }), "cross_entropy: target 9 in row 1")) << "target";
  }
}

// linear_cross_entropy's chunks: cache-sized on the CPU (and the emulated
// GPU, which must give the CPU's numbers), a large GEMM's worth on a GPU.
TEST(LossChunks, SizedByDeviceMemoryOnAGpu) {
  const int64_t V = 32768, N = 25000;
  EXPECT_EQ(loss_chunk_rows(N, V, loss_chunk_bytes(false, 0)), 64);  // 8 MB of f32 logits
  const size_t h100 = size_t{80} << 30;
  EXPECT_EQ(loss_chunk_rows(N, V, loss_chunk_bytes(true, h100)), 4096);  // 512 MiB
  EXPECT_EQ(loss_chunk_rows(1000, V, loss_chunk_bytes(true, h100)), 1000);  // one chunk
  EXPECT_GE(loss_chunk_rows(N, V, loss_chunk_bytes(true, size_t{16} << 30)), 2048);
}

// Every matrix of a batched GEMM is at least as aligned as what cmha declares
// to cuBLASLt: the base pointer alone (the old rule) declared 16 bytes for
// bf16 matrices 2·odd bytes apart.
TEST(GemmAlignment, HoldsForEveryMatrixOfTheOuterBatchLoop) {
  const uintptr_t base = 0x10000;  // 256-aligned
  const std::vector<int64_t> sizes = {3, 5};
  const std::vector<int64_t> strides = {2 * 1000, 2 * 77};  // bf16 elements, in bytes: 2000 and 154
  const uint32_t declared = cuda::batch_alignment(base, sizes, strides);
  EXPECT_LT(declared, cuda::alignment_of_address(base));
  for (int64_t i = 0; i < sizes[0]; ++i)
    for (int64_t j = 0; j < sizes[1]; ++j) {
      const uintptr_t p = base + static_cast<uintptr_t>(i * strides[0] + j * strides[1]);
      EXPECT_GE(cuda::alignment_of_address(p), declared) << i << ", " << j;
    }
  EXPECT_EQ(declared, 2u);
  // Size-1 dims never move the pointer; a merged batch of one matrix keeps the base's alignment.
  EXPECT_EQ(cuda::batch_alignment(base, {1, 1}, {2, 6}), 256u);
  EXPECT_EQ(cuda::batch_alignment(base + 16, {4}, {64}), 16u);
}

// A pinned block read on the copy stream and then the compute stream holds
// an event for each: re-recording one event on the later stream would hand
// the block out while the copy stream may still read it.
TEST(PinnedReads, OneEventPerDeviceAndStream) {
  PinnedReads<int> reads;
  int made = 0;
  auto make = [&] { return ++made; };
  const int copy_stream = 0, compute_stream = 0;
  const void* copy = &copy_stream;
  const void* compute = &compute_stream;
  EXPECT_EQ(reads.for_copy(0, copy, make), 1);
  EXPECT_EQ(reads.for_copy(0, compute, make), 2);
  EXPECT_EQ(reads.for_copy(0, copy, make), 1);  // the copy stream's own, re-recorded
  EXPECT_EQ(reads.for_copy(1, copy, make), 3);  // another device
  EXPECT_EQ(reads.all().size(), 3u);
}

}  // namespace
}  // namespace cmha
