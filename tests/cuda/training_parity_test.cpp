// Whole training runs on cuda:0 against the same runs on the CPU: each
// attention type of the transformer (through the unfused matmul/softmax
// kernels) and the vision transformer, a few fixed-seed updates through
// `cmha train`, the checkpoints compared parameter by parameter; and the
// stream-ordered pool serving every step after warm-up (no new device memory).
//
// Tolerance: a few Adam updates from the same initialisation. The GPU's sums
// run in other orders (GEMMs, softmax, layer norm), so gradients differ at
// the 1e-6 relative level; Adam divides by √v, so an update moves each
// weight by at most about lr either way. After 3 updates at lr ≤ 1e-3 the
// weights (|w| ~ 0.05) differ by far less than 1e-3 relative: a normalised
// error of 1e-8 passes that and fails a wrong kernel (which shifts every
// weight it touches by the whole update, ~1e-2 relative and more).
#include <cmath>
#include <cstdlib>

#include "cuda/parity.h"
#include "distributed/launch.h"
#include "support/check.h"
#include "support/tiny_images.h"
#include "support/toy_translation.h"
#include "tensor/safetensors.h"
#include "train/bench.h"
#include "support/source_paths.h"

using namespace cmha;
using namespace cmha::test;

namespace {

// Every weight of the GPU run's checkpoint against the CPU run's.
void expect_checkpoints_close(const std::string& gpu_path, const std::string& cpu_path, double tol) {
  const SafetensorsFile g = load_safetensors(gpu_path), c = load_safetensors(cpu_path);
  ASSERT_EQ(g.tensors.size(), c.tensors.size());
  for (const auto& [name, t] : c.tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(g.tensors.count(name));
    if (!is_floating(t.dtype())) continue;
    EXPECT_TRUE(close_to_cpu(g.tensors.at(name), t, tol));
  }
}

std::string translation_args(const std::string& dir, const std::string& attention) {
  return std::string(CMHA_SOURCE_DIR) + "/recipes/local/en_de_transformer_small.yaml data.train_prefix=" + dir +
         "/train data.valid_prefix=" + dir + "/valid data.test_prefix= model.vocab_size=100 data.max_tokens=512 "
         "data.spm_sample_sentences=1000 train.max_updates=3 train.save_every=3 train.validate_every=3 "
         "train.log_every=1000 lr.warmup=2 eval.valid_sentences=10 eval.valid_bleu=false train.bf16=false "
         "train.best_metric=loss train.best_mode=min model.d_model=64 model.ffn_dim=128 model.encoder_layers=2 "
         "model.decoder_layers=2 "
         "model.attention.type=" + attention + " model.attention.key_dim=" +
         (attention == "collaborative" ? "32" : "64") + (attention == "grouped" ? " model.attention.kv_heads=2" : "");
}

}  // namespace

TEST_F(CudaParity, EveryAttentionTypeTrainsAsOnTheCpu) {
  const std::string dir = toy_dir("gpu_training");
  for (const char* attention : {"concat", "collaborative", "talking_heads", "grouped"}) {
    SCOPED_TRACE(attention);
    const std::string args = translation_args(dir, attention);
    const auto cpu = run_cmha("train " + args + " train.save_dir=" + dir + "/cpu_" + attention + " train.device=cpu");
    ASSERT_EQ(cpu.code, 0) << cpu.output;
    const auto gpu = run_cmha("train " + args + " train.save_dir=" + dir + "/gpu_" + attention + " train.device=cuda");
    ASSERT_EQ(gpu.code, 0) << gpu.output;
    expect_checkpoints_close(dir + "/gpu_" + attention + "/checkpoint_3.safetensors",
                             dir + "/cpu_" + attention + "/checkpoint_3.safetensors", 1e-8);
  }
}

TEST_F(CudaParity, VisionTransformerTrainsAsOnTheCpu) {
  const std::string dir = temp_dir("gpu_training_vit");
  write_tiny_fashion_mnist(dir, 120, 30);
  const std::string run = tiny_run(dir, dir + "/unused") + " train.max_updates=3 train.max_epochs=0 train.save_every=3";
  const auto cpu = run_cmha("train " + run + " train.save_dir=" + dir + "/cpu train.device=cpu");
  ASSERT_EQ(cpu.code, 0) << cpu.output;
  const auto gpu = run_cmha("train " + run + " train.save_dir=" + dir + "/gpu train.device=cuda");
  ASSERT_EQ(gpu.code, 0) << gpu.output;
  expect_checkpoints_close(dir + "/gpu/checkpoint_3.safetensors", dir + "/cpu/checkpoint_3.safetensors", 1e-8);
}

TEST_F(CudaParity, StepsAfterWarmupTakeNoNewDeviceMemory) {
  if (cuda_emulated()) GTEST_SKIP() << "the emulated device has no memory pool to count";
  const run::Recipe recipe = run::Recipe::load(std::string(CMHA_SOURCE_DIR) +
                                                       "/recipes/bench/transformer_small_collab_dk64.yaml",
                                                   {"train.device=cuda", "bench.batch_size=8"});
  const auto comm = distributed::make_communicator("single", distributed::Launch{});
  const train::BenchResult r = train::run_training_benchmark(recipe, 3, 2, 0, *comm);
  EXPECT_EQ(r.gpu_pool_growths_timed, 0) << "the pool grew during the timed steps";
  EXPECT_GT(r.gpu_peak_reserved_mb, 0.0);
  EXPECT_TRUE(std::isfinite(r.last_loss));
}
