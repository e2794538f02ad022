// cmha eval CHECKPOINT [CHECKPOINT_B] [--split test|valid] [--data DIR] [--ema] [--json] [--batch-size N]
//           [--threads T] [data.key=value ...]
// Scores an image classifier checkpoint: top-1 with its bootstrap 95 %
// interval, top-5 and loss on the test split its recipe names (else its
// validation split, or an ImageFolder DIR, or the data.* overrides given),
// through the recipe's evaluation transform; given a second checkpoint, both
// on the same images and the exact McNemar test between them.
#include <cstdio>
#include <optional>

#include "cli/command_line.h"
#include "nn/head_mask.h"
#include "train/classifier_evaluation.h"

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
  train::ClassifierEvaluationRequest q;
  for (const std::string& a : positionals) (a.find('=') != std::string::npos ? q.overrides : q.checkpoints).push_back(a);
  q.folder = folder;
  q.split = split;
  q.ema = ema;
  if (!mask_heads.empty()) q.mask = nn::parse_head_mask(mask_heads);
  q.batch_size = batch_size;
  q.threads = threads;
  const train::ClassifierEvaluation r = train::evaluate_checkpoints(q);
  const std::vector<std::string>& paths = q.checkpoints;
  const std::string& path = paths[0];
  const eval::ClassificationScores& s = r.first;
  const eval::AccuracyInterval& ci = r.first_interval;
  const std::optional<eval::ClassificationScores>& sb = r.second;
  const std::optional<eval::McNemarTest>& mc = r.mcnemar;
  const std::string& split_name = r.images.split;
  const std::string& data_name = r.images.name;
  const std::string weights = std::string(ema ? " (EMA)" : "") + (q.mask.empty() ? "" : " (masked " + mask_heads + ")");
  if (json) {
    nlohmann::json j = s.to_json();
    j["checkpoint"] = path;
    j["weights"] = ema ? "ema" : "model";
    j["split"] = split_name;
    j["data"] = data_name;
    j["top1_ci95"] = {ci.low, ci.high};
    j["top1_bootstrap_mean"] = ci.mean;
    j["bootstrap_resamples"] = ci.resamples;
    if (!q.mask.empty()) j["masked_heads"] = mask_heads;
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
              split_name.c_str(), data_name.c_str(), ci.low, ci.high, ci.mean, ci.resamples);
  if (sb) {
    const eval::AccuracyInterval& cib = *r.second_interval;
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
