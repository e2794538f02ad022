// cmha eval CHECKPOINT [CHECKPOINT_B] [--split test|valid] [--data DIR] [--ema] [--json] [--batch-size N]
//           [--threads T] [data.key=value ...]
// Scores an image classifier checkpoint: top-1 with its bootstrap 95 %
// interval, top-5 and loss on the test split its recipe names (else its
// validation split, or an ImageFolder DIR, or the data.* overrides given),
// through the recipe's evaluation transform; given a second checkpoint, both
// on the same images and the exact McNemar test between them.
#include <omp.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "cli/command_line.h"
#include "data/image_dataset.h"
#include "data/image_loader.h"
#include "data/shard_dataset.h"
#include "eval/accuracy_tests.h"
#include "nn/head_mask.h"
#include "run/checkpoint.h"
#include "run/model_config.h"
#include "tensor/error.h"
#include "train/image_pipeline.h"
#include "train/image_task.h"

namespace cmha::cli {
namespace {

const char* kEvalDescription =
    "Scores an image classification checkpoint on the validation split of its\n"
    "recipe (IDX data.valid_images/valid_labels, or <data.root>/<data.valid_dir>\n"
    "for an ImageFolder; data.* overrides change them), through the recipe's\n"
    "evaluation transform (ImageNet: resize 256 bicubic, centre crop 224,\n"
    "normalise): one line with top-1 and top-5 accuracy (%) and the mean\n"
    "cross-entropy, and one with top-1's bootstrap 95 % interval (1000 resamples\n"
    "of the images drawn by numpy's default_rng(12345), as sacreBLEU draws).\n"
    "The split is the recipe's test split (data.test_images, data.test_dir)\n"
    "when it has one, else its validation split; --split chooses.\n"
    "Given two checkpoints, both are scored on the same images (the first's data)\n"
    "and the exact McNemar test says whether their top-1 differs: a two-sided\n"
    "binomial test on the images exactly one of them classifies right.\n";

struct LoadedClassifier {
  run::Recipe recipe;
  std::unique_ptr<nn::VisionTransformer> model;
};

// The model of an image-classifier checkpoint, its recipe with `overrides`.
LoadedClassifier load_classifier(const std::string& path, const std::vector<std::string>& overrides, bool ema) {
  CMHA_CHECK(std::filesystem::exists(path), "checkpoint '" + path + "' does not exist");  // the loader names a directory
  const run::Checkpoint ckpt = run::load_checkpoint(path);
  // The model first: image data.* overrides on a translation model's recipe would be refused for that less clearly.
  const std::string task = run::Recipe::parse_stored(ckpt.recipe, path + " (recipe)").string("train.task");
  CMHA_CHECK(task != "translation", "checkpoint '" + path +
                                        "' is a translation model; score it with 'cmha translate' and 'cmha bleu'");
  run::Recipe recipe = run::Recipe::parse_stored(ckpt.recipe, path + " (recipe)", overrides);
  CMHA_CHECK(task == "image_classification" && recipe.string("model.kind") == "vit",
             "checkpoint '" + path + "' is a " + recipe.string("model.kind") + " for " + task +
                 ", not an image classifier (model.kind vit)");
  CMHA_CHECK(!ema || !ckpt.ema.empty(),
             "checkpoint '" + path + "' holds no EMA weights (the run had train.ema_decay 0); drop --ema");
  const nn::VitConfig cfg = run::vit_config(recipe);
  Generator init_gen(static_cast<uint64_t>(recipe.integer("train.seed")));
  auto model = std::make_unique<nn::VisionTransformer>(cfg, init_gen);
  std::map<std::string, Tensor> params;
  for (auto& [name, p] : model->named_parameters()) params.emplace(name, p);
  run::restore_weights(path, ema ? ckpt.ema : ckpt.weights, params);
  return {std::move(recipe), std::move(model)};
}

}  // namespace

int eval_command(const Args& args) {
  std::vector<std::string> positionals;
  std::string folder, split;
  bool ema = false, json = false;
  long long batch_size = 0, threads = 0;
  CommandLine cl("eval", kEvalDescription);
  cl.app().add_option("checkpoint", positionals,
                      "the checkpoint (and a second one to compare with it), and data.key=value overrides of the "
                      "first's recipe")
      ->type_name("CHECKPOINT [CHECKPOINT_B] [data.key=value ...]");
  cl.app().add_option("--split", split, "the split scored: test (default when the recipe has one) or valid")
      ->check(one_of({"test", "valid"}))
      ->type_name("SPLIT");
  cl.app().add_option("--data", folder,
                      "score an ImageFolder DIR/<class>/<image> instead; it must have the model's model.num_classes "
                      "class folders, named as in training")
      ->type_name("DIR");
  cl.app().add_flag("--ema", ema, "score the exponential moving average of the weights");
  cl.app().add_flag("--json", json, "print one JSON object instead of the lines");
  cl.app().add_option("--batch-size", batch_size, "images per forward pass (default: the recipe's data.batch_size)")
      ->check(whole_number(1, 1 << 20))->type_name("N");
  std::string mask_heads;
  cl.app().add_option("--mask-heads", mask_heads,
                      "silence attention heads of every checkpoint scored: a comma-separated list of PLACE.LAYER:HEAD "
                      "(attention.3:5 for a ViT; layers and heads from 0) or PLACE.LAYER:dJ (shared query/key "
                      "dimension J of a collaborative layer); a masked head's output is zero")
      ->type_name("PLACE.LAYER:HEAD,...");
  cl.app().add_option("--threads", threads, "CPU threads (default: the recipe's train.threads)")
      ->check(whole_number(1, 4096))->type_name("T");
  if (!cl.parse(args)) return 0;
  std::vector<std::string> paths, overrides;
  for (const std::string& a : positionals) (a.find('=') != std::string::npos ? overrides : paths).push_back(a);
  CMHA_CHECK(paths.size() <= 2, "cmha eval takes one checkpoint, or two to compare, got " +
                                    std::to_string(paths.size()) + ": '" + paths[0] + "', '" + paths[1] + "', '" +
                                    paths[2] + "'");
  // The architecture comes from the checkpoint; only where the data lives may change.
  for (const std::string& o : overrides)
    CMHA_CHECK(o.rfind("data.", 0) == 0, "cmha eval takes only data.* overrides (the model is the checkpoint's), got '" + o + "'");
  CMHA_CHECK(!paths.empty(), "cmha eval needs a checkpoint (try 'cmha eval --help')");
  const std::string& path = paths[0];
  const std::vector<nn::HeadMaskItem> mask =
      mask_heads.empty() ? std::vector<nn::HeadMaskItem>{} : nn::parse_head_mask(mask_heads);
  LoadedClassifier a = load_classifier(path, overrides, ema);
  if (!mask.empty()) nn::apply_head_mask(*a.model, mask);
  const run::Recipe& recipe = a.recipe;
  const long long t = threads > 0 ? threads : recipe.integer("train.threads");
  if (t > 0) omp_set_num_threads(static_cast<int>(t));
  const nn::VitConfig cfg = run::vit_config(recipe);

  std::shared_ptr<const data::ImageDataset> dataset;
  std::string data_name;
  if (folder.empty()) {
    const train::ImageData d = train::make_image_data(recipe);
    if (split.empty()) split = d.test ? "test" : "valid";
    CMHA_CHECK(split == "valid" || d.test, "checkpoint '" + path +
                                               "' has no test split in its recipe (data.test_images or "
                                               "data.test_dir); give it as data.* overrides or use --split valid");
    dataset = split == "test" ? d.test : d.valid;
    data_name = split == "test" ? d.test_source : d.valid_source;
  } else {
    CMHA_CHECK(split.empty(), "--split chooses a split of the recipe; --data '" + folder + "' is scored instead");
    CMHA_CHECK(std::filesystem::is_directory(folder), "--data '" + folder + "' is not a directory");
    const data::ColorMode mode = cfg.channels == 3 ? data::ColorMode::rgb : data::ColorMode::grey;
    // A folder of shards (cmha pack) or an ImageFolder tree.
    std::shared_ptr<const data::ImageDataset> images;
    if (std::filesystem::exists(std::filesystem::path(folder) / data::kShardSetFile))
      images = std::make_shared<data::ShardDataset>(folder, mode, cfg.num_classes,
                                                    recipe.integer("data.max_image_pixels"));
    else
      images = std::make_shared<data::ImageFolderDataset>(folder, mode, cfg.num_classes,
                                                          recipe.integer("data.max_image_pixels"));
    // Labels are class-folder indices: fewer folders than the model's classes would shift them.
    CMHA_CHECK(images->num_classes() == cfg.num_classes,
               "--data '" + folder + "' has " + std::to_string(images->num_classes()) +
                   " class folders but the model of '" + path + "' has model.num_classes " +
                   std::to_string(cfg.num_classes));
    dataset = std::move(images);
    data_name = folder;
    split = "folder";
  }
  data::ImageLoaderOptions options = train::image_loader_options(recipe, false);
  if (batch_size > 0) options.batch_size = batch_size;
  data::ImageLoader loader(dataset, options, static_cast<uint64_t>(recipe.integer("train.seed")));
  const eval::ClassificationScores s = train::evaluate_classifier(*a.model, loader);
  const eval::AccuracyInterval ci = eval::bootstrap_top1(s.top1_correct);

  // The second checkpoint on the same images, through the first's loader (the same order).
  std::optional<eval::ClassificationScores> sb;
  std::optional<eval::McNemarTest> mc;
  if (paths.size() == 2) {
    LoadedClassifier b = load_classifier(paths[1], {}, ema);
    if (!mask.empty()) nn::apply_head_mask(*b.model, mask);
    const nn::VitConfig cb = run::vit_config(b.recipe);
    CMHA_CHECK(cb.num_classes == cfg.num_classes && cb.image_size == cfg.image_size && cb.channels == cfg.channels,
               "checkpoint '" + paths[1] + "' classifies other images than '" + path + "' (" +
                   std::to_string(cb.num_classes) + " classes of " + std::to_string(cb.image_size) + " px, " +
                   std::to_string(cb.channels) + " channels, against " + std::to_string(cfg.num_classes) + ", " +
                   std::to_string(cfg.image_size) + " px, " + std::to_string(cfg.channels) +
                   "): McNemar's test needs the same images");
    sb = train::evaluate_classifier(*b.model, loader);
    mc = eval::mcnemar_exact(s.top1_correct, sb->top1_correct);
  }
  const std::string weights = std::string(ema ? " (EMA)" : "") + (mask.empty() ? "" : " (masked " + mask_heads + ")");
  if (json) {
    nlohmann::json j = s.to_json();
    j["checkpoint"] = path;
    j["weights"] = ema ? "ema" : "model";
    j["split"] = split;
    j["data"] = data_name;
    j["top1_ci95"] = {ci.low, ci.high};
    j["top1_bootstrap_mean"] = ci.mean;
    j["bootstrap_resamples"] = ci.resamples;
    if (!mask.empty()) j["masked_heads"] = mask_heads;
    if (sb) {
      nlohmann::json other = sb->to_json();
      other["checkpoint"] = paths[1];
      j["compared"] = other;
      j["mcnemar"] = {{"both_right", mc->both},   {"only_first", mc->only_a}, {"only_second", mc->only_b},
                      {"both_wrong", mc->neither}, {"p_value", mc->p_value}};
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("eval | %s%s | %lld samples | top1 %.2f | top5 %.2f | loss %.4f\n", path.c_str(), weights.c_str(),
              static_cast<long long>(s.samples), s.top1, s.top5, s.loss);
  std::printf("eval | %s split (%s) | top1 95%% CI [%.2f, %.2f] (bootstrap mean %.2f, %d resamples, seed 12345)\n",
              split.c_str(), data_name.c_str(), ci.low, ci.high, ci.mean, ci.resamples);
  if (sb) {
    const eval::AccuracyInterval cib = eval::bootstrap_top1(sb->top1_correct);
    std::printf("eval | %s%s | %lld samples | top1 %.2f | top5 %.2f | loss %.4f\n", paths[1].c_str(), weights.c_str(),
                static_cast<long long>(sb->samples), sb->top1, sb->top5, sb->loss);
    std::printf("eval | top1 95%% CI [%.2f, %.2f] (bootstrap mean %.2f)\n", cib.low, cib.high, cib.mean);
    std::printf("mcnemar | both right %lld | only the first %lld | only the second %lld | both wrong %lld | "
                "p = %.4f (exact, two-sided)%s\n",
                static_cast<long long>(mc->both), static_cast<long long>(mc->only_a),
                static_cast<long long>(mc->only_b), static_cast<long long>(mc->neither), mc->p_value,
                mc->p_value < 0.05 ? " *" : "");
  }
  return 0;
}

}  // namespace cmha::cli
