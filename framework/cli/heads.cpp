// cmha heads CKPT: the paper's Figure 1 for a checkpoint — how many principal
// components hold 90 % / 95 % of the energy of each layer's W_Q, W_K and of
// the stacked per-head products W_Q^(i) W_K^(i)^T; a table, and the cumulative
// curves drawn by plot_heads.py.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/command_line.h"
#include "compress/head_energy.h"
#include "tensor/error.h"

namespace cmha::cli {

namespace {

const char* kHeadsDescription =
    "For every concat or collaborative attention layer of a checkpoint: the\n"
    "energy (sum of squared singular values) captured by the leading principal\n"
    "components of the concatenated query projection W_Q, of W_K, and of the\n"
    "per-head products W_Q^(i) W_K^(i)^T stacked across heads (Cordonnier et al.\n"
    "2020, Figure 1). Prints the dimensions holding 90 % and 95 % of each, and\n"
    "draws the cumulative curves (python3 + matplotlib).\n";

}  // namespace

int heads_command(const Args& args) {
  std::string input, png = "heads.png", json_path;
  bool no_plot = false;
  CommandLine cl("heads", kHeadsDescription);
  cl.app().add_option("checkpoint", input, "the checkpoint")->type_name("CKPT");
  cl.app().add_option("-o,--output", png, "the plot to write")->type_name("OUT.png")->capture_default_str();
  cl.app().add_option("--json", json_path, "also write the curves as JSON")->type_name("OUT.json");
  cl.app().add_flag("--no-plot", no_plot, "print the table only");
  if (!cl.parse(args)) return 0;
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
  if (!json_path.empty()) {
    std::ofstream(json_path) << doc.dump() << '\n';
    CMHA_CHECK(std::filesystem::is_regular_file(json_path), "cannot write '" + json_path + "'");
  }
  if (!plot) return 0;
  // The plotting script reads the curves from a file beside the PNG.
  const std::string tmp = json_path.empty() ? png + ".json" : json_path;
  if (json_path.empty()) std::ofstream(tmp) << doc.dump() << '\n';
  const int rc = run_plot_script(plot_script_path("plot_heads.py"), {tmp, "-o", png});
  if (json_path.empty()) std::filesystem::remove(tmp);
  if (rc == 0) std::printf("wrote %s\n", png.c_str());
  return rc;
}

}  // namespace cmha::cli
