// cmha compress CKPT --key-dim D -o OUT: concat attention → collaborative,
// by CP decomposition of the per-head query/key products (compress/).
// cmha compress CKPT --key-dim D1,D2,... --finetune U [key.path=value ...] -o DIR:
// that for each D, scored before and after U updates of fine-tuning
// (study/compress_finetune.h), a table and a plot.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <sstream>

#include "cli/command_line.h"
#include "compress/convert_attention.h"
#include "nn/attention/registry.h"
#include "run/finetune_recipe.h"
#include "run/options.h"
#include "run/run_dir.h"
#include "study/compress_finetune.h"
#include "tensor/error.h"

namespace cmha::cli {

namespace {

const char* kCompressDescription =
    "Turns every concat attention layer of a checkpoint into a collaborative one\n"
    "of shared key width D (Cordonnier et al. 2020, section 3.3), without\n"
    "retraining: the per-head products W_Q^(i) W_K^(i)^T get a rank-D CP\n"
    "decomposition; the query biases become the content bias, the key biases are\n"
    "dropped (the softmax ignores them), values, output and score scale are kept.\n"
    "D >= the layer's key width writes the exact factorisation (same function).\n"
    "Layers may get their own D (--key-dim encoder.0=128,64); the recipe then\n"
    "records them in model.<place>.layers.\n"
    "OUT is a normal checkpoint (weights and recipe; no optimiser or EMA state).\n"
    "Beside it, OUT's name with .yaml is the recipe to fine-tune it with\n"
    "('cmha train OUT.yaml': train.init_from is OUT).\n"
    "\n"
    "With --finetune U, the paper's whole post-hoc workflow (its Tables 4 and 5):\n"
    "--key-dim is a list of D~k values, and for each D, in DIR/key_dim-D/, the\n"
    "model is compressed, scored on its recipe's test split (BLEU for a\n"
    "translation model, top-1 for an image classifier), fine-tuned for U updates\n"
    "with its own recipe and the key.path=value overrides given (DIR/key_dim-D/\n"
    "finetune/, a normal run directory), and scored again. DIR/original/ holds\n"
    "the uncompressed model's score. The scores go to DIR/compress.csv (a row per\n"
    "score) and DIR/compress.md (a row per D~k), and DIR/compress.png plots the\n"
    "metric before and after fine-tuning against D~k. Running the same command\n"
    "again skips the finished steps and resumes an unfinished fine-tune; more\n"
    "D~k values may be added. DIR/compress.json records the checkpoint and the\n"
    "CP-ALS settings: a run with others into the same DIR is refused.\n";

// The attention places of each model kind (nn/attention/registry.h), for --layers' help.
std::string place_list() {
  std::string places;
  std::vector<std::string> kinds;
  for (const nn::AttentionPlace& p : nn::attention_places())
    if (std::find(kinds.begin(), kinds.end(), p.model_kind) == kinds.end()) kinds.push_back(p.model_kind);
  for (const std::string& kind : kinds) {
    std::string names;
    for (const nn::AttentionPlace& p : nn::attention_places(kind))
      names += (names.empty() ? "" : ", ") + p.short_name;
    places += (places.empty() ? "" : "; ") + names + " (" + kind + ")";
  }
  return places;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ',');)
    if (!part.empty()) out.push_back(part);
  CMHA_CHECK(!out.empty(), "option '--layers' needs attention places, e.g. --layers encoder,cross");
  return out;
}

// --finetune: the loop over D~k values (study/compress_finetune.h), its table, and its plot (plot_sweep.py).
int compress_finetune(const study::CompressFinetuneOptions& options) {
  const study::CompressFinetuneOutcome outcome = study::run_compress_finetune(options);
  if (outcome.interrupted) throw Interrupted{};
  std::fputs(outcome.table.c_str(), stdout);
  std::fprintf(stderr, "cmha compress: wrote %s and %s\n", outcome.csv_path.c_str(), outcome.md_path.c_str());
  const std::string png = (std::filesystem::path(options.out_dir) / "compress.png").string();
  int code = 2;  // the tables are written: a missing matplotlib costs only the picture
  try {
    code = run_plot_script(plot_script_path("plot_sweep.py"),
                           {outcome.csv_path, "--keys", "key_dim,stage", "--lines", "stage", "--x", "key_dim",
                            "--metric", outcome.metric, "-o", png});
  } catch (const Error&) {
  }
  if (code != 0)
    std::fprintf(stderr, "cmha compress: %s not drawn (plot_sweep.py failed; needs python3-matplotlib)\n", png.c_str());
  return 0;
}

}  // namespace

