// cmha plot RUN_DIR... [-o OUT.png]: the curves of runs, drawn by
// plot_runs.py with Debian's python3-matplotlib; and the way every cmha
// command runs its plotting script.
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cli/commands.h"
#include "tensor/error.h"

#ifndef CMHA_PLOT_SCRIPT
#define CMHA_PLOT_SCRIPT "plot_runs.py"
#endif

namespace cmha::cli {

int run_plot_script(const std::string& script, const Args& args) {
  // Debian's interpreter first: python3-matplotlib installs there, whatever
  // other python3 comes first on PATH.
  const std::string python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::vector<std::string> argv_s{python, script};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
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

int plot_command(const Args& args) { return run_plot_script(CMHA_PLOT_SCRIPT, args); }

}  // namespace cmha::cli
