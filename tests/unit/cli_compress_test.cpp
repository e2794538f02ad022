// cmha compress, cmha heads and cmha info on a compressed checkpoint, as a
// user runs them: the table, the written checkpoint and fine-tuning recipe,
// and one clear sentence (exit 2) for each mistake.
#include <gtest/gtest.h>

#include <filesystem>

#include "nn/vit.h"
#include "run/checkpoint.h"
#include "run/model_config.h"
#include "support/check.h"
#include "support/text.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;

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

TEST(CliCompress, PerLayerKeyDimsGoToTheRecipeAndInfoListsThem) {
  const std::string dir = test::temp_dir("cli_compress_layers");
  const std::string in = write_concat_vit(dir), out = dir + "/mixed.safetensors";
  // Block 0 to D~k 8 by CP-ALS; block 1 keeps concat attention.
  test::CommandResult r =
      test::run_cmha("compress " + in + " --key-dim attention.0=8 --iters 3 --threads 1 -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "blocks.0.attn.")) << r.output;
  EXPECT_FALSE(has(r.output, "blocks.1.attn.")) << r.output;
  const run::Checkpoint c = run::load_checkpoint(out);
  EXPECT_EQ(c.weights.at("blocks.0.attn.mixing").shape(), (Shape{4, 8}));
  EXPECT_EQ(c.weights.count("blocks.1.attn.mixing"), 0u);
  const run::Recipe rec = run::Recipe::parse_stored(c.recipe, "compressed");
  EXPECT_EQ(rec.string("model.attention.type"), "concat");
  EXPECT_EQ(run::attention_config(rec, "model.attention", 0).type, "collaborative");
  EXPECT_EQ(run::attention_config(rec, "model.attention", 0).key_dim, 8);
  EXPECT_EQ(run::attention_config(rec, "model.attention", 1).key_dim, 24);
  // The checkpoint loads into the model its recipe describes.
  Generator gen(1);
  nn::VisionTransformer model(run::vit_config(rec), gen);
  for (auto& [name, p] : model.named_parameters()) EXPECT_EQ(c.weights.at(name).shape(), p.shape()) << name;

  r = test::run_cmha("info " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "attention: concat, 4 heads, key_dim 24")) << r.output;
  EXPECT_TRUE(has(r.output, "some layers differ (below)")) << r.output;
  EXPECT_TRUE(has(r.output, "  attention             0*  collaborative     4       8        16")) << r.output;
  EXPECT_TRUE(has(r.output, "  attention             1   concat            4      24        16   default")) << r.output;

  // Then block 1 as well, to another D~k: the recipe keeps both layers apart.
  const std::string both = dir + "/both.safetensors";
  r = test::run_cmha("compress " + out + " --key-dim 12 --iters 3 --threads 1 -o " + both);
  ASSERT_EQ(r.code, 0) << r.output;
  const run::Recipe rec2 = run::Recipe::parse_stored(run::load_checkpoint(both).recipe, "both");
  EXPECT_EQ(run::attention_config(rec2, "model.attention", 0).key_dim, 8);
  EXPECT_EQ(run::attention_config(rec2, "model.attention", 1).key_dim, 12);
  EXPECT_EQ(run::attention_config(rec2, "model.attention", 1).type, "collaborative");

  const std::pair<std::string, std::string> cases[] = {
      {"--key-dim attention.2=8", "there is no layer 2: model.attention has 2 layers (0 to 1)"},
      {"--key-dim attention.x=8", "'x' is not a layer index"},
      {"--key-dim attention.0=8,attention.0=4", "names attention.0 twice"},
      {"--key-dim 8,4", "gives the D~k of every layer twice"},
      {"--key-dim encoder.0=8", "has no attention place 'encoder'"},
      {"--key-dim attention0=8", "must look like PLACE.LAYER=D"},
  };
  for (const auto& [args, message] : cases) {
    r = test::run_cmha("compress " + in + " " + args + " -o " + dir + "/bad.safetensors");
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, message)) << args << "\n" << r.output;
  }
  r = test::run_cmha("compress " + out + " --key-dim attention.0=4 -o " + dir + "/bad.safetensors");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "attention.0: that layer is collaborative; only concat attention can be compressed"))
      << r.output;
  fs::remove_all(dir);
}

// -o into a folder that does not exist yet: made, as train.save_dir is, with the recipe beside the checkpoint.
TEST(CliCompress, MakesTheOutputFolder) {
  const std::string dir = test::temp_dir("cli_compress_folder");
  const std::string in = write_concat_vit(dir), out = dir + "/not/yet/small.safetensors";
  const test::CommandResult r = test::run_cmha("compress " + in + " --key-dim 12 --iters 2 --threads 1 -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::is_regular_file(out));
  EXPECT_TRUE(fs::is_regular_file(dir + "/not/yet/small.yaml"));
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
      {"compress " + in + " --key-dim 8 -o " + dir, "-o '" + dir + "' is a directory: give the compressed checkpoint's file name"},
      {"compress " + in + " --key-dim 8 -o " + in + "/o.safetensors", "cannot make its folder '" + in + "'"},
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
