#include "study/compress_finetune.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "distributed/communicator.h"
#include "run/budget.h"
#include "run/checkpoint.h"
#include "run/recipe.h"
#include "run/run_dir.h"
#include "run/run_results.h"
#include "tensor/atomic_file.h"
#include "tensor/error.h"
#include "study/sweep.h"
#include "train/task_factory.h"
#include "train/training_run.h"

namespace cmha::study {

namespace {

namespace fs = std::filesystem;

// The keys the command sets on each fine-tune itself.
constexpr const char* kOwnKeys[] = {"train.init_from", "train.save_dir", "train.max_updates"};

std::string point_dir(const std::string& out_dir, int64_t key_dim) {
  return (fs::path(out_dir) / ("key_dim-" + std::to_string(key_dim))).string();
}

// What DIR compresses, as compress.json records it: a rerun with another
// checkpoint or other CP-ALS settings would mix two studies in one table.
nlohmann::json settings_of(const CompressFinetuneOptions& o) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(o.checkpoint, ec);
  return {{"checkpoint", ec ? o.checkpoint : canonical.string()},
          {"places", o.compress.places},
          {"iters", o.compress.als.max_iters},
          {"tol", o.compress.als.tol},
          {"init", o.compress.als.init},
          {"seed", o.compress.als.seed}};
}

// Writes DIR/compress.json, or checks that the one there records the same settings.
void claim_out_dir(const std::string& out_dir, const nlohmann::json& settings) {
  const std::string path = (fs::path(out_dir) / "compress.json").string();
  if (!fs::exists(path)) {
    fs::create_directories(out_dir);
    write_file_atomically(path, settings.dump(2) + "\n");
    return;
  }
  nlohmann::json there;
  try {
    std::ifstream in(path);
    there = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error("'" + path + "' is not JSON (" + e.what() + "); remove it or use another -o DIR");
  }
  for (auto it = settings.begin(); it != settings.end(); ++it) {
    const std::string was = there.contains(it.key()) ? there[it.key()].dump() : "nothing";
    CMHA_CHECK(was == it.value().dump(), "-o '" + out_dir + "' holds a compression with " + it.key() + " " + was +
                                             ", this one has " + it.value().dump() +
                                             " (its compress.json): use another -o DIR, or remove that one");
  }
}

// The largest key width D_k of a concat layer in `places`.
int64_t largest_concat_key_dim(const run::Recipe& r, const std::vector<compress::AttentionPlace>& places,
                               std::string* where) {
  int64_t largest = 0;
  for (const compress::AttentionPlace& p : places)
    for (const nn::AttentionConfig& c : p.configs) {
      const int64_t d = c.key_dim > 0 ? c.key_dim : r.integer("model.d_model");
      if (c.type == "concat" && d > largest) largest = d, *where = p.key();
    }
  return largest;
}

// Whether `dir` holds a results.json: that step of the point is done.
bool has_results(const std::string& dir) { return fs::exists(run::run_results_path(dir)); }

// The scores of one checkpoint (the model kind's final evaluation), with the budget of its recipe's model.
nlohmann::json score(const train::ModelKind& kind, const run::Recipe& recipe, const std::string& checkpoint,
                     const std::string& dir) {
  fs::create_directories(dir);
  nlohmann::json results = kind.score_checkpoint(checkpoint, dir);
  const nlohmann::ordered_json budget = run::budget_json(run::model_budget(recipe));
  for (const auto& [k, v] : budget.items()) results[k] = v;
  return results;
}

// The SentencePiece model a translation checkpoint is read with lies beside it (eval/translator.h); a
// compressed checkpoint, and the fine-tune that trains from it, need the same one.
std::string signed_number(double v) { return (v >= 0 ? "+" : "") + table_number(v); }

// compress.md: a row for the original model, then one per D̃k: CP-ALS's error, the key/query parameters,
// the metric compressed and fine-tuned, and what fine-tuning gained.
std::string markdown_table(const std::string& metric, const nlohmann::json& original, int64_t original_key_dim,
                           const std::vector<int64_t>& key_dims, const std::vector<nlohmann::json>& compressed,
                           const std::vector<nlohmann::json>& finetuned, int64_t updates) {
  auto cell = [&](const nlohmann::json& r, const std::string& key) {
    return r.contains(key) && r[key].is_number() ? table_number(r[key].get<double>()) : std::string();
  };
  std::string out = "| D~k | CP-ALS rel. error | key/query parameters | " + metric + " compressed | " + metric +
                    " fine-tuned (" + std::to_string(updates) + " updates) | change |\n"
                    "|---|---:|---:|---:|---:|---:|\n";
  out += "| " + std::to_string(original_key_dim) + " (original, concat D_k) |  | " +
         cell(original, "key_query_parameters") + " | " + cell(original, metric) + " |  |  |\n";
  for (size_t i = 0; i < key_dims.size(); ++i) {
    const double before = compressed[i].at(metric).get<double>(), after = finetuned[i].at(metric).get<double>();
    out += "| " + std::to_string(key_dims[i]) + " | " + cell(compressed[i], "cp_als_error") + " | " +
           cell(compressed[i], "key_query_parameters") + " | " + table_number(before) + " | " + table_number(after) +
           " | " + signed_number(after - before) + " |\n";
  }
  return out;
}

}  // namespace

