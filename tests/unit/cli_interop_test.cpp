// cmha import and cmha export as a user runs them: a pretrained DeiT in, a
// compressed one and its fine-tuning recipe out (the paper's post-hoc path),
// files back for PyTorch, and one sentence with exit code 2 for each mistake.
#include <gtest/gtest.h>

#include <filesystem>

#include "run/checkpoint.h"
#include "run/recipe.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "tensor/safetensors.h"

using namespace cmha;
namespace fs = std::filesystem;

using cmha::test::interop_fixture;
using cmha::test::has;

TEST(CliInterop, ImportedDeitCompressesAndExportsBack) {
  const std::string dir = test::temp_dir("cli_interop");
  const std::string deit = dir + "/deit.safetensors";
  test::CommandResult r = test::run_cmha("import timm " + interop_fixture("timm_deit") + " --heads 4 -o " + deit);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "read timm DeiT with a distillation token: d_model 16, 2 blocks, 4 heads")) << r.output;
  EXPECT_TRUE(has(r.output, "4 heads, given by --heads")) << r.output;
  EXPECT_TRUE(has(r.output, "and its recipe " + dir + "/deit.yaml")) << r.output;
  const run::Recipe tune = run::Recipe::load(dir + "/deit.yaml");
  EXPECT_EQ(tune.string("train.init_from"), deit);
  EXPECT_EQ(tune.string("model.kind"), "vit");

  r = test::run_cmha("info " + deit);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "imported from: \"" + interop_fixture("timm_deit") + "\" (timm)")) << r.output;
  EXPECT_TRUE(has(r.output, "attention: concat, 4 heads, key_dim 16")) << r.output;

  // The post-hoc path: the pretrained model's attention made collaborative.
  r = test::run_cmha("compress " + deit + " --key-dim 8 --iters 5 --threads 1 -o " + dir + "/small.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "blocks.1.attn.")) << r.output;

  r = test::run_cmha("export timm " + deit + " -o " + dir + "/back.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "tensors in timm's names (f32; the model's weights, no optimiser or EMA state)")) << r.output;
  EXPECT_TRUE(has(r.output, "timm: VisionTransformerDistilled(img_size=8, patch_size=4, in_chans=3, num_classes=5, "
                            "embed_dim=16, depth=2, num_heads=4, mlp_ratio=2, qkv_bias=True)"))
      << r.output;
  EXPECT_TRUE(test::read_file(dir + "/back.safetensors") == test::read_file(interop_fixture("timm_deit")));

  // A collaborative model has no timm form; --weights writes it in cmha's names.
  r = test::run_cmha("export timm " + dir + "/small.safetensors -o " + dir + "/x.safetensors");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "model.attention.type is 'collaborative'")) << r.output;
  r = test::run_cmha("export --weights " + dir + "/small.safetensors --dtype f16 -o " + dir + "/w.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  const SafetensorsFile w = load_safetensors(dir + "/w.safetensors");
  EXPECT_EQ(w.tensors.at("blocks.0.attn.mixing").dtype(), DType::f16);
  EXPECT_EQ(w.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(w.tensors.size(), run::load_checkpoint(dir + "/small.safetensors").weights.size());
  fs::remove_all(dir);
}

TEST(CliInterop, HuggingFaceExportWritesConfigThatImportReads) {
  const std::string dir = test::temp_dir("cli_interop_hf");
  fs::create_directories(dir + "/hf");
  test::CommandResult r = test::run_cmha("import hf-vit " + interop_fixture("hf_vit") + " --heads 2 -o " + dir + "/vit.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  r = test::run_cmha("export hf-vit " + dir + "/vit.safetensors -o " + dir + "/hf/model.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "wrote " + dir + "/hf/config.json")) << r.output;
  EXPECT_TRUE(has(test::read_file(dir + "/hf/config.json"), "\"num_attention_heads\": 2")) << test::read_file(dir + "/hf/config.json");
  // Back in without --heads: config.json says.
  r = test::run_cmha("import hf-vit " + dir + "/hf/model.safetensors -o " + dir + "/again.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "2 heads, from the config file's num_attention_heads")) << r.output;
  EXPECT_TRUE(test::read_file(dir + "/hf/model.safetensors") == test::read_file(interop_fixture("hf_vit")));
  fs::remove_all(dir);
}

TEST(CliInterop, FairseqImportSaysWhatItAssumed) {
  const std::string dir = test::temp_dir("cli_interop_fairseq");
  test::CommandResult r = test::run_cmha("import fairseq " + interop_fixture("fairseq_post_legacy") + " --heads 4 -o " + dir + "/t.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "positions from padding_idx + 1 = 2")) << r.output;
  EXPECT_TRUE(has(r.output, "left out 4 bookkeeping tensors: decoder.embed_positions._float_tensor")) << r.output;
  r = test::run_cmha("export fairseq " + dir + "/t.safetensors -o " + dir + "/back.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "--encoder-attention-heads 4")) << r.output;
  EXPECT_TRUE(has(r.output, "--share-all-embeddings")) << r.output;
  EXPECT_TRUE(test::read_file(dir + "/back.safetensors") == test::read_file(interop_fixture("fairseq_post")));
  fs::remove_all(dir);
}

TEST(CliInterop, MistakesAreOneSentenceWithExitCode2) {
  const std::string dir = test::temp_dir("cli_interop_errors");
  const std::string deit = interop_fixture("timm_deit"), ckpt = dir + "/c.safetensors";
  ASSERT_EQ(test::run_cmha("import timm " + deit + " --heads 4 -o " + ckpt).code, 0);
  SafetensorsFile bad = load_safetensors(deit);
  const Tensor norm = bad.tensors.at("norm.weight");
  bad.tensors.erase("norm.weight");
  save_safetensors(dir + "/bad.safetensors", bad.tensors, bad.metadata);
  bad.tensors["norm.weight"] = norm;
  bad.tensors["blocks.1.mlp.fc2.weight"] = Tensor::zeros({16, 31});
  save_safetensors(dir + "/shape.safetensors", bad.tensors, bad.metadata);
  const std::pair<std::string, std::string> cases[] = {
      {"import keras " + deit + " -o " + dir + "/o.safetensors", "option 'format' is 'timm', 'hf-vit' or 'fairseq', not 'keras'"},
      {"import timm " + deit, "--output is required"},
      {"import timm " + deit + " -o " + dir + "/o.safetensors", "cannot tell how many attention heads"},
      {"import timm " + dir + "/none.safetensors --heads 4 -o " + dir + "/o.safetensors", "none.safetensors"},
      {"import fairseq " + interop_fixture("fairseq_post") + " --heads 4 --activation swish -o " + dir + "/o.safetensors",
       "option '--activation' is 'relu' or 'gelu', not 'swish'"},
      {"import fairseq " + deit + " --heads 4 -o " + dir + "/o.safetensors", "has no tensor 'encoder.embed_tokens.weight'"},
      {"import timm " + dir + "/bad.safetensors --heads 4 -o " + dir + "/o.safetensors",
       "has no tensor 'norm.weight' (cmha's 'norm.weight')"},
      {"import timm " + dir + "/shape.safetensors --heads 4 -o " + dir + "/o.safetensors",
       "tensor 'blocks.1.mlp.fc2.weight' of '" + dir + "/shape.safetensors' is [16, 31], but the model its other tensors"},
      {"import timm " + deit + " --heads 4 --activation gelu -o " + dir + "/o.safetensors",
       "--activation and --no-scale-embedding are settings of fairseq models, not of timm ones"},
      {"import timm " + deit + " --heads 4 --config c.json -o " + dir + "/o.safetensors", "--config is Hugging Face's"},
      {"export onnx " + ckpt + " -o " + dir + "/o.safetensors", "unknown checkpoint format 'onnx'"},
      {"export " + ckpt + " -o " + dir + "/o.safetensors", "needs FORMAT and CKPT"},
      {"export timm " + ckpt + " " + ckpt + " -o " + dir + "/o.safetensors", "takes FORMAT and one CKPT, got 3"},
      {"export timm " + ckpt + " --dtype f64 -o " + dir + "/o.safetensors", "option '--dtype' is 'f32', 'f16' or 'bf16', not 'f64'"},
      {"export timm " + ckpt + " --ema -o " + dir + "/o.safetensors", "holds no EMA weights"},
      {"export fairseq " + ckpt + " -o " + dir + "/o.safetensors", "model.kind is 'vit', but fairseq holds"},
      {"export timm " + deit + " -o " + dir + "/o.safetensors", "has checkpoint format 'pt', expected 'cmha-checkpoint-1'"},
  };
  for (const auto& [args, message] : cases) {
    const test::CommandResult r = test::run_cmha(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, message)) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(dir + "/o.safetensors"));
  for (const char* help : {"import --help", "export --help", "help import"}) {
    const test::CommandResult r = test::run_cmha(help);
    EXPECT_EQ(r.code, 0) << help;
    EXPECT_TRUE(has(r.output, "usage: cmha")) << r.output;
  }
  fs::remove_all(dir);
}
