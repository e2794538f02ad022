// The subcommands' argument parsing (cli/command_line.h) as a user meets it:
// every --help lists the options with their defaults and allowed values,
// `cmha train RECIPE --help` shows that recipe's resolved keys, a key the
// model does not read is refused, and `cmha info` lists tensors and JSON.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nn/vit.h"
#include "run/checkpoint.h"
#include "run/model_config.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "support/source_paths.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;


// The line of `text` that holds `part` ("" when none).
std::string line_with(const std::string& text, const std::string& part) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (has(line, part)) return line;
  return "";
}

// A tiny ViT checkpoint with optimiser and EMA state; its stored recipe is
// `stored_recipe` (as an older cmha wrote it) or the recipe's dump.
std::string write_vit_checkpoint(const std::string& dir, const std::string& stored_recipe = "") {
  const run::Recipe r = run::Recipe::parse(
      "model: {kind: vit, image_size: 8, patch_size: 4, channels: 1, num_classes: 3, d_model: 16, depth: 1,\n"
      "        ffn_dim: 32, attention: {type: collaborative, heads: 2, key_dim: 8}}\n"
      "train: {task: image_classification, save_dir: " + dir + "/run}\n");
  Generator gen(1);
  nn::VisionTransformer model(run::vit_config(r), gen);
  run::Checkpoint c;
  for (auto& [name, p] : model.named_parameters()) {
    c.weights[name] = p;
    c.ema[name] = p;
  }
  c.optimizer["exp_avg.cls_token"] = c.weights.at("cls_token");
  c.recipe = stored_recipe.empty() ? r.dump() : stored_recipe;
  c.trainer = {{"update", 7}, {"epoch", 1}};
  const std::string path = dir + "/vit.safetensors";
  run::save_checkpoint(path, c);
  return path;
}

}  // namespace

TEST(CliOptions, EveryCommandsHelpListsItsOptionsWithDefaultsAndChoices) {
  struct Case {
    const char* command;
    std::vector<std::string> says;
  } cases[] = {
      {"train", {"--resume", "--overwrite", "--dump-config", "--threads T:INT in [1 - 4096]", "model.attention.type"}},
      {"eval", {"--data DIR", "--ema", "--json", "--batch-size N:INT in [1 - 1048576]", "--threads"}},
      {"score", {"--src FILE", "--tgt FILE", "--max-tokens", "(default 4096)", "--max-source-tokens", "--spm FILE"}},
      {"compress", {"--key-dim D", "-o,--output OUT", "--layers PLACES", "encoder, decoder, cross (transformer)",
                    "(default 100)", "X:FLOAT >= 0", "(default 1e-06)", "INIT:{svd,random}", "(default random)",
                    "--seed", "(default 0)"}},
      {"heads", {"-o,--output OUT.png", "(default heads.png)", "--json OUT.json", "--no-plot"}},
      {"sweep", {"--grid KEY=V1,V2,...", "--metric NAME", "-o,--output DIR", "--x KEY", "--jobs N", "(default 1)",
                 "--rerun-changed"}},
      {"info", {"--devices", "--tensors", "--json"}},
      {"bench", {"--steps N:INT in [1 - 1000000]", "(default 10)", "--warmup", "(default 2)", "--threads"}},
      {"average", {"-o,--output OUT", "--last N"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.command);
    const test::CommandResult help = test::run_cmha(std::string(c.command) + " --help");
    EXPECT_EQ(help.code, 0) << help.output;
    EXPECT_EQ(help.output.rfind(std::string("usage: cmha ") + c.command + " ", 0), 0u) << help.output;
    EXPECT_TRUE(has(help.output, "-h,--help")) << help.output;
    EXPECT_TRUE(has(help.output, "exit codes: 0 success, 2 usage or input error")) << help.output;
    for (const std::string& part : c.says) EXPECT_TRUE(has(help.output, part)) << part << "\n" << help.output;
    const test::CommandResult h = test::run_cmha(std::string(c.command) + " -h");
    EXPECT_EQ(h.code, 0);
    EXPECT_EQ(h.output, help.output);
  }
}

TEST(CliOptions, MistakesNameTheOptionAndExitTwo) {
  const std::pair<std::string, std::string> cases[] = {
      {"eval --batch-size 0 c.safetensors",
       "option '--batch-size' needs a whole number from 1 to 1048576, not '0' (see 'cmha eval --help')"},
      {"score c.safetensors --threads", "option '--threads' needs a value (see 'cmha score --help')"},
      {"score a.safetensors b.safetensors", "cmha score takes one checkpoint, got 'a.safetensors' and 'b.safetensors'"},
      {"sweep r.yaml --grid model.depth=1 --metric top1 -o d --jobs x", "option '--jobs' needs a whole number"},
      {"info --frobnicate", "unknown option '--frobnicate' for 'cmha info'"},
      {"info --tensors", "cmha info --tensors describes a checkpoint: give one"},
      {"train a.yaml b.yaml", "cmha train takes one recipe, got 'a.yaml' and 'b.yaml'"},
  };
  for (const auto& [args, message] : cases) {
    const test::CommandResult r = test::run_cmha(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, message)) << args << "\n" << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "one line: " << r.output;
  }
}

