// cmha compress CKPT --key-dim D -o OUT: concat attention → collaborative,
// by CP decomposition of the per-head query/key products (compress/).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "compress/convert_attention.h"
#include "nn/attention/registry.h"
#include "tensor/error.h"
#include "train/finetune_recipe.h"
#include "train/options.h"

namespace cmha::cli {

namespace {

const char* kCompressUsageHead =
    "usage: cmha compress CKPT --key-dim D -o OUT [--layers PLACES] [--iters N] [--tol X]\n"
    "                     [--init random|svd] [--seed S] [--threads T]\n"
    "\n"
    "Turns every concat attention layer of a checkpoint into a collaborative one\n"
    "of shared key width D (Cordonnier et al. 2020, section 3.3), without\n"
    "retraining: the per-head products W_Q^(i) W_K^(i)^T get a rank-D CP\n"
    "decomposition; the query biases become the content bias, the key biases are\n"
    "dropped (the softmax ignores them), values, output and score scale are kept.\n"
    "D >= the layer's key width writes the exact factorisation (same function).\n"
    "OUT is a normal checkpoint (weights and recipe; no optimiser or EMA state).\n"
    "Beside it, OUT's name with .yaml is the recipe to fine-tune it with\n"
    "('cmha train OUT.yaml': train.init_from is OUT).\n"
    "\n"
    "options:\n"
    "  --key-dim D       shared query/key width D~k (required)\n"
    "  -o, --output OUT  the compressed checkpoint to write (required)\n";
const char* kCompressUsageTail =
    "  --iters N         CP-ALS iterations at most (default 100)\n"
    "  --tol X           stop when the relative error changes by less than X of itself (default 1e-6)\n"
    "  --init random|svd CP-ALS start: N(0, 1) (default) or the leading singular vectors\n"
    "                    of the unfoldings (Jacobi eigensolver: slow beyond D of a few hundred)\n"
    "  --seed S          seed of the random start (default 0)\n"
    "  --threads T       CPU threads (default: all cores)\n"
    "  -h, --help        show this help\n";

// The usage, with the attention places of each model kind (nn/attention/registry.h).
std::string compress_usage() {
  std::string places;
  std::vector<std::string> kinds;
  for (const nn::AttentionPlace& p : nn::attention_places())
    if (std::find(kinds.begin(), kinds.end(), p.model_kind) == kinds.end()) kinds.push_back(p.model_kind);
  for (const std::string& kind : kinds) {
    std::string names;
    for (const nn::AttentionPlace& p : nn::attention_places(kind))
      names += (names.empty() ? "" : ", ") + p.short_name;
    places += (places.empty() ? "" : ";\n                    ") + names + " (" + kind + ")";
  }
  return std::string(kCompressUsageHead) + "  --layers PLACES   comma-separated attention places: " + places +
         ";\n                    default: every concat place\n" + kCompressUsageTail;
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
  std::string input, out;
  compress::CompressOptions opt;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(compress_usage().c_str(), stdout);
      return 0;
    }
    if (a == "-o" || a == "--output") out = option_value(args, i, "compress");
    else if (a == "--key-dim") opt.shared_dim = parse_int(option_value(args, i, "compress"), a, 1, 1 << 20);
    else if (a == "--layers") opt.places = split_commas(option_value(args, i, "compress"));
    else if (a == "--iters") opt.als.max_iters = parse_int(option_value(args, i, "compress"), a, 1, 1000000);
    else if (a == "--tol") opt.als.tol = parse_real(option_value(args, i, "compress"), a, 0, train::kUnbounded);
    else if (a == "--init") opt.als.init = option_value(args, i, "compress");
    else if (a == "--seed") opt.als.seed = static_cast<uint64_t>(parse_int(option_value(args, i, "compress"), a, 0, 1LL << 62));
    else if (a == "--threads") omp_set_num_threads(static_cast<int>(parse_int(option_value(args, i, "compress"), a, 1, 4096)));
    else if (!a.empty() && a[0] == '-') throw Error("unknown option '" + a + "' for 'cmha compress' (try 'cmha compress --help')");
    else if (input.empty()) input = a;
    else throw Error("cmha compress takes one checkpoint, got '" + input + "' and '" + a + "'");
  }
  CMHA_CHECK(!input.empty(), "cmha compress needs a checkpoint (try 'cmha compress --help')");
  CMHA_CHECK(opt.shared_dim > 0, "cmha compress needs --key-dim D");
  CMHA_CHECK(!out.empty(), "cmha compress needs -o OUT");
  CMHA_CHECK(opt.als.init == "svd" || opt.als.init == "random",
             "option '--init' is 'svd' or 'random', not '" + opt.als.init + "'");
  const train::Checkpoint in = train::load_checkpoint(input);
  std::printf("%-32s %6s %6s %9s %10s %8s\n", "layer", "D_k", "D~k", "CP-ALS", "rel.error", "seconds");
  double total = 0;
  const train::Checkpoint result = compress::compress_checkpoint(in, input, opt, [&](const compress::LayerReport& l) {
    const std::string how = l.exact ? "exact" : std::to_string(l.iterations) + " it";
    std::printf("%-32s %6lld %6lld %9s %10.3e %8.2f\n", l.prefix.c_str(), static_cast<long long>(l.key_dim),
                static_cast<long long>(l.shared_dim), how.c_str(), l.error, l.seconds);
    std::fflush(stdout);
    total += l.seconds;
  });
  train::save_checkpoint(out, result);
  const std::string recipe_out = train::write_finetune_recipe(out, result.recipe);
  int64_t before = 0, after = 0;
  for (const auto& [n, t] : in.weights) before += t.numel();
  for (const auto& [n, t] : result.weights) after += t.numel();
  std::printf("wrote %s (%lld parameters, was %lld; %.2f s of CP-ALS)\nfine-tune with: cmha train %s\n", out.c_str(),
              static_cast<long long>(after), static_cast<long long>(before), total, recipe_out.c_str());
  return 0;
}

}  // namespace cmha::cli
