// cmha plot RUN_DIR... [-o OUT.png]: the curves of runs, drawn by
// plot_runs.py with Debian's python3-matplotlib; and the way every cmha
// command runs its plotting script.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "tensor/error.h"

#ifndef CMHA_PLOT_SCRIPT
#define CMHA_PLOT_SCRIPT "plot_runs.py"
#endif

namespace cmha::cli {

namespace fs = std::filesystem;

int run_plot_script(const std::string& script, const Args& args) {
  // Debian's interpreter first: python3-matplotlib installs there, whatever
  // other python3 comes first on PATH.
  const std::string python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::vector<std::string> argv_s{python, script};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);  // what was printed before stays before the script's output
  const pid_t pid = fork();
  CMHA_CHECK(pid >= 0, "cmha plot: cannot start python3");
  if (pid == 0) {
    execvp(python.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CMHA_CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 127),
             "plotting needs python3 with matplotlib (apt-get install python3-matplotlib)");
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 2;
}

std::string plot_script_path(const std::string& name) {
  const std::string runs = CMHA_PLOT_SCRIPT;  // the scripts sit together in framework/cli/
  const auto slash = runs.rfind('/');
  return (slash == std::string::npos ? "" : runs.substr(0, slash + 1)) + name;
}

int plot_command(const Args& args) {
  std::vector<std::string> runs;
  std::string out = "curves.png";
  CommandLine cl("plot",
                 "Draws the curves of one or more runs (their metrics.jsonl) into one PNG: a grid of\n"
                 "panels (training loss, validation loss, validation BLEU, top-1 accuracy, learning\n"
                 "rate, gradient norm, throughput: those the runs logged), one colour per run.\n"
                 "  cmha plot RUN_DIR... [-o OUT.png]");
  cl.app().add_option("runs", runs, "run directories (train.save_dir), each holding metrics.jsonl")
      ->required()->type_name("RUN_DIR");
  cl.app().add_option("-o,--output", out, "the PNG to write")->capture_default_str()->type_name("OUT.png");
  bool heads = false;
  cl.app().add_flag("--heads", heads,
                    "draw the head telemetry instead: per attention layer, the principal directions holding 90/99 % "
                    "of the query/key energy and the mixing matrix's effective rank, against updates "
                    "(train.head_telemetry)");
  if (!cl.parse(args)) return 0;
  for (const std::string& run : runs) {
    const std::string metrics = (fs::path(run) / "metrics.jsonl").string();
    CMHA_CHECK(fs::is_regular_file(metrics),
               "'" + metrics + "' does not exist (is '" + run + "' a run directory?)");
  }
  const fs::path parent = fs::path(out).parent_path();
  CMHA_CHECK(parent.empty() || fs::is_directory(parent),
             "cannot write '" + out + "': the folder '" + parent.string() + "' does not exist");
  Args script_args = runs;
  script_args.insert(script_args.end(), {"-o", out});
  if (heads) script_args.push_back("--heads");
  return run_plot_script(CMHA_PLOT_SCRIPT, script_args);
}

}  // namespace cmha::cli
