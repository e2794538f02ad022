// cmha sweep RECIPE --grid KEY=V1,V2 [--grid ...] --metric NAME -o DIR [--x KEY] [--threads T] [--jobs N]
//            [--rerun-changed] [key.path=value ...]
// Trains the recipe once per grid point, each run in DIR/<point name>/ as a
// separate `cmha train --resume` process (up to --jobs at once), then tabulates the runs'
// results.json (DIR/sweep.csv, DIR/sweep.md) and plots the metric against
// one numeric axis (DIR/sweep.png, through plot_sweep.py and matplotlib).
// Runs that already have results.json are skipped, so a sweep resumes; a run
// directory holding a run of another recipe is refused (or, with
// --rerun-changed, trained afresh with `cmha train --overwrite`).
#include <fcntl.h>
#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

#include <map>
#include <thread>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cli/command_line.h"
#include "tensor/error.h"
#include "train/recipe.h"
#include "train/run_results.h"
#include "train/sweep.h"

namespace cmha::cli {
namespace {

namespace fs = std::filesystem;

const char* kSweepDescription =
    "Trains RECIPE once per combination of the grid values, each run in\n"
    "DIR/<name>/ (train.save_dir), e.g. DIR/type-concat_key_dim-64. Each run's\n"
    "final evaluation (results.json) is gathered into DIR/sweep.csv and\n"
    "DIR/sweep.md, and NAME is plotted against the x axis in DIR/sweep.png, one\n"
    "line per combination of the other axes. Runs that already have results.json\n"
    "are skipped, and an unfinished run resumes from its latest checkpoint, so\n"
    "running the same command again continues an interrupted sweep. A run\n"
    "directory that holds a run of another recipe (its recipe.yaml differs from\n"
    "the point's, e.g. after the recipe file changed) is refused, naming the first\n"
    "differing key, unless --rerun-changed trains it afresh.\n"
    "With --seeds N each point is trained N times, with train.seed = the\n"
    "recipe's seed, +1, ..., +N-1 (DIR/<name>_seed-S): sweep.csv keeps every run,\n"
    "sweep.md shows each point's mean ± standard deviation and n, and the plot\n"
    "draws the mean with error bars (one standard deviation) over faint markers\n"
    "for the seeds. --grid train.seed=... is read the same way.\n";

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
std::pair<pid_t, int> wait_any_process(const std::map<pid_t, size_t>& running, bool& stop_forwarded) {
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) return {pid, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)};
    CMHA_CHECK(pid == 0 || errno == EINTR, std::string("cmha sweep lost its run processes: ") + std::strerror(errno));
    if (interrupted() && !stop_forwarded) {
      for (const auto& [run_pid, point] : running) kill(run_pid, SIGTERM);
      stop_forwarded = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool is_number(const std::string& s) {
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  CMHA_CHECK(out.good(), "cannot write '" + path.string() + "'");
}

}  // namespace

int sweep_command(const Args& args) {
  std::vector<std::string> positionals, grids;
  std::string metric, out_dir, x_key;
  long long threads = 0, jobs = 1, seeds = -1;
  bool rerun_changed = false;
  CommandLine cl("sweep", kSweepDescription);
  cl.app().add_option("recipe", positionals, "the recipe file, and key.path=value overrides applied to every run")
      ->type_name("RECIPE [key.path=value ...]");
  cl.app().add_option("--grid", grids, "a recipe key and its values (repeatable)")
      ->type_name("KEY=V1,V2,...")->allow_extra_args(false);
  cl.app().add_option("--metric", metric, "the results.json key to compare (top1, bleu, ...)")->type_name("NAME");
  cl.app().add_option("-o,--output", out_dir, "the sweep directory")->type_name("DIR");
  cl.app().add_option("--x", x_key, "the grid key on the plot's x axis (default: the last numeric one)")->type_name("KEY");
  cl.app().add_option("--threads", threads, "CPU threads of each run (default: the cores / N)")
      ->check(whole_number(1, 4096))->type_name("T");
  cl.app().add_option("--jobs", jobs,
                      "runs trained at the same time; with more than one, each run writes its messages to "
                      "DIR/<name>/train.log instead of the terminal")
      ->check(whole_number(1, 4096))->type_name("N")->capture_default_str();
  cl.app().add_option("--seeds", seeds,
                      "train each grid point N times with different train.seed values (replicates)")
      ->check(whole_number(1, 1000))->type_name("N");
  cl.app().add_flag("--rerun-changed", rerun_changed,
                    "train afresh (deleting its checkpoints and results) each run whose directory holds a run of "
                    "a different recipe, instead of refusing");
  if (!cl.parse(args)) return 0;
  const FileAndOverrides given = split_overrides(positionals, "sweep", "recipe");
  const std::string& recipe_path = given.file;
  const std::vector<std::string>& overrides = given.overrides;
  for (const std::string& o : overrides)
    CMHA_CHECK(o.rfind("train.save_dir=", 0) != 0,
               "cmha sweep sets train.save_dir of each run itself (DIR/<name>); drop '" + o + "'");
  std::vector<train::GridAxis> axes;
  for (const std::string& g : grids) axes.push_back(train::parse_grid_axis(g));
  CMHA_CHECK(!recipe_path.empty(), "cmha sweep needs a recipe (try 'cmha sweep --help')");
  CMHA_CHECK(!axes.empty(), "cmha sweep needs at least one --grid KEY=V1,V2,...");
  CMHA_CHECK(!metric.empty(), "cmha sweep needs --metric NAME (a key of the runs' results.json: top1, bleu, ...)");
  CMHA_CHECK(!out_dir.empty(), "cmha sweep needs -o DIR for the runs and the tables");
  if (seeds != -1) {
    CMHA_CHECK(train::seed_axis_index(axes) < 0,
               "--seeds and --grid train.seed=... both set the replicates: give one of them");
    axes.push_back(train::seed_axis(seeds, train::Recipe::load(recipe_path, overrides).integer(train::kSeedKey)));
  }
  const std::vector<train::GridPoint> points = train::expand_grid(axes);

  // The x axis: given, or the last axis whose values are all numbers (not the seeds).
  for (auto it = axes.rbegin(); x_key.empty() && it != axes.rend(); ++it) {
    if (it->key == train::kSeedKey) continue;
    bool numeric = true;
    for (const auto& v : it->values) numeric = numeric && is_number(v);
    if (numeric) x_key = it->key;
  }
  bool x_known = x_key.empty();
  for (const auto& a : axes) x_known = x_known || a.key == x_key;
  CMHA_CHECK(x_known, "--x " + x_key + " is not one of the --grid keys");
  CMHA_CHECK(x_key != train::kSeedKey, "--x train.seed: the seeds are replicates, not an axis to plot against");

  // Every point's recipe is checked before the first run starts, so a bad value fails in seconds, not hours;
  // and so is every run directory that holds a run: of this point's recipe, or it is refused (or trained afresh).
  std::vector<bool> afresh(points.size(), false);
  for (size_t k = 0; k < points.size(); ++k) {
    std::vector<std::string> all = overrides;
    all.insert(all.end(), points[k].overrides.begin(), points[k].overrides.end());
    const train::Recipe recipe = train::Recipe::load(recipe_path, all);
    const std::string run_dir = (fs::path(out_dir) / points[k].name).string();
    const std::string stale = train::stale_run_reason(run_dir, recipe);
    if (stale.empty()) continue;
    CMHA_CHECK(rerun_changed, "the run directory '" + run_dir + "' holds a run of a different recipe (" + stale +
                                  "): pass --rerun-changed to train it afresh, deleting that run, or sweep into "
                                  "another -o DIR");
    afresh[k] = true;
  }
  fs::create_directories(out_dir);
  const std::string self = self_path();
  // Runs side by side share the cores rather than each taking all of them.
  if (threads == 0 && jobs > 1)
    threads = std::max<long long>(1, static_cast<long long>(std::thread::hardware_concurrency()) / jobs);
  std::map<pid_t, size_t> running;  // pid -> point
  std::vector<std::string> failed;
  bool run_interrupted = false;  // a run stopped by Ctrl-C (exit 130) stops the sweep
  bool stop_forwarded = false;
  auto reap_one = [&] {
    const auto [pid, code] = wait_any_process(running, stop_forwarded);
    const auto it = running.find(pid);
    if (it == running.end()) return;  // not one of the runs
    const std::string& name = points[it->second].name;
    running.erase(it);
    if (code == 130 || interrupted()) {
      run_interrupted = true;
      return;
    }
    if (code != 0) failed.push_back(name + " (exit " + std::to_string(code) + ")");
    if (jobs > 1)
      std::fprintf(stderr, "cmha sweep: %s %s\n", name.c_str(), code == 0 ? "finished" : "failed");
  };
  for (size_t k = 0; k < points.size() && !interrupted() && !run_interrupted; ++k) {
    const auto& p = points[k];
    const std::string run_dir = (fs::path(out_dir) / p.name).string();
    if (!afresh[k] && fs::exists(train::run_results_path(run_dir))) {
      std::fprintf(stderr, "cmha sweep: [%zu/%zu] %s has results.json, skipped\n", k + 1, points.size(), p.name.c_str());
      continue;
    }
    while (static_cast<long long>(running.size()) >= jobs) reap_one();
    if (interrupted() || run_interrupted) break;
    std::vector<std::string> argv{self, "train", recipe_path, afresh[k] ? "--overwrite" : "--resume"};
    if (threads > 0) argv.insert(argv.end(), {"--threads", std::to_string(threads)});
    argv.insert(argv.end(), overrides.begin(), overrides.end());
    argv.insert(argv.end(), p.overrides.begin(), p.overrides.end());
    argv.push_back("train.save_dir=" + run_dir);
    std::string log;
    if (jobs > 1) {
      fs::create_directories(run_dir);
      log = (fs::path(run_dir) / "train.log").string();
    }
    std::fprintf(stderr, "cmha sweep: [%zu/%zu] %s%s%s\n", k + 1, points.size(), p.name.c_str(),
                 afresh[k] ? " (afresh: its directory held a run of a different recipe)" : "",
                 log.empty() ? "" : (" started, messages in " + log).c_str());
    running.emplace(start_process(argv, log), k);
  }
  while (!running.empty()) reap_one();
  if (interrupted() || run_interrupted) throw Interrupted{};
  if (!failed.empty()) {
    std::string list;
    for (const auto& f : failed) list += (list.empty() ? "" : ", ") + f;
    throw Error("sweep run" + std::string(failed.size() > 1 ? "s " : " ") + list + " failed (" +
                (jobs > 1 ? "see their train.log" : "their messages are above") +
                "); run the same cmha sweep again to retry and continue");
  }

  std::vector<train::SweepRow> rows;
  for (const auto& p : points)
    rows.push_back({p, train::read_run_results((fs::path(out_dir) / p.name).string())});
  const fs::path csv = fs::path(out_dir) / "sweep.csv", md = fs::path(out_dir) / "sweep.md";
  write_file(csv, train::sweep_csv(axes, rows, metric));
  const std::string table = train::sweep_markdown(axes, rows, metric);
  write_file(md, table);
  std::fputs(table.c_str(), stdout);
  std::fprintf(stderr, "cmha sweep: wrote %s and %s\n", csv.c_str(), md.c_str());

  if (x_key.empty()) {
    std::fprintf(stderr, "cmha sweep: no grid key has only numeric values, so no plot (choose one with --x)\n");
    return 0;
  }
  std::string keys;
  for (const auto& a : axes) keys += (keys.empty() ? "" : ",") + a.key;
  const fs::path png = fs::path(out_dir) / "sweep.png";
  // The tables are written: a missing matplotlib costs only the picture.
  int code = 2;
  std::vector<std::string> plot_args{csv.string(), "--keys", keys, "--x", x_key, "--metric", metric, "-o", png.string()};
  if (train::seed_axis_index(axes) >= 0) plot_args.insert(plot_args.end(), {"--replicates", train::kSeedKey});
  try {
    code = run_plot_script(plot_script_path("plot_sweep.py"), plot_args);
  } catch (const Error&) {
  }
  if (code != 0)
    std::fprintf(stderr, "cmha sweep: %s not drawn (plot_sweep.py failed; needs python3-matplotlib)\n", png.c_str());
  return 0;
}

}  // namespace cmha::cli
