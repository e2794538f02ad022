#pragma once
// The cmha subcommands. Each takes the arguments after its name and returns
// the exit code; a user mistake is a cmha::Error (exit 2), Ctrl-C an
// Interrupted (exit 130).
#include <string>
#include <vector>

namespace cmha::cli {

using Args = std::vector<std::string>;

int train_command(const Args& args);  // train.cpp
int info_command(const Args& args);   // info.cpp
int bench_command(const Args& args);  // bench.cpp
int average_command(const Args& args);  // average.cpp
int plot_command(const Args& args);     // plot.cpp
int translate_command(const Args& args);  // translate.cpp
int bleu_command(const Args& args);       // bleu.cpp
int eval_command(const Args& args);       // eval.cpp
int sweep_command(const Args& args);      // sweep.cpp
int score_command(const Args& args);      // score.cpp
int compress_command(const Args& args);   // compress.cpp
int heads_command(const Args& args);      // heads.cpp
int import_command(const Args& args);     // import.cpp
int export_command(const Args& args);     // export.cpp
int dist_check_command(const Args& args); // dist_check.cpp
int pack_command(const Args& args);       // pack.cpp

// The recipe `cmha train` runs when given none (recipes/local/en_de_transformer_small.yaml,
// compiled in).
const char* default_recipe_text();
const char* default_recipe_name();

// Thrown where a long-running command notices Ctrl-C.
struct Interrupted {};
// True once SIGINT or SIGTERM arrived (set by main's handler). Until a
// command first calls it, a signal ends the process at once (exit 130): no
// one would notice the flag, e.g. while an open() blocks.
bool interrupted();

// Runs a plotting script of framework/cli/ (plot_script_path("x.py")) with
// python3 + matplotlib; 0 when it succeeded, 2 otherwise (plot.cpp).
int run_plot_script(const std::string& script, const Args& args);
std::string plot_script_path(const std::string& name);

}  // namespace cmha::cli