TEST(CliOptions, TrainRecipeHelpShowsTheKeysItReadsWithTheirResolvedValues) {
  const std::string recipe = std::string(CMHA_SOURCE_DIR) + "/recipes/local/fashion_mnist_vit.yaml";
  const test::CommandResult r = test::run_cmha("train " + recipe + " model.depth=3 --help");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "--resume")) << r.output;  // the options first
  EXPECT_TRUE(has(r.output, "recipe keys of " + recipe + " (model.kind vit, train.task image_classification)"))
      << r.output;
  // Each key with its value after includes and overrides, its help, and where it was set.
  const std::string depth = line_with(r.output, "  model.depth ");
  EXPECT_TRUE(has(depth, " 3 ") && has(depth, "Vision transformer blocks") &&
              has(depth, "[command line (model.depth=3)]")) << depth;
  const std::string d_model = line_with(r.output, "  model.d_model ");
  EXPECT_TRUE(has(d_model, " 64 ") && has(d_model, "[" + recipe + ":")) << d_model;
  const std::string heads = line_with(r.output, "  model.attention.heads ");
  EXPECT_TRUE(has(heads, " 4 ")) << heads;
  const std::string token = line_with(r.output, "  model.distillation_token ");
  EXPECT_TRUE(has(token, " false ") && !has(token, "[")) << token;  // a default says no origin
  // Keys the ViT and image classification do not read are not shown.
  for (const char* absent : {"model.vocab_size", "model.activation ", "data.test_prefix", "model.encoder_attention"})
    EXPECT_FALSE(has(r.output, absent)) << absent;
  // Without a recipe: every key, with whom it is for.
  const test::CommandResult all = test::run_cmha("train --help");
  EXPECT_TRUE(has(line_with(all.output, "  model.activation "), "[transformer models]")) << all.output;
  EXPECT_TRUE(has(line_with(all.output, "  data.test_prefix "), "[translation]")) << all.output;
  EXPECT_TRUE(has(line_with(all.output, "  model.attention.type "), "one of concat|collaborative")) << all.output;
}

TEST(CliOptions, AKeyTheModelDoesNotReadIsRefused) {
  const std::string recipe = std::string(CMHA_SOURCE_DIR) + "/recipes/local/fashion_mnist_vit.yaml";
  test::CommandResult r = test::run_cmha("train " + recipe + " model.activation=relu --dump-config");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "command line (model.activation=relu): model.activation is read only by model.kind "
                            "transformer, and this recipe's model.kind is vit (" + recipe + ":20)"))
      << r.output;
  // From a file: its name and line.
  const std::string dir = test::temp_dir("cli_unread_key");
  std::ofstream(dir + "/vit.yaml") << "include: " << recipe << "\nmodel:\n  activation: gelu\n";
  r = test::run_cmha("train " + dir + "/vit.yaml --dump-config");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, dir + "/vit.yaml:3: model.activation is read only by model.kind transformer")) << r.output;
  // A translation key on an image task.
  r = test::run_cmha("train " + recipe + " data.test_prefix=x --dump-config");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "data.test_prefix is read only by train.task translation")) << r.output;
  // data.test_prefix= (nothing): the empty string its help names, no final evaluation.
  r = test::run_cmha("train --dump-config data.test_prefix=");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "test_prefix: \"\"")) << r.output;
  fs::remove_all(dir);
}

