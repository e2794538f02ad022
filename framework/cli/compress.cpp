// cmha compress CKPT --key-dim D -o OUT: concat attention → collaborative,
// by CP decomposition of the per-head query/key products (compress/).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "cli/command_line.h"
#include "compress/convert_attention.h"
#include "nn/attention/registry.h"
#include "run/finetune_recipe.h"
#include "run/options.h"
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
    "OUT is a normal checkpoint (weights and recipe; no optimiser or EMA state).\n"
    "Beside it, OUT's name with .yaml is the recipe to fine-tune it with\n"
    "('cmha train OUT.yaml': train.init_from is OUT).\n";

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

}  // namespace

int compress_command(const Args& args) {
  std::string input, out, layers;
  long long threads = 0;
  compress::CompressOptions opt;
  CommandLine cl("compress", kCompressDescription);
  cl.app().add_option("checkpoint", input, "the checkpoint with concat attention")->type_name("CKPT");
  cl.app().add_option("--key-dim", opt.shared_dim, "shared query/key width D~k (required)")
      ->check(whole_number(1, 1 << 20))->type_name("D");
  cl.app().add_option("-o,--output", out, "the compressed checkpoint to write (required)")->type_name("OUT");
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
  if (cl.app().count("--layers") > 0) opt.places = split_commas(layers);
  if (threads > 0) omp_set_num_threads(static_cast<int>(threads));
  CMHA_CHECK(!input.empty(), "cmha compress needs a checkpoint (try 'cmha compress --help')");
  CMHA_CHECK(opt.shared_dim > 0, "cmha compress needs --key-dim D");
  CMHA_CHECK(!out.empty(), "cmha compress needs -o OUT");
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
  const std::string recipe_out = run::write_finetune_recipe(out, result.recipe);
  int64_t before = 0, after = 0;
  for (const auto& [n, t] : in.weights) before += t.numel();
  for (const auto& [n, t] : result.weights) after += t.numel();
  std::printf("wrote %s (%lld parameters, was %lld; %.2f s of CP-ALS)\nfine-tune with: cmha train %s\n", out.c_str(),
              static_cast<long long>(after), static_cast<long long>(before), total, recipe_out.c_str());
  return 0;
}

}  // namespace cmha::cli
