#include "train/classifier_evaluation.h"

#include <omp.h>

#include <filesystem>
#include <map>

#include "data/image_loader.h"
#include "data/shard_dataset.h"
#include "run/checkpoint.h"
#include "run/model_config.h"
#include "tensor/error.h"
#include "train/image_pipeline.h"
#include "train/image_task.h"

namespace cmha::train {

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
  Generator init_gen(static_cast<uint64_t>(recipe.integer("train.seed")));
  auto model = std::make_unique<nn::VisionTransformer>(run::vit_config(recipe), init_gen);
  std::map<std::string, Tensor> params;
  for (auto& [name, p] : model->named_parameters()) params.emplace(name, p);
  run::restore_weights(path, ema ? ckpt.ema : ckpt.weights, params);
  return {std::move(recipe), std::move(model)};
}

ScoredImages open_scored_images(const run::Recipe& recipe, const std::string& checkpoint, const std::string& folder,
                                const std::string& split) {
  if (folder.empty()) {
    const ImageData d = make_image_data(recipe);
    const std::string chosen = split.empty() ? (d.test ? "test" : "valid") : split;
    CMHA_CHECK(chosen == "valid" || d.test, "checkpoint '" + checkpoint +
                                                "' has no test split in its recipe (data.test_images or "
                                                "data.test_dir); give it as data.* overrides or use --split valid");
    if (chosen == "test") return {d.test, chosen, d.test_source};
    return {d.valid, chosen, d.valid_source};
  }
  CMHA_CHECK(split.empty(), "--split chooses a split of the recipe; --data '" + folder + "' is scored instead");
  CMHA_CHECK(std::filesystem::is_directory(folder), "--data '" + folder + "' is not a directory");
  const nn::VitConfig cfg = run::vit_config(recipe);
  const data::ColorMode mode = cfg.channels == 3 ? data::ColorMode::rgb : data::ColorMode::grey;
  const int64_t max_pixels = recipe.integer("data.max_image_pixels");
  // A folder of shards (cmha pack) or an ImageFolder tree.
  std::shared_ptr<const data::ImageDataset> images;
  if (std::filesystem::exists(std::filesystem::path(folder) / data::kShardSetFile))
    images = std::make_shared<data::ShardDataset>(folder, mode, cfg.num_classes, max_pixels);
  else
    images = std::make_shared<data::ImageFolderDataset>(folder, mode, cfg.num_classes, max_pixels);
  // Labels are class-folder indices: fewer folders than the model's classes would shift them.
  CMHA_CHECK(images->num_classes() == cfg.num_classes,
             "--data '" + folder + "' has " + std::to_string(images->num_classes()) +
                 " class folders but the model of '" + checkpoint + "' has model.num_classes " +
                 std::to_string(cfg.num_classes));
  return {std::move(images), "folder", folder};
}

ClassifierEvaluation evaluate_checkpoints(ClassifierEvaluationRequest q) {
  CMHA_CHECK(!q.checkpoints.empty(), "cmha eval needs a checkpoint (try 'cmha eval --help')");
  CMHA_CHECK(q.checkpoints.size() <= 2, "cmha eval takes one checkpoint, or two to compare, got " +
                                            std::to_string(q.checkpoints.size()) + ": '" + q.checkpoints[0] +
                                            "', '" + q.checkpoints[1] + "', '" + q.checkpoints[2] + "'");
  // The architecture comes from the checkpoint; only where the data lives may change.
  for (const std::string& o : q.overrides)
    CMHA_CHECK(o.rfind("data.", 0) == 0,
               "cmha eval takes only data.* overrides (the model is the checkpoint's), got '" + o + "'");
  const std::string& path = q.checkpoints[0];
  LoadedClassifier a = load_classifier(path, q.overrides, q.ema);
  if (!q.mask.empty()) nn::apply_head_mask(*a.model, q.mask);
  const int64_t threads = q.threads > 0 ? q.threads : a.recipe.integer("train.threads");
  if (threads > 0) omp_set_num_threads(static_cast<int>(threads));

  ClassifierEvaluation out;
  out.images = open_scored_images(a.recipe, path, q.folder, q.split);
  data::ImageLoaderOptions options = image_loader_options(a.recipe, false);
  if (q.batch_size > 0) options.batch_size = q.batch_size;
  data::ImageLoader loader(out.images.dataset, options, static_cast<uint64_t>(a.recipe.integer("train.seed")));
  out.first = evaluate_classifier(*a.model, loader);
  out.first_interval = eval::bootstrap_top1(out.first.top1_correct);
  if (q.checkpoints.size() == 1) return out;

  // The second checkpoint on the same images, through the first's loader (the same order).
  LoadedClassifier b = load_classifier(q.checkpoints[1], {}, q.ema);
  if (!q.mask.empty()) nn::apply_head_mask(*b.model, q.mask);
  const nn::VitConfig ca = run::vit_config(a.recipe), cb = run::vit_config(b.recipe);
  CMHA_CHECK(cb.num_classes == ca.num_classes && cb.image_size == ca.image_size && cb.channels == ca.channels,
             "checkpoint '" + q.checkpoints[1] + "' classifies other images than '" + path + "' (" +
                 std::to_string(cb.num_classes) + " classes of " + std::to_string(cb.image_size) + " px, " +
                 std::to_string(cb.channels) + " channels, against " + std::to_string(ca.num_classes) + ", " +
                 std::to_string(ca.image_size) + " px, " + std::to_string(ca.channels) +
                 "): McNemar's test needs the same images");
  out.second = evaluate_classifier(*b.model, loader);
  out.second_interval = eval::bootstrap_top1(out.second->top1_correct);
  out.mcnemar = eval::mcnemar_exact(out.first.top1_correct, out.second->top1_correct);
  return out;
}

}  // namespace cmha::train
