// cmha heads CKPT: the paper's Figure 1 for a checkpoint — how many principal
// components hold 90 % / 95 % of the energy of each layer's W_Q, W_K and of
// the stacked per-head products W_Q^(i) W_K^(i)^T; a table, and the cumulative
// curves drawn by plot_heads.py.
#include <omp.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/command_line.h"
#include "compress/head_energy.h"
#include "data/text_corpus.h"
#include "nn/vit.h"
#include "tensor/error.h"
#include "run/checkpoint.h"
#include "eval/head_importance.h"
#include "tensor/atomic_file.h"
#include "train/classifier_evaluation.h"
#include "train/image_pipeline.h"
#include "train/image_task.h"
#include "train/progress.h"
#include "run/model_config.h"
#include "eval/translator.h"

namespace cmha::cli {

namespace {

const char* kHeadsDescription =
    "For every concat or collaborative attention layer of a checkpoint: the\n"
    "energy (sum of squared singular values) captured by the leading principal\n"
    "components of the concatenated query projection W_Q, of W_K, and of the\n"
    "per-head products W_Q^(i) W_K^(i)^T stacked across heads (Cordonnier et al.\n"
    "2020, Figure 1). Prints the dimensions holding 90 % and 95 % of each, and\n"
    "draws the cumulative curves (python3 + matplotlib).\n"
    "With --importance instead: each head's importance, the increase of the\n"
    "validation loss when that head alone is masked (Michel et al. 2019): a\n"
    "table, DIR/importance.json and one bar chart per layer, DIR/PLACE.LAYER.png.\n";

// The masking's progress: rewritten in place on a terminal; in a log (stderr not a terminal), a whole line
// per head with its loss increase.
void report_masked_head(const eval::LayerImportance& l, int64_t h) {
  if (train::stderr_is_interactive())
    std::fprintf(stderr, "\rcmha heads: %s.%lld head %lld masked   ", l.place.c_str(), static_cast<long long>(l.layer),
                 static_cast<long long>(h));
  else
    std::fprintf(stderr, "cmha heads: %s.%lld head %lld masked: loss %+.5f\n", l.place.c_str(),
                 static_cast<long long>(l.layer), static_cast<long long>(h), l.increase.back());
}

struct ImportanceOptions {
  std::string data, out_dir = "head_importance";
  long long max_sentences = 0, batch_size = 0;
  bool plot = true;
};

// The validation loss of a translation checkpoint's model as it is masked
// now: nats per target piece over the sentence pairs of `prefix`.
eval::HeadImportance translation_importance(const std::string& path, const run::Recipe& r,
                                            const ImportanceOptions& o, std::string* data_name) {
  const std::string prefix = o.data.empty() ? r.string("data.valid_prefix") : o.data;
  const std::string src_path = prefix + "." + r.string("data.source_lang"), tgt_path = prefix + "." + r.string("data.target_lang");
  std::vector<std::string> sources = data::read_text_lines(src_path), targets = data::read_text_lines(tgt_path);
  CMHA_CHECK(sources.size() == targets.size(), "source file '" + src_path + "' has " + std::to_string(sources.size()) +
                                                   " lines but target file '" + tgt_path + "' has " +
                                                   std::to_string(targets.size()));
  CMHA_CHECK(!sources.empty(), "source file '" + src_path + "' has no lines to score");
  if (o.max_sentences > 0 && static_cast<size_t>(o.max_sentences) < sources.size()) {
    sources.resize(static_cast<size_t>(o.max_sentences));
    targets.resize(static_cast<size_t>(o.max_sentences));
  }
  *data_name = prefix + " (" + std::to_string(sources.size()) + " sentence pairs)";
  eval::TranslatorOptions topt;
  if (o.batch_size > 0) topt.max_tokens = o.batch_size;
  eval::Translator translator(path, topt);
  auto loss = [&] {
    std::vector<int64_t> lengths;
    const std::vector<double> lp = translator.score(sources, targets, &lengths, "source file '" + src_path + "'",
                                                    "target file '" + tgt_path + "'");
    double total = 0;
    int64_t pieces = 0;
    for (size_t i = 0; i < lp.size(); ++i) total -= lp[i], pieces += lengths[i];
    return total / static_cast<double>(pieces);
  };
  return eval::head_importance(translator.model(), loss, report_masked_head);
}

// The same for an image classifier: mean cross-entropy over its validation images (or --data's folder).
eval::HeadImportance image_importance(const std::string& path, const ImportanceOptions& o, std::string* data_name) {
  const train::LoadedClassifier classifier = train::load_classifier(path);
  const std::string split = o.data.empty() ? "valid" : "";  // --data's folder, or the validation split
  const train::ScoredImages images = train::open_scored_images(classifier.recipe, path, o.data, split);
  data::ImageLoaderOptions options = train::image_loader_options(classifier.recipe, false);
  if (o.batch_size > 0) options.batch_size = o.batch_size;
  *data_name = images.name;
  data::ImageLoader loader(images.dataset, options, static_cast<uint64_t>(classifier.recipe.integer("train.seed")));
  auto loss = [&] { return train::evaluate_classifier(*classifier.model, loader).loss; };
  return eval::head_importance(*classifier.model, loss, report_masked_head);
}

int importance_command(const std::string& path, const ImportanceOptions& o) {
  CMHA_CHECK(std::filesystem::exists(path), "checkpoint '" + path + "' does not exist");
  const run::Checkpoint ckpt = run::load_checkpoint(path);
  const run::Recipe r = run::Recipe::parse_stored(ckpt.recipe, path + " (recipe)");
  std::string data_name;
  const eval::HeadImportance imp = r.string("train.task") == "translation"
                                       ? translation_importance(path, r, o, &data_name)
                                       : image_importance(path, o, &data_name);
  if (train::stderr_is_interactive()) std::fprintf(stderr, "\r%60s\r", "");
  std::printf("head importance: the loss increase with each head alone masked (Michel et al. 2019)\n");
  std::printf("data: %s; unmasked loss %.5f\n", data_name.c_str(), imp.base_loss);
  std::printf("%-14s %-13s  %s\n", "layer", "type", "head 0, 1, ...: loss increase");
  nlohmann::json layers = nlohmann::json::array();
  for (const eval::LayerImportance& l : imp.layers) {
    const std::string name = l.place + "." + std::to_string(l.layer);
    std::string row;
    for (const double d : l.increase) {
      char cell[32];
      std::snprintf(cell, sizeof cell, " %+.4f", d);
      row += cell;
    }
    std::printf("%-14s %-13s %s\n", name.c_str(), l.type.c_str(), row.c_str());
    layers.push_back({{"layer", name}, {"place", l.place}, {"index", l.layer}, {"type", l.type},
                      {"loss", l.loss}, {"increase", l.increase}});
  }
  std::filesystem::create_directories(o.out_dir);
  const std::string json_path = (std::filesystem::path(o.out_dir) / "importance.json").string();
  const nlohmann::json doc = {{"checkpoint", path}, {"data", data_name}, {"base_loss", imp.base_loss}, {"layers", layers}};
  write_file_atomically(json_path, doc.dump(1) + "\n");
  std::printf("wrote %s\n", json_path.c_str());
  if (!o.plot) return 0;
  const int rc = run_plot_script(plot_script_path("plot_head_importance.py"), {json_path, "-o", o.out_dir});
  if (rc == 0) std::printf("wrote %s/PLACE.LAYER.png, one per layer\n", o.out_dir.c_str());
  return rc;
}

}  // namespace

int heads_command(const Args& args) {
  std::string input, png = "heads.png", json_path;
  bool no_plot = false;
  CommandLine cl("heads", kHeadsDescription);
  cl.app().add_option("checkpoint", input, "the checkpoint")->type_name("CKPT");
  cl.app().add_option("-o,--output", png, "the plot to write")->type_name("OUT.png")->capture_default_str();
  cl.app().add_option("--json", json_path, "also write the curves as JSON")->type_name("OUT.json");
  cl.app().add_flag("--no-plot", no_plot, "print the table only");
  bool importance = false;
  long long threads = 0;
  ImportanceOptions imp;
  cl.app().add_flag("--importance", importance,
                    "instead: each head's importance, the validation loss increase when it alone is masked");
  cl.app().add_option("--data", imp.data,
                      "--importance on this data instead of the recipe's validation split: a corpus prefix "
                      "(PREFIX.<source_lang>, PREFIX.<target_lang>) for a translation model, an ImageFolder DIR for "
                      "an image classifier")
      ->type_name("PREFIX|DIR");
  cl.app().add_option("--max-sentences", imp.max_sentences, "--importance: score only the first N sentence pairs")
      ->check(whole_number(1, 1LL << 40))->type_name("N");
  cl.app().add_option("--batch-size", imp.batch_size,
                      "--importance: images per forward pass, or tokens per batch for translation")
      ->check(whole_number(1, 1LL << 30))->type_name("N");
  cl.app().add_option("--output-dir", imp.out_dir, "--importance: where importance.json and the PNGs go")
      ->type_name("DIR")->capture_default_str();
  cl.app().add_option("--threads", threads, "CPU threads (default: all cores, or OMP_NUM_THREADS)")
      ->check(whole_number(1, 4096))->type_name("T");
  if (!cl.parse(args)) return 0;
  if (threads > 0) omp_set_num_threads(static_cast<int>(threads));
  if (!importance)
    for (const char* o : {"--data", "--max-sentences", "--batch-size", "--output-dir"})
      CMHA_CHECK(cl.app().count(o) == 0, std::string(o) + " goes with --importance");
  if (importance) {
    CMHA_CHECK(!input.empty(), "cmha heads needs a checkpoint (try 'cmha heads --help')");
    CMHA_CHECK(cl.app().count("--output") == 0 && cl.app().count("--json") == 0,
               "--importance writes into --output-dir DIR, not -o or --json");
    imp.plot = !no_plot;
    return importance_command(input, imp);
  }
  const bool plot = !no_plot;
  CMHA_CHECK(!input.empty(), "cmha heads needs a checkpoint (try 'cmha heads --help')");
  const auto layers = compress::checkpoint_head_energy(run::load_checkpoint(input), input);

  std::printf("%-32s %-13s %5s %6s   %-11s %-11s %-11s\n", "layer", "type", "heads", "D_k", "W_Q 90/95%",
              "W_K 90/95%", "W_QW_K^T 90/95%");
  nlohmann::json curves = nlohmann::json::array();
  for (const auto& l : layers) {
    auto pair = [](const compress::EnergyCurve& c) {
      return std::to_string(c.dims_for(0.90)) + "/" + std::to_string(c.dims_for(0.95));
    };
    std::printf("%-32s %-13s %5lld %6lld   %-11s %-11s %-11s\n", l.prefix.c_str(), l.type.c_str(),
                static_cast<long long>(l.heads), static_cast<long long>(l.key_dim), pair(l.query).c_str(),
                pair(l.key).c_str(), pair(l.products).c_str());
    curves.push_back({{"layer", l.prefix}, {"type", l.type}, {"heads", l.heads}, {"key_dim", l.key_dim},
                      {"query", l.query.cumulative}, {"key", l.key.cumulative}, {"products", l.products.cumulative}});
  }
  const nlohmann::json doc = {{"checkpoint", input}, {"layers", curves}};
  if (!json_path.empty()) write_file_atomically(json_path, doc.dump() + "\n");
  if (!plot) return 0;
  // The plotting script reads the curves from a file beside the PNG.
  const std::string tmp = json_path.empty() ? png + ".json" : json_path;
  if (json_path.empty()) write_file_atomically(tmp, doc.dump() + "\n");
  const int rc = run_plot_script(plot_script_path("plot_heads.py"), {tmp, "-o", png});
  if (json_path.empty()) std::filesystem::remove(tmp);
  if (rc == 0) std::printf("wrote %s\n", png.c_str());
  return rc;
}

}  // namespace cmha::cli