int compress_command(const Args& args) {
  std::vector<std::string> positionals;
  std::string out, layers, key_dims, metric;
  long long threads = 0, finetune = 0;
  compress::CompressOptions opt;
  CommandLine cl("compress", kCompressDescription);
  cl.app().add_option("checkpoint", positionals,
                      "the checkpoint with concat attention, and (with --finetune) key.path=value overrides of its "
                      "recipe for the fine-tunes")
      ->type_name("CKPT [key.path=value ...]");
  cl.app().add_option("--key-dim", key_dims,
                      "shared query/key width D~k (required): D for every concat layer, PLACE.LAYER=D for one "
                      "layer (encoder.0=128; layers from 0), or a comma-separated list of both "
                      "(encoder.0=128,encoder.5=32,64: 64 for the other layers); with --finetune, the D~k values "
                      "to compare (256,128,64)")
      ->type_name("D|PLACE.LAYER=D,...");
  cl.app().add_option("-o,--output", out,
                      "the compressed checkpoint to write (required); with --finetune, the directory of the runs "
                      "and tables")
      ->type_name("OUT|DIR");
  cl.app().add_option("--finetune", finetune,
                      "for each D~k of --key-dim: compress, score, fine-tune U updates with the checkpoint's recipe, "
                      "score again; tabulate and plot")
      ->check(whole_number(1, 1LL << 40))->type_name("U");
  cl.app().add_option("--metric", metric,
                      "with --finetune, the score the table leads with (default: bleu for translation, top1 for "
                      "image classification)")
      ->type_name("NAME");
  cl.app().add_option("--layers", layers,
                      "comma-separated attention places: " + place_list() + " (default: every concat place)")
      ->type_name("PLACES");
  cl.app().add_option("--iters", opt.als.max_iters, "CP-ALS iterations at most")
      ->check(whole_number(1, 1000000))->type_name("N")->capture_default_str();
  cl.app().add_option("--tol", opt.als.tol, "stop when the relative error changes by less than X of itself")
      ->check(number(0))->type_name("X")->capture_default_str();
  cl.app().add_option("--init", opt.als.init,
                      "CP-ALS start: N(0, 1) entries, or the leading singular vectors of the unfoldings (LAPACK's "
                      "eigensolver of their D x D Grams)")
      ->check(one_of({"svd", "random"}))->type_name("INIT")->capture_default_str();
  cl.app().add_option("--seed", opt.als.seed, "seed of the random start")
      ->check(whole_number(0, 1LL << 62))->type_name("S")->capture_default_str();
  cl.app().add_option("--threads", threads, "CPU threads (default: all cores)")
      ->check(whole_number(1, 4096))->type_name("T");
  if (!cl.parse(args)) return 0;
  const FileAndOverrides given = split_overrides(positionals, "compress", "checkpoint");
  const std::string& input = given.file;
  if (cl.app().count("--layers") > 0) opt.places = split_commas(layers);
  CMHA_CHECK(!input.empty(), "cmha compress needs a checkpoint (try 'cmha compress --help')");
  CMHA_CHECK(cl.app().count("--key-dim") > 0, "cmha compress needs --key-dim D");
  const bool loop = cl.app().count("--finetune") > 0;
  CMHA_CHECK(!out.empty(), loop ? "cmha compress --finetune needs -o DIR" : "cmha compress needs -o OUT");
  if (loop) {
    study::CompressFinetuneOptions o;
    o.checkpoint = input;
    o.key_dims = study::parse_key_dim_list(key_dims);
    o.compress = opt;
    o.finetune_updates = finetune;
    o.overrides = given.overrides;
    o.out_dir = out;
    o.metric = metric;
    o.threads = threads;
    o.stop_requested = [] { return interrupted(); };
    return compress_finetune(o);
  }
  CMHA_CHECK(given.overrides.empty(), "key.path=value overrides ('" + given.overrides.front() +
                                          "') change the recipe of the fine-tunes: they go with --finetune");
  CMHA_CHECK(metric.empty(), "--metric names the score of --finetune's table: it goes with --finetune");
  if (threads > 0) omp_set_num_threads(static_cast<int>(threads));
  compress::parse_key_dims(key_dims, opt);
  // OUT's folder is made (as `cmha train` makes train.save_dir) and OUT checked before the CP-ALS,
  // which takes minutes on a large model: a path that cannot be written fails first, not after.
  const std::filesystem::path out_folder = std::filesystem::path(out).parent_path();
  CMHA_CHECK(!std::filesystem::is_directory(out),
             "-o '" + out + "' is a directory: give the compressed checkpoint's file name, e.g. -o " +
                 (std::filesystem::path(out) / "compressed.safetensors").string());
  if (!out_folder.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(out_folder, ec);
    CMHA_CHECK(!ec, "-o '" + out + "': cannot make its folder '" + out_folder.string() + "': " + ec.message());
  }
  const run::Checkpoint in = run::load_checkpoint(input);
  std::printf("%-32s %6s %6s %9s %10s %8s\n", "layer", "D_k", "D~k", "CP-ALS", "rel.error", "seconds");
  const auto began = std::chrono::steady_clock::now();  // wall: layers run side by side
  const run::Checkpoint result = compress::compress_checkpoint(in, input, opt, [&](const compress::LayerReport& l) {
    const std::string how = l.exact ? "exact" : std::to_string(l.iterations) + " it";
    std::printf("%-32s %6lld %6lld %9s %10.3e %8.2f\n", l.prefix.c_str(), static_cast<long long>(l.key_dim),
                static_cast<long long>(l.shared_dim), how.c_str(), l.error, l.seconds);
    std::fflush(stdout);
  });
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  run::save_checkpoint(out, result);
  // Its translations and its fine-tune use the original's SentencePiece pieces.
  const bool spm = run::copy_spm_model_beside(input, std::filesystem::path(out).parent_path().string());
  const std::string recipe_out = run::write_finetune_recipe(out, result.recipe);
  int64_t before = 0, after = 0;
  for (const auto& [n, t] : in.weights) before += t.numel();
  for (const auto& [n, t] : result.weights) after += t.numel();
  std::printf("wrote %s (%lld parameters, was %lld; %.2f s of CP-ALS)%s\nfine-tune with: cmha train %s\n",
              out.c_str(), static_cast<long long>(after), static_cast<long long>(before), total,
              spm ? ", and the spm.model beside it" : "", recipe_out.c_str());
  return 0;
}

}  // namespace cmha::cli
