// cmha compress, cmha heads and cmha info on a compressed checkpoint, as a
// user runs them: the table, the written checkpoint and fine-tuning recipe,
// and one clear sentence (exit 2) for each mistake.
#include <gtest/gtest.h>

#include <filesystem>

#include "nn/vit.h"
#include "run/checkpoint.h"
#include "run/model_config.h"
#include "support/check.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A small concat ViT checkpoint (4 heads, D_k 24, 2 blocks).
std::string write_concat_vit(const std::string& dir) {
  const run::Recipe r = run::Recipe::parse(
      "model: {kind: vit, image_size: 8, patch_size: 4, channels: 1, num_classes: 3, d_model: 16, depth: 2,\n"
      "        ffn_dim: 32, attention: {type: concat, heads: 4, key_dim: 24}}\n"
      "train: {save_dir: " + dir + "/run}\n");
  Generator gen(1);
  nn::VisionTransformer model(run::vit_config(r), gen);
  run::Checkpoint c;
  for (auto& [name, p] : model.named_parameters()) c.weights[name] = p;
  c.recipe = r.dump();
  c.trainer = {{"update", 3}, {"epoch", 0}};
  const std::string path = dir + "/concat.safetensors";
  run::save_checkpoint(path, c);
  return path;
}

}  // namespace

TEST(CliCompress, CompressesInfoShowsItAndHeadsAnalysesBoth) {
  const std::string dir = test::temp_dir("cli_compress");
  const std::string in = write_concat_vit(dir), out = dir + "/small.safetensors";
  test::CommandResult r = test::run_cmha("compress " + in + " --key-dim 12 --iters 5 --threads 1 -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "blocks.1.attn.")) << r.output;
  EXPECT_TRUE(has(r.output, "5 it")) << r.output;
  EXPECT_TRUE(has(r.output, "fine-tune with: cmha train " + dir + "/small.yaml")) << r.output;
  const run::Recipe tune = run::Recipe::load(dir + "/small.yaml");
  EXPECT_EQ(tune.string("train.init_from"), out);
  EXPECT_EQ(tune.string("train.save_dir"), dir + "/small_finetune");
  EXPECT_EQ(tune.integer("model.attention.key_dim"), 12);
  const run::Checkpoint c = run::load_checkpoint(out);
  EXPECT_TRUE(c.optimizer.empty());
  EXPECT_EQ(c.weights.at("blocks.0.attn.mixing").shape(), (Shape{4, 12}));

  r = test::run_cmha("info " + out);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "attention: collaborative, 4 heads, key_dim 12 (D~k, shared by the heads), scale 0.408248"))
      << r.output;
  EXPECT_TRUE(has(r.output, "compressed from: \"" + in + "\"")) << r.output;

  for (const std::string& ckpt : {in, out}) {
    r = test::run_cmha("heads " + ckpt + " --no-plot --json " + dir + "/heads.json");
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_TRUE(has(r.output, "blocks.1.attn.")) << r.output;
    EXPECT_TRUE(fs::exists(dir + "/heads.json"));
  }
  EXPECT_TRUE(has(r.output, "collaborative")) << r.output;
  fs::remove_all(dir);
}

TEST(CliCompress, MistakesAreOneSentenceWithExitCode2) {
  const std::string dir = test::temp_dir("cli_compress_errors");
  const std::string in = write_concat_vit(dir), out = dir + "/o.safetensors";
  const std::pair<std::string, std::string> cases[] = {
      {"compress " + in + " -o " + out, "needs --key-dim D"},
      {"compress " + in + " --key-dim 8", "needs -o OUT"},
      {"compress --key-dim 8 -o " + out, "needs a checkpoint"},
      {"compress " + in + " --key-dim 0 -o " + out, "option '--key-dim' needs a whole number"},
      {"compress " + in + " --key-dim 8 --init spectral -o " + out, "'--init' is 'svd' or 'random', not 'spectral'"},
      {"compress " + in + " --key-dim 8 --tol x -o " + out, "option '--tol' needs a number of at least 0, not 'x'"},
      {"compress " + in + " --key-dim 8 --layers cross -o " + out, "has no attention place 'cross'"},
      {"compress " + dir + "/none.safetensors --key-dim 8 -o " + out, "none.safetensors"},
      {"compress " + in + " --key-dim 8 --frobnicate -o " + out, "unknown option '--frobnicate'"},
      {"heads", "needs a checkpoint"},
      {"heads " + dir + "/none.safetensors", "none.safetensors"},
      {"heads " + in + " --bogus", "unknown option '--bogus'"},
  };
  for (const auto& [args, message] : cases) {
    const test::CommandResult r = test::run_cmha(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, message)) << args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(out));
  for (const char* help : {"compress --help", "heads --help", "help compress"}) {
    const test::CommandResult r = test::run_cmha(help);
    EXPECT_EQ(r.code, 0) << help;
    EXPECT_TRUE(has(r.output, "usage: cmha")) << r.output;
  }
  fs::remove_all(dir);
}