TEST(CliOptions, InfoListsTheTensorsAndTheSummaryAsJson) {
  const std::string dir = test::temp_dir("cli_info_tensors");
  const std::string ckpt = write_vit_checkpoint(dir);
  test::CommandResult r = test::run_cmha("info " + ckpt + " --tensors");
  ASSERT_EQ(r.code, 0) << r.output;
  std::istringstream lines(r.output);
  std::string header, line;
  std::getline(lines, header);
  EXPECT_EQ(header.rfind("name ", 0), 0u) << header;
  const size_t shape_at = header.find("shape"), dtype_at = header.find("dtype");
  size_t count = 0;
  bool saw_patch = false, saw_ema = false, saw_optimizer = false;
  for (; std::getline(lines, line); ++count) {
    // Aligned: every line's shape and dtype start under the header's.
    EXPECT_EQ(line.find('['), shape_at) << line;
    EXPECT_EQ(line.rfind("f32"), dtype_at) << line;
    saw_patch = saw_patch || (line.rfind("patch_embed.weight ", 0) == 0 && has(line, "[16, 16]"));
    saw_ema = saw_ema || line.rfind("ema.", 0) == 0;
    saw_optimizer = saw_optimizer || (line.rfind("optimizer.exp_avg.cls_token ", 0) == 0);
  }
  const run::Checkpoint c = run::load_checkpoint(ckpt);
  EXPECT_EQ(count, c.weights.size() + c.ema.size() + c.optimizer.size()) << r.output;
  EXPECT_TRUE(saw_patch && saw_ema && saw_optimizer) << r.output;

  r = test::run_cmha("info " + ckpt + " --json --tensors");
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["checkpoint"], ckpt);
  EXPECT_EQ(j["model"]["kind"], "vit");
  int64_t params = 0;
  for (const auto& [name, t] : c.weights) params += t.numel();
  EXPECT_EQ(j["model"]["parameters"], params);
  EXPECT_EQ(j["attention"]["attention"]["type"], "collaborative");
  EXPECT_EQ(j["attention"]["attention"]["key_dim"], 8);
  EXPECT_EQ(j["trainer"]["update"], 7);
  EXPECT_EQ(j["ema_tensors"], c.ema.size());
  EXPECT_EQ(j["optimizer_tensors"], 1);
  EXPECT_EQ(j["recipe"]["model"]["depth"], 1);
  EXPECT_EQ(j["recipe"]["optim"]["betas"], nlohmann::json({0.9, 0.98}));
  EXPECT_FALSE(j["recipe"]["model"].contains("vocab_size"));
  ASSERT_EQ(j["tensors"].size(), count);
  bool found = false;
  for (const auto& t : j["tensors"])
    if (t["name"] == "patch_embed.weight")
      found = t["shape"] == nlohmann::json({16, 16}) && t["dtype"] == "f32";
  EXPECT_TRUE(found) << r.output;
  EXPECT_FALSE(nlohmann::json::parse(test::run_cmha("info " + ckpt + " --json").output).contains("tensors"));
  fs::remove_all(dir);
}

// A checkpoint whose recipe an older cmha wrote with every key (model.activation
// on a ViT among them) still reads, and shows only the keys its model reads.
TEST(CliOptions, OlderCheckpointsWithEveryKeyStillRead) {
  const std::string dir = test::temp_dir("cli_info_old");
  const std::string ckpt = write_vit_checkpoint(
      dir, "model: {kind: vit, image_size: 8, patch_size: 4, channels: 1, num_classes: 3, d_model: 16, depth: 1,\n"
           "        ffn_dim: 32, activation: relu, vocab_size: 8000, attention: {type: collaborative, heads: 2,\n"
           "        key_dim: 8}, encoder_attention: {type: concat}}\n"
           "train: {task: image_classification}\ndata: {test_prefix: '', batch_size: 16}\neval: {beam: 4}\n");
  const test::CommandResult r = test::run_cmha("info " + ckpt);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "attention: collaborative, 2 heads, key_dim 8")) << r.output;
  EXPECT_TRUE(has(r.output, "batch_size: 16")) << r.output;
  for (const char* absent : {"activation:", "vocab_size", "test_prefix", "beam:", "encoder_attention"})
    EXPECT_FALSE(has(r.output, absent)) << absent << "\n" << r.output;
  fs::remove_all(dir);
}

// README.md's command list is `cmha --help`'s: each command once, none missing.
TEST(CliOptions, ReadmeListsEveryCommandOnce) {
  const std::string usage = test::run_cmha("--help").output;
  const std::string readme = test::read_file(std::string(CMHA_SOURCE_DIR) + "/README.md");
  const size_t block = readme.find("```\ncmha --help");
  ASSERT_NE(block, std::string::npos);
  const std::string list = readme.substr(block, readme.find("```", block + 3) - block);
  std::vector<std::string> in_usage;
  std::istringstream lines(usage);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("  cmha ", 0) == 0) in_usage.push_back(line.substr(7, line.find(' ', 7) - 7));
  EXPECT_GE(in_usage.size(), 12u) << usage;
  size_t listed = 0;
  std::istringstream readme_lines(list);
  for (std::string line; std::getline(readme_lines, line);)
    if (line.rfind("cmha ", 0) == 0 && line.rfind("cmha --", 0) != 0) {
      const std::string name = line.substr(5, line.find(' ', 5) - 5);
      EXPECT_NE(std::find(in_usage.begin(), in_usage.end(), name), in_usage.end()) << "README lists " << name;
      ++listed;
    }
  EXPECT_EQ(listed, in_usage.size()) << list;
  for (const std::string& name : in_usage) {
    size_t times = 0;
    for (size_t at = list.find("\ncmha " + name + " "); at != std::string::npos;
         at = list.find("\ncmha " + name + " ", at + 1))
      ++times;
    EXPECT_EQ(times, 1u) << name << " in README.md:\n" << list;
  }
}
