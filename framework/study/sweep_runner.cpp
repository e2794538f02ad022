#include "study/sweep_runner.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "run/recipe.h"
#include "run/run_results.h"
#include "tensor/atomic_file.h"
#include "tensor/error.h"

namespace cmha::study {

namespace {

namespace fs = std::filesystem;

// The path of the running cmha, to start the runs with the same build.
std::string self_path() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  CMHA_CHECK(!ec, "cmha sweep cannot find its own executable (/proc/self/exe): " + ec.message());
  return p.string();
}

// Starts argv[0] with argv; its output goes to `log` (appended) when one is
// named, to this terminal otherwise. The child's pid.
pid_t start_process(const std::vector<std::string>& argv_s, const std::string& log) {
  std::vector<char*> argv;
  for (const auto& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // Opened here rather than in the child, so a log that cannot be written is an error naming it.
  int fd = -1;
  if (!log.empty()) {
    fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    CMHA_CHECK(fd >= 0, "cmha sweep cannot write the run log '" + log + "': " + std::strerror(errno));
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0 && fd >= 0) close(fd);
  CMHA_CHECK(pid >= 0, std::string("cmha sweep cannot start a process: ") + std::strerror(errno));
  if (pid == 0) {
    if (fd >= 0) {  // dup2 clears close-on-exec on the copies
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    execvp(argv[0], argv.data());
    _exit(127);
  }
  if (fd >= 0) close(fd);
  return pid;
}

// Waits for one of the runs; its pid and exit code (or 128 + signal). Once
// the sweep is asked to stop, every run still going gets SIGTERM once and
// saves its checkpoint: Ctrl-C reaches the runs through the terminal's
// process group anyway, but a SIGTERM sent to the sweep alone (kill, a batch
// scheduler) would otherwise leave them training. Polled, because the signal
// handlers restart waitpid rather than interrupt it.
std::pair<pid_t, int> wait_any_process(const std::map<pid_t, size_t>& running, const std::function<bool()>& stop,
                                       bool& stop_forwarded) {
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) return {pid, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)};
    CMHA_CHECK(pid == 0 || errno == EINTR, std::string("cmha sweep lost its run processes: ") + std::strerror(errno));
    if (stop() && !stop_forwarded) {
      for (const auto& [run_pid, point] : running) kill(run_pid, SIGTERM);
      stop_forwarded = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

SweepOutcome run_sweep(const SweepOptions& o) {
  const std::vector<GridPoint> points = expand_grid(o.axes);
  // Every point's recipe is checked before the first run starts; and so is every run directory that holds
  // a run: of this point's recipe, or it is refused (or trained afresh).
  std::vector<bool> afresh(points.size(), false);
  for (size_t k = 0; k < points.size(); ++k) {
    std::vector<std::string> all = o.overrides;
    all.insert(all.end(), points[k].overrides.begin(), points[k].overrides.end());
    const run::Recipe recipe = run::Recipe::load(o.recipe_path, all);
    const std::string run_dir = (fs::path(o.out_dir) / points[k].name).string();
    const std::string stale = stale_run_reason(run_dir, recipe);
    if (stale.empty()) continue;
    CMHA_CHECK(o.rerun_changed, "the run directory '" + run_dir + "' holds a run of a different recipe (" + stale +
                                    "): pass --rerun-changed to train it afresh, deleting that run, or sweep into "
                                    "another -o DIR");
    afresh[k] = true;
  }
  fs::create_directories(o.out_dir);
  const std::string self = o.executable.empty() ? self_path() : o.executable;
  long long threads = o.threads;
  // Runs side by side share the cores rather than each taking all of them.
  if (threads == 0 && o.jobs > 1)
    threads = std::max<long long>(1, static_cast<long long>(std::thread::hardware_concurrency()) / o.jobs);
  std::map<pid_t, size_t> running;  // pid -> point
  std::vector<std::string> failed;
  bool run_interrupted = false;  // a run stopped by Ctrl-C (exit 130) stops the sweep
  bool stop_forwarded = false;
  auto reap_one = [&] {
    const auto [pid, code] = wait_any_process(running, o.stop_requested, stop_forwarded);
    const auto it = running.find(pid);
    if (it == running.end()) return;  // not one of the runs
    const std::string& name = points[it->second].name;
    running.erase(it);
    if (code == 130 || o.stop_requested()) {
      run_interrupted = true;
      return;
    }
    if (code != 0) failed.push_back(name + " (exit " + std::to_string(code) + ")");
    if (o.jobs > 1) std::fprintf(stderr, "cmha sweep: %s %s\n", name.c_str(), code == 0 ? "finished" : "failed");
  };
  for (size_t k = 0; k < points.size() && !o.stop_requested() && !run_interrupted; ++k) {
    const auto& p = points[k];
    const std::string run_dir = (fs::path(o.out_dir) / p.name).string();
    if (!afresh[k] && fs::exists(run::run_results_path(run_dir))) {
      std::fprintf(stderr, "cmha sweep: [%zu/%zu] %s has results.json, skipped\n", k + 1, points.size(), p.name.c_str());
      continue;
    }
    while (static_cast<long long>(running.size()) >= o.jobs) reap_one();
    if (o.stop_requested() || run_interrupted) break;
    std::vector<std::string> argv{self, "train", o.recipe_path, afresh[k] ? "--overwrite" : "--resume"};
    if (threads > 0) argv.insert(argv.end(), {"--threads", std::to_string(threads)});
    argv.insert(argv.end(), o.overrides.begin(), o.overrides.end());
    argv.insert(argv.end(), p.overrides.begin(), p.overrides.end());
    argv.push_back("train.save_dir=" + run_dir);
    std::string log;
    if (o.jobs > 1) {
      fs::create_directories(run_dir);
      log = (fs::path(run_dir) / "train.log").string();
    }
    std::fprintf(stderr, "cmha sweep: [%zu/%zu] %s%s%s\n", k + 1, points.size(), p.name.c_str(),
                 afresh[k] ? " (afresh: its directory held a run of a different recipe)" : "",
                 log.empty() ? "" : (" started, messages in " + log).c_str());
    running.emplace(start_process(argv, log), k);
  }
  while (!running.empty()) reap_one();
  SweepOutcome out;
  if (o.stop_requested() || run_interrupted) {
    out.interrupted = true;
    return out;
  }
  if (!failed.empty()) {
    std::string list;
    for (const auto& f : failed) list += (list.empty() ? "" : ", ") + f;
    throw Error("sweep run" + std::string(failed.size() > 1 ? "s " : " ") + list + " failed (" +
                (o.jobs > 1 ? "see their train.log" : "their messages are above") +
                "); run the same cmha sweep again to retry and continue");
  }

  std::vector<SweepRow> rows;
  for (const auto& p : points) rows.push_back({p, run::read_run_results((fs::path(o.out_dir) / p.name).string())});
  out.csv_path = (fs::path(o.out_dir) / "sweep.csv").string();
  out.md_path = (fs::path(o.out_dir) / "sweep.md").string();
  out.table = sweep_markdown(o.axes, rows, o.metric);
  write_file_atomically(out.csv_path, sweep_csv(o.axes, rows, o.metric));
  write_file_atomically(out.md_path, out.table);
  return out;
}

}  // namespace cmha::study
