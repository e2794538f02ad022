// The emulated CUDA device (tensor/device.h), asynchronous as CI runs it
// (CMHA_EMULATE_CUDA=async, tensor/emulated_stream.h): cuda:0 with host
// memory and the CPU's kernels run later on stream threads, where the host
// thread never touches device memory. Training on it must give the CPU's
// checkpoints bit for bit; any place where the trainer, a task, the
// evaluation or the checkpoint code would read GPU memory from the host is an
// error here, on every machine, long before a GPU runs it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "autograd/ops.h"
#include "support/check.h"
#include "support/checkpoint_hash.h"
#include "support/emulated_cuda.h"
#include "support/files.h"
#include "support/text.h"
#include "support/tiny_images.h"
#include "support/toy_translation.h"
#include "tensor/emulated_stream.h"
#include "support/source_paths.h"

namespace cmha {
namespace {

using cmha::test::has;
using cmha::test::AsyncEmulated;

TEST(EmulatedCuda, HostReadsOutsideKernelsAreErrors) {
  AsyncEmulated on;
  EXPECT_EQ(cuda_device_count(), 1);
  Tensor x = Tensor::full({2, 3}, 1.5, DType::f32, Device::cuda(0));
  EXPECT_EQ(x.device(), Device::cuda(0));
  const std::string e = test::error_of([&] { x.data<float>("my_op"); });
  EXPECT_TRUE(has(e, "my_op") && has(e, "host code cannot read") && has(e, "cuda:0")) << e;
  // Ops run (through the CPU kernels) and results come back through to(cpu).
  Tensor y = add(x, x);
  EXPECT_EQ(y.device(), Device::cuda(0));
  EXPECT_EQ(y.to(Device::cpu()).to_float_vector(), std::vector<float>(6, 3.0f));
  EXPECT_FLOAT_EQ(sum(y, {0, 1}).item(), 18.0f);
  // copy_ across the host boundary transfers; mixing devices in an op does not.
  Tensor host = Tensor::zeros({2, 3});
  host.copy_(y);
  EXPECT_EQ(host.to_float_vector(), std::vector<float>(6, 3.0f));
  EXPECT_TRUE(has(test::error_of([&] { add(host, y); }), "different devices"));
  EXPECT_TRUE(has(test::error_of([&] { Tensor::empty({1}, DType::f32, Device::cuda(1)); }), "cuda:0 alone"));
}

TEST(EmulatedCuda, MovingAModuleKeepsItsParametersTied) {
  AsyncEmulated on;
  Tensor w = Tensor::full({4}, 2.0).set_requires_grad(true);
  Tensor alias = w;  // a layer's own handle of the same parameter
  w.move_to_(Device::cuda(0));
  EXPECT_EQ(alias.device(), Device::cuda(0));
  EXPECT_TRUE(alias.requires_grad());
  EXPECT_EQ(alias.to(Device::cpu()).to_float_vector(), std::vector<float>(4, 2.0f));
}

// `cmha train` twice on the same recipe, on the CPU and on the emulated GPU.
struct TwoRuns {
  test::CommandResult cpu, gpu;
};
TwoRuns train_both(const std::string& args, const std::string& dir) {
  TwoRuns r;
  r.cpu = test::run_cmha("train " + args + " train.save_dir=" + dir + "/cpu train.device=cpu");
  setenv("CMHA_EMULATE_CUDA", "async", 1);
  r.gpu = test::run_cmha("train " + args + " train.save_dir=" + dir + "/gpu train.device=cuda");
  unsetenv("CMHA_EMULATE_CUDA");
  return r;
}

TEST(EmulatedCuda, TranslationTrainsValidatesAndEvaluatesAsOnTheCpu) {
  const std::string dir = test::toy_dir("emulated_cuda");
  test::write_toy_corpus(dir + "/test", 20, 3);
  const TwoRuns r = train_both(
      std::string(CMHA_SOURCE_DIR) + "/recipes/local/en_de_transformer_small.yaml data.train_prefix=" + dir +
          "/train data.valid_prefix=" + dir + "/valid data.test_prefix=" + dir +
          "/test model.vocab_size=100 data.max_tokens=512 data.spm_sample_sentences=1000 train.max_updates=12 "
          "train.save_every=6 train.validate_every=6 train.log_every=1000 lr.warmup=4 eval.valid_sentences=10 "
          "eval.valid_bleu=true eval.average_last=2 model.d_model=64 model.ffn_dim=128 model.encoder_layers=1 "
          "model.decoder_layers=1 model.attention.key_dim=32",
      dir);
  ASSERT_EQ(r.cpu.code, 0) << r.cpu.output;
  ASSERT_EQ(r.gpu.code, 0) << r.gpu.output;
  EXPECT_TRUE(has(r.gpu.output, "cuda")) << r.gpu.output;
  for (const char* ckpt : {"checkpoint_6", "checkpoint_12", "checkpoint_average"})
    EXPECT_EQ(test::checkpoint_hash(dir + "/gpu/" + ckpt + ".safetensors"),
              test::checkpoint_hash(dir + "/cpu/" + ckpt + ".safetensors"))
        << ckpt;
  EXPECT_EQ(test::read_file(dir + "/gpu/test.de.hyp"), test::read_file(dir + "/cpu/test.de.hyp"));
  EXPECT_FALSE(test::read_file(dir + "/gpu/test.de.hyp").empty());
  // A checkpoint written from the GPU resumes on the CPU.
  const auto resumed = test::run_cmha("train --resume train.save_dir=" + dir + "/gpu train.device=cpu train.max_updates=14");
  EXPECT_EQ(resumed.code, 0) << resumed.output;
}

TEST(EmulatedCuda, VitTrainsAsOnTheCpu) {
  const std::string dir = test::temp_dir("emulated_cuda_vit");
  test::write_tiny_fashion_mnist(dir, 120, 30);
  const std::string run = test::tiny_run(dir, dir + "/unused");
  const TwoRuns r = train_both(run + " train.max_updates=8 train.max_epochs=0 train.log_every=1000 train.save_every=8", dir);
  ASSERT_EQ(r.cpu.code, 0) << r.cpu.output;
  ASSERT_EQ(r.gpu.code, 0) << r.gpu.output;
  EXPECT_EQ(test::checkpoint_hash(dir + "/gpu/checkpoint_8.safetensors"),
            test::checkpoint_hash(dir + "/cpu/checkpoint_8.safetensors"));
}

// On a GPU each task makes and sends the next batch while the step runs; a
// checkpoint taken with a batch ahead must resume at that batch, not after it.
// 6 updates in one go == 3, stop, resume, 3 more, bit for bit, on the GPU.
void expect_resume_with_a_batch_ahead_continues(const std::string& args, const std::string& dir) {
  setenv("CMHA_EMULATE_CUDA", "async", 1);
  const auto full = test::run_cmha("train " + args + " train.device=cuda train.save_dir=" + dir + "/full train.max_updates=6");
  const auto first = test::run_cmha("train " + args + " train.device=cuda train.save_dir=" + dir + "/split train.max_updates=3");
  const auto second =
      test::run_cmha("train --resume " + args + " train.device=cuda train.save_dir=" + dir + "/split train.max_updates=6");
  unsetenv("CMHA_EMULATE_CUDA");
  ASSERT_EQ(full.code, 0) << full.output;
  ASSERT_EQ(first.code, 0) << first.output;
  ASSERT_EQ(second.code, 0) << second.output;
  EXPECT_TRUE(has(second.output, "resumed from")) << second.output;
  EXPECT_EQ(test::checkpoint_hash(dir + "/split/checkpoint_6.safetensors"),
            test::checkpoint_hash(dir + "/full/checkpoint_6.safetensors"));
}

TEST(EmulatedCuda, VitResumesWithABatchAheadBitIdentically) {
  const std::string dir = test::temp_dir("emulated_cuda_vit_resume");
  test::write_tiny_fashion_mnist(dir, 96, 16);  // 6 batches of 16: update 3 ends mid-epoch
  expect_resume_with_a_batch_ahead_continues(
      test::tiny_run(dir, dir + "/unused") + " lr.total=6 train.max_epochs=0 train.log_every=1000 train.save_every=3", dir);
}

TEST(EmulatedCuda, TranslationResumesWithABatchAheadBitIdentically) {
  const std::string dir = test::toy_dir("emulated_cuda_resume");
  expect_resume_with_a_batch_ahead_continues(
      std::string(CMHA_SOURCE_DIR) + "/recipes/local/en_de_transformer_small.yaml data.train_prefix=" + dir +
          "/train data.valid_prefix=" + dir + "/valid data.test_prefix=" + dir +
          "/valid data.valid_is_test=true model.vocab_size=100 eval.valid_bleu=false eval.beam=1 data.max_tokens=256 data.spm_sample_sentences=1000 train.update_freq=1 "
          "train.save_every=3 train.validate_every=1000 train.log_every=1000 lr.warmup=2 lr.total=6 "
          "model.d_model=32 model.ffn_dim=64 model.encoder_layers=1 model.decoder_layers=1 model.attention.key_dim=16",
      dir);
}

}  // namespace
}  // namespace cmha