std::vector<int64_t> parse_key_dim_list(const std::string& text) {
  CMHA_CHECK(!text.empty(), "--key-dim needs D~k values, e.g. --key-dim 256,128,64");
  std::vector<int64_t> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    CMHA_CHECK(!item.empty(), "--key-dim '" + text + "' has an empty item; give D~k values like 256,128,64");
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    CMHA_CHECK(used == item.size() && v >= 1 && v <= (1 << 20),
               "--key-dim: '" + item + "' is not a D~k (a whole number from 1 to 1048576)");
    CMHA_CHECK(std::find(out.begin(), out.end(), v) == out.end(), "--key-dim gives " + item + " twice");
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

CompressFinetuneOutcome run_compress_finetune(const CompressFinetuneOptions& o) {
  CMHA_CHECK(o.finetune_updates >= 1, "--finetune needs a number of updates of 1 or more, got " +
                                          std::to_string(o.finetune_updates));
  CMHA_CHECK(!o.key_dims.empty(), "--key-dim needs D~k values, e.g. --key-dim 256,128,64");
  CMHA_CHECK(!fs::exists(o.out_dir) || fs::is_directory(o.out_dir),
             "-o '" + o.out_dir + "' is a file; cmha compress --finetune writes a directory of runs and tables");
  for (const std::string& kv : o.overrides)
    for (const char* key : kOwnKeys)
      CMHA_CHECK(kv.rfind(std::string(key) + "=", 0) != 0,
                 "cmha compress --finetune sets " + std::string(key) + " of each fine-tune itself; drop '" + kv + "'");
  CMHA_CHECK(!fs::is_directory(o.checkpoint), "checkpoint '" + o.checkpoint + "' is a directory, not a checkpoint file");
  CMHA_CHECK(fs::exists(o.checkpoint), "checkpoint '" + o.checkpoint + "' does not exist");
  const run::Checkpoint in = run::load_checkpoint(o.checkpoint);
  const run::Recipe original = run::Recipe::parse_stored(in.recipe, o.checkpoint + " (recipe)");
  const train::ModelKind& kind = train::model_kind(original.string("model.kind"));
  std::string where;
  const int64_t dk = largest_concat_key_dim(original, compress::select_places(original, o.compress.places), &where);
  for (const int64_t d : o.key_dims)
    CMHA_CHECK(d <= dk, "--key-dim " + std::to_string(d) + " is larger than the model's key width (D_k " +
                            std::to_string(dk) + " in " + where + "); a D~k up to " + std::to_string(dk) +
                            " compresses it");
  // The overrides on the checkpoint's recipe: a bad key or value fails now, not after the first CP-ALS.
  std::vector<std::string> finetune_keys{"train.max_updates=" + std::to_string(o.finetune_updates),
                                         "train.max_epochs=0"};
  finetune_keys.insert(finetune_keys.end(), o.overrides.begin(), o.overrides.end());
  (void)run::Recipe::parse_stored(in.recipe, o.checkpoint + " (recipe)", finetune_keys);
  CompressFinetuneOutcome out;
  out.metric = o.metric.empty() ? kind.metric : o.metric;
  claim_out_dir(o.out_dir, settings_of(o));
  if (o.threads > 0) omp_set_num_threads(static_cast<int>(o.threads));
  auto say = [](const std::string& line) { std::fprintf(stderr, "cmha compress: %s\n", line.c_str()); };

  // The uncompressed model's score, once.
  const std::string original_dir = (fs::path(o.out_dir) / "original").string();
  if (!has_results(original_dir)) {
    say("scoring the original model " + o.checkpoint);
    run::write_run_results(original_dir, score(kind, original, o.checkpoint, original_dir));
  }
  const nlohmann::json original_scores = run::read_run_results(original_dir);
  std::string names;
  for (auto it = original_scores.begin(); it != original_scores.end(); ++it)
    if (it.value().is_number()) names += (names.empty() ? "" : ", ") + it.key();
  CMHA_CHECK(original_scores.contains(out.metric) && original_scores[out.metric].is_number(),
             "--metric " + out.metric + " is not a score of this model (its scores: " + names + ")");
  std::vector<nlohmann::json> compressed, finetuned;
  distributed::SingleCommunicator comm;
  for (size_t k = 0; k < o.key_dims.size(); ++k) {
    if (o.stop_requested()) {
      out.interrupted = true;
      return out;
    }
    const int64_t d = o.key_dims[k];
    const std::string dir = point_dir(o.out_dir, d), ckpt = (fs::path(dir) / "compressed.safetensors").string();
    const std::string tag = "[" + std::to_string(k + 1) + "/" + std::to_string(o.key_dims.size()) + "] D~k " +
                            std::to_string(d) + ": ";
    if (has_results(dir) && fs::exists(ckpt)) {
      say(tag + "compressed and scored before (" + run::run_results_path(dir) + "), skipped");
    } else {
      compress::CompressOptions copt = o.compress;
      copt.shared_dim = d;
      copt.layers.clear();
      double error_sum = 0, error_max = 0;
      int64_t layers = 0;
      const auto began = std::chrono::steady_clock::now();
      const run::Checkpoint c = compress::compress_checkpoint(in, o.checkpoint, copt, [&](const compress::LayerReport& l) {
        error_sum += l.error, error_max = std::max(error_max, l.error), ++layers;
      });
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      fs::create_directories(dir);
      run::save_checkpoint(ckpt, c);
      run::copy_spm_model_beside(o.checkpoint, dir);  // translate and score with the original's pieces
      char line[160];
      std::snprintf(line, sizeof line, "CP-ALS of %lld layers in %.2f s, relative error %.3e mean, %.3e max; scoring it",
                    static_cast<long long>(layers), seconds, error_sum / std::max<int64_t>(layers, 1), error_max);
      say(tag + line);
      nlohmann::json results =
          score(kind, run::Recipe::parse_stored(c.recipe, ckpt + " (recipe)"), ckpt, dir);
      results["cp_als_error"] = error_sum / std::max<int64_t>(layers, 1);
      results["cp_als_error_max"] = error_max;
      results["cp_als_seconds"] = seconds;
      results["cp_als_layers"] = layers;
      run::write_run_results(dir, results);
    }
    compressed.push_back(run::read_run_results(dir));

    // The fine-tune: the compressed checkpoint's recipe, trained from it for U updates.
    const std::string run_dir = (fs::path(dir) / "finetune").string();
    std::vector<std::string> keys{"train.init_from=" + ckpt, "train.save_dir=" + run_dir};
    keys.insert(keys.end(), finetune_keys.begin(), finetune_keys.end());
    const run::Recipe recipe =
        run::Recipe::parse_stored(run::load_checkpoint(ckpt).recipe, ckpt + " (recipe)", keys);
    const std::string stale = stale_run_reason(run_dir, recipe);
    CMHA_CHECK(stale.empty(), "the fine-tune directory '" + run_dir + "' holds a run of a different recipe (" + stale +
                                  "): use another -o DIR, or remove that run");
    if (has_results(run_dir)) {
      say(tag + "fine-tuned before (" + run::run_results_path(run_dir) + "), skipped");
    } else {
      say(tag + "fine-tuning " + std::to_string(o.finetune_updates) + " updates in " + run_dir);
      train::TrainingRunOptions topt;
      topt.recipe_name = ckpt + " (fine-tune)";
      topt.start = run::RunStart::resume;
      topt.threads = o.threads > 0 ? o.threads : -1;
      topt.stop_requested = o.stop_requested;
      if (!train::run_training(recipe, topt, comm)) {
        out.interrupted = true;
        return out;
      }
      CMHA_CHECK(has_results(run_dir), "the fine-tune in '" + run_dir + "' wrote no results.json (its task has no "
                                       "final evaluation)");
    }
    finetuned.push_back(run::read_run_results(run_dir));
    for (const nlohmann::json* r : {&compressed.back(), &finetuned.back()})
      CMHA_CHECK(r->contains(out.metric) && (*r)[out.metric].is_number(),
                 "the scores of D~k " + std::to_string(d) + " have no numeric '" + out.metric + "' (they have: " +
                     r->dump() + ")");
  }

  // compress.csv: every score a row, as sweep.csv; compress.md: a row per D̃k.
  GridAxis key_axis{"key_dim", {}}, stage_axis{"stage", {"original", "compressed", "finetuned"}};
  std::vector<SweepRow> rows{{{"original", {}, {std::to_string(dk), "original"}}, original_scores}};
  for (size_t k = 0; k < o.key_dims.size(); ++k) {
    const std::string d = std::to_string(o.key_dims[k]);
    key_axis.values.push_back(d);
    rows.push_back({{"key_dim-" + d + "_compressed", {}, {d, "compressed"}}, compressed[k]});
    nlohmann::json tuned = finetuned[k];
    tuned["finetune_updates"] = o.finetune_updates;
    rows.push_back({{"key_dim-" + d + "_finetuned", {}, {d, "finetuned"}}, tuned});
  }
  out.csv_path = (fs::path(o.out_dir) / "compress.csv").string();
  out.md_path = (fs::path(o.out_dir) / "compress.md").string();
  out.table = markdown_table(out.metric, original_scores, dk, o.key_dims, compressed, finetuned, o.finetune_updates);
  write_file_atomically(out.csv_path, sweep_csv({key_axis, stage_axis}, rows, out.metric));
  write_file_atomically(out.md_path, out.table);
  return out;
}

}  // namespace cmha::study
