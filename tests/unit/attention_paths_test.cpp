// Which path each attention place takes (nn::attention_paths): on the CPU and
// on the emulated CUDA device always cmha's unfused path, with the reason;
// talking heads never fused; the report `cmha bench` prints, and its JSON's
// attention_paths key. (The fused path itself is tests/cuda/fused_attention_parity_test.cpp,
// on a GPU.)
#include <gtest/gtest.h>

#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "nn/attention/attention.h"
#include "support/check.h"
#include "support/text.h"
#include "tensor/device.h"
#include "support/source_paths.h"

namespace cmha {
namespace {

using cmha::test::has;

nn::AttentionConfig config(const std::string& type) {
  nn::AttentionConfig c;
  c.type = type;
  c.heads = 4;
  c.kv_heads = 2;
  c.key_dim = 32;
  return c;
}

Tensor run_layer(nn::Attention& layer, Device device, bool bf16) {
  const Tensor x = Tensor::full({2, 5, 32}, 0.25).to(device);
  nn::AttentionMask mask;
  mask.causal = true;
  autograd::AutocastGuard autocast(bf16);
  return layer.forward(x, x, mask);
}

TEST(AttentionPaths, TheCpuTakesTheUnfusedPathAndSaysSo) {
  nn::reset_attention_paths();
  for (const char* type : {"concat", "grouped", "collaborative", "talking_heads"}) {
    Generator g(1);
    auto layer = nn::make_attention(config(type), 32, g);
    layer->set_place(std::string(type) + " place");
    run_layer(*layer, Device::cpu(), true);
    run_layer(*layer, Device::cpu(), false);
  }
  const std::vector<nn::AttentionPathRecord> paths = nn::attention_paths();
  ASSERT_EQ(paths.size(), 4u);
  for (const nn::AttentionPathRecord& p : paths) {
    EXPECT_EQ(p.fused_calls, 0) << p.place;
    EXPECT_EQ(p.unfused_calls, 2) << p.place;
  }
  EXPECT_EQ(paths[0].place, "concat place");
  EXPECT_EQ(paths[0].type, "concat");
  EXPECT_EQ(paths[0].unfused_reason, "CPU: cmha's unfused path");
  EXPECT_EQ(paths[2].type, "collaborative");
  EXPECT_EQ(paths[2].unfused_reason, "CPU: cmha's unfused path");
  EXPECT_TRUE(has(paths[3].unfused_reason, "talking-heads")) << paths[3].unfused_reason;
  const std::string report = nn::attention_paths_report();
  EXPECT_EQ(report.rfind("attention paths:\n", 0), 0u) << report;
  EXPECT_TRUE(has(report, "  concat place (concat): unfused: CPU: cmha's unfused path\n")) << report;
  EXPECT_TRUE(has(report, "  grouped place (grouped): unfused: CPU: cmha's unfused path\n")) << report;
  nn::reset_attention_paths();
  EXPECT_EQ(nn::attention_paths_report(), "");
}

TEST(AttentionPaths, TheEmulatedDeviceTakesTheCpuPathBitForBit) {
  for (const char* type : {"concat", "grouped", "collaborative"}) {
    Generator g1(3), g2(3);
    auto cpu_layer = nn::make_attention(config(type), 32, g1);
    auto gpu_layer = nn::make_attention(config(type), 32, g2);
    set_cuda_emulated(true);
    gpu_layer->to(Device::cuda(0));
    nn::reset_attention_paths();
    const Tensor y_gpu = run_layer(*gpu_layer, Device::cuda(0), true).to(Device::cpu());
    const std::vector<nn::AttentionPathRecord> paths = nn::attention_paths();
    set_cuda_emulated(false);
    const Tensor y_cpu = run_layer(*cpu_layer, Device::cpu(), true);
    ASSERT_EQ(paths.size(), 1u);
    EXPECT_EQ(paths[0].unfused_calls, 1);
    EXPECT_TRUE(has(paths[0].unfused_reason, "emulated CUDA device")) << paths[0].unfused_reason;
    EXPECT_EQ(y_gpu.to_float_vector(), y_cpu.to_float_vector()) << type;
  }
  nn::reset_attention_paths();
}

TEST(AttentionPaths, BenchReportsEachPlace) {
  const test::CommandResult r = test::run_cmha(
      "bench " + std::string(CMHA_SOURCE_DIR) +
      "/recipes/bench/transformer_small_collab_dk64.yaml --steps 1 --warmup 0 --threads 1 bench.batch_size=2 "
      "bench.src_len=5 bench.tgt_len=6 model.encoder_layers=1 model.decoder_layers=1");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* place : {"encoder self-attention", "decoder self-attention", "decoder cross-attention"})
    EXPECT_TRUE(has(r.output, std::string("  ") + place + " (collaborative): unfused: CPU: cmha's unfused path\n"))
        << r.output;
  EXPECT_TRUE(has(r.output, "attention paths:\n")) << r.output;
  EXPECT_TRUE(has(r.output, "\"attention_paths\":{\"decoder cross-attention\":\"unfused\"")) << r.output;
}

}  // namespace
}  // namespace cmha
