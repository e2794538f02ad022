// cmha eval CHECKPOINT [--data DIR] [--ema] [--json] [--batch-size N] [--threads T] [data.key=value ...]
// Scores an image classifier checkpoint: top-1, top-5 and loss on the
// validation split its recipe names (or an ImageFolder DIR, or the data.*
// overrides given), through the recipe's evaluation transform.
#include <omp.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "cli/command_line.h"
#include "data/image_dataset.h"
#include "data/image_loader.h"
#include "data/shard_dataset.h"
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
    "cross-entropy.\n";

}  // namespace

int eval_command(const Args& args) {
  std::vector<std::string> positionals;
  std::string folder;
  bool ema = false, json = false;
  long long batch_size = 0, threads = 0;
  CommandLine cl("eval", kEvalDescription);
  cl.app().add_option("checkpoint", positionals, "the checkpoint, and data.key=value overrides of its recipe")
      ->type_name("CHECKPOINT [data.key=value ...]");
  cl.app().add_option("--data", folder,
                      "score an ImageFolder DIR/<class>/<image> instead; it must have the model's model.num_classes "
                      "class folders, named as in training")
      ->type_name("DIR");
  cl.app().add_flag("--ema", ema, "score the exponential moving average of the weights");
  cl.app().add_flag("--json", json, "print one JSON object instead of the line");
  cl.app().add_option("--batch-size", batch_size, "images per forward pass (default: the recipe's data.batch_size)")
      ->check(whole_number(1, 1 << 20))->type_name("N");
  std::string mask_heads;
  cl.app().add_option("--mask-heads", mask_heads,
                      "silence attention heads: a comma-separated list of PLACE.LAYER:HEAD (encoder.3:5; places encoder, "
                      "decoder, cross, or attention for a ViT; layers and heads from 0) or PLACE.LAYER:dJ (shared "
                      "query/key dimension J of a collaborative layer); a masked head's output is zero")
      ->type_name("PLACE.LAYER:HEAD,...");
  cl.app().add_option("--threads", threads, "CPU threads (default: the recipe's train.threads)")
      ->check(whole_number(1, 4096))->type_name("T");
  if (!cl.parse(args)) return 0;
  const auto [path, overrides] = split_overrides(positionals, "eval", "checkpoint");
  // The architecture comes from the checkpoint; only where the data lives may change.
  for (const std::string& o : overrides)
    CMHA_CHECK(o.rfind("data.", 0) == 0, "cmha eval takes only data.* overrides (the model is the checkpoint's), got '" + o + "'");
  CMHA_CHECK(!path.empty(), "cmha eval needs a checkpoint (try 'cmha eval --help')");
  const std::vector<nn::HeadMaskItem> mask =
      mask_heads.empty() ? std::vector<nn::HeadMaskItem>{} : nn::parse_head_mask(mask_heads);
  CMHA_CHECK(std::filesystem::exists(path), "checkpoint '" + path + "' does not exist");  // the loader names a directory
  const run::Checkpoint ckpt = run::load_checkpoint(path);
  // The model first: image data.* overrides on a translation model's recipe would be refused for that less clearly.
  const std::string task = run::Recipe::parse_stored(ckpt.recipe, path + " (recipe)").string("train.task");
  CMHA_CHECK(task != "translation", "checkpoint '" + path +
                                        "' is a translation model; score it with 'cmha translate' and 'cmha bleu'");
  const run::Recipe recipe = run::Recipe::parse_stored(ckpt.recipe, path + " (recipe)", overrides);
  CMHA_CHECK(task == "image_classification" && recipe.string("model.kind") == "vit",
             "checkpoint '" + path + "' is a " + recipe.string("model.kind") + " for " + task +
                 ", not an image classifier (model.kind vit)");
  CMHA_CHECK(!ema || !ckpt.ema.empty(),
             "checkpoint '" + path + "' holds no EMA weights (the run had train.ema_decay 0); drop --ema");
  const long long t = threads > 0 ? threads : recipe.integer("train.threads");
  if (t > 0) omp_set_num_threads(static_cast<int>(t));

  const nn::VitConfig cfg = run::vit_config(recipe);
  Generator init_gen(static_cast<uint64_t>(recipe.integer("train.seed")));
  nn::VisionTransformer model(cfg, init_gen);
  std::map<std::string, Tensor> params;
  for (auto& [name, p] : model.named_parameters()) params.emplace(name, p);
  run::restore_weights(path, ema ? ckpt.ema : ckpt.weights, params);
  if (!mask.empty()) nn::apply_head_mask(model, mask);

  std::shared_ptr<const data::ImageDataset> dataset;
  std::string data_name;
  if (folder.empty()) {
    dataset = train::make_image_data(recipe).valid;
    data_name = recipe.string("data.format") == "idx"
                    ? recipe.string("data.valid_images")
                    : (std::filesystem::path(recipe.string("data.root")) / recipe.string("data.valid_dir")).string();
  } else {
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
  }
  data::ImageLoaderOptions options = train::image_loader_options(recipe, false);
  if (batch_size > 0) options.batch_size = batch_size;
  data::ImageLoader loader(dataset, options, static_cast<uint64_t>(recipe.integer("train.seed")));
  const eval::ClassificationScores s = train::evaluate_classifier(model, loader);
  if (json) {
    nlohmann::json j = s.to_json();
    j["checkpoint"] = path;
    j["weights"] = ema ? "ema" : "model";
    j["data"] = data_name;
    if (!mask.empty()) j["masked_heads"] = mask_heads;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("eval | %s%s%s | %lld samples | top1 %.2f | top5 %.2f | loss %.4f\n", path.c_str(), ema ? " (EMA)" : "",
                mask.empty() ? "" : (" (masked " + mask_heads + ")").c_str(),
                static_cast<long long>(s.samples), s.top1, s.top5, s.loss);
  }
  return 0;
}

}  // namespace cmha::cli
