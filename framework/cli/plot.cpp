// cmha plot RUN_DIR... [-o OUT.png]: the curves of runs, drawn by
// plot_runs.py with Debian's python3-matplotlib.
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

int plot_command(const Args& args) {
  // Debian's interpreter first: python3-matplotlib installs there, whatever
  // other python3 comes first on PATH.
  const std::string python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::vector<std::string> argv_s{python, CMHA_PLOT_SCRIPT};
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
             "cmha plot needs python3 with matplotlib (apt-get install python3-matplotlib)");
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 2;
}

}  // namespace cmha::cli
