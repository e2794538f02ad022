// A run killed with SIGKILL at random moments (issue 19): after every kill each
// checkpoint in the directory loads, `--resume` continues, temporaries of the
// killed saves are gone once a later start has claimed the directory, and the
// run finished after N kills ends with the weights of an uninterrupted run,
// byte for byte (the trainer's resume is bit-identical by design).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "run/checkpoint.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "support/tiny_images.h"
#include "support/source_paths.h"

extern char** environ;

using namespace cmha;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

using cmha::test::has;
using cmha::test::words;

// `cmha train` with stdout and stderr into `log`, started without a shell, so the PID is cmha's own.
pid_t spawn_cmha(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv{std::string(CMHA_BINARY_DIR) + "/cmha", "train"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// The watchdog: waits up to `limit` for the child; a hung one is killed and reported as -1.
int wait_for(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Files NAME.tmp.PID (or any *.tmp*) in the run directory and its cache.
std::vector<std::string> temporaries(const std::string& run) {
  std::vector<std::string> out;
  for (const fs::path& d : {fs::path(run), fs::path(run) / "cache"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (has(e.path().filename().string(), ".tmp")) out.push_back(e.path().filename().string());
  }
  return out;
}

std::vector<std::string> checkpoints(const std::string& run) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(run)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("checkpoint_", 0) == 0 && name.size() > 12 && name.substr(name.size() - 12) == ".safetensors")
      out.push_back(e.path().string());
  }
  return out;
}

using cmha::test::same_bytes;

void expect_same_tensors(const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& want,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << what << " " << name;
    EXPECT_TRUE(same_bytes(got.at(name), t)) << what << " " << name << " differs from the uninterrupted run";
  }
}

TEST(KillResume, RandomSigkillsThenResumeEndLikeAnUninterruptedRun) {
  constexpr int kUpdates = 600, kKills = 8;  // enough updates that an idle, fast machine is still mid-run at most kills
  const auto watchdog = std::chrono::milliseconds(30000);  // a hang guard: 600 updates take ~2 s idle, more under load
  const std::string dir = test::temp_dir("kill_resume"), run = dir + "/run", ref = dir + "/ref";
  fs::remove_all(run);
  fs::remove_all(ref);
  test::write_tiny_fashion_mnist(dir, 32, 16);
  auto args_for = [&](const std::string& save_dir) {
    std::vector<std::string> a = words("--threads 1 " + test::tiny_run(dir, save_dir));
    for (const std::string& kv : std::vector<std::string>{"train.max_epochs=0", "train.save_every=1", "train.max_updates=" + std::to_string(kUpdates),
                                  "lr.total=" + std::to_string(kUpdates)})
      a.push_back(kv);
    return a;
  };

  // The uninterrupted run with the same seed.
  const pid_t ref_pid = spawn_cmha(args_for(ref), dir + "/ref.log");
  ASSERT_GT(ref_pid, 0);
  ASSERT_EQ(wait_for(ref_pid, watchdog), 0) << test::read_file(dir + "/ref.log");

  std::mt19937 gen(19);  // fixed seed: the same kill moments every time
  std::set<pid_t> killed;
  int kills = 0, kills_leaving_temporaries = 0;
  for (int round = 0; round < kKills; ++round) {
    std::vector<std::string> args = args_for(run);
    if (round > 0) args.insert(args.begin(), "--resume");
    const std::string log = dir + "/round" + std::to_string(round) + ".log";
    const auto started = Clock::now();
    const pid_t pid = spawn_cmha(args, log);
    ASSERT_GT(pid, 0);
    const auto delay = std::chrono::milliseconds(50 + static_cast<int>(gen() % 351));  // 50–400 ms
    int status = 0;
    bool exited = false;
    while (Clock::now() - started < delay && !(exited = waitpid(pid, &status, WNOHANG) == pid))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (exited) {  // it finished (or failed) before its kill: that must be a clean end
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << test::read_file(log);
      break;
    }
    // A start that got past claiming the directory has removed the temporaries of every earlier kill.
    const std::string text = test::read_file(log);
    if (has(text, "resumed from") || has(text, "| update "))
      for (const std::string& t : temporaries(run))
        for (const pid_t dead : killed) EXPECT_FALSE(has(t, ".tmp." + std::to_string(dead))) << t << " after: " << text;
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    ++kills;
    killed.insert(pid);
    for (const std::string& t : temporaries(run)) kills_leaving_temporaries += has(t, ".tmp." + std::to_string(pid));
    // Every checkpoint the kill left is whole.
    for (const std::string& c : checkpoints(run))
      EXPECT_EQ(test::error_of([&] { run::load_checkpoint(c); }), "(no error)") << c;
  }
  std::printf("%d kills, %d of them left a temporary behind\n", kills, kills_leaving_temporaries);
  EXPECT_GE(kills, kKills / 2) << "the run ended before most kills: raise kUpdates";

  // The last start, not killed: it resumes, removes what the kills left and ends where the uninterrupted run did.
  const std::string log = dir + "/final.log";
  const pid_t pid = spawn_cmha([&] {
    std::vector<std::string> a = args_for(run);
    a.insert(a.begin(), "--resume");
    return a;
  }(), log);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(wait_for(pid, watchdog), 0) << test::read_file(log);
  EXPECT_TRUE(temporaries(run).empty()) << temporaries(run).front();
  const std::string last = "/checkpoint_" + std::to_string(kUpdates) + ".safetensors";
  ASSERT_TRUE(fs::exists(run + last)) << test::read_file(log);
  const run::Checkpoint got = run::load_checkpoint(run + last), want = run::load_checkpoint(ref + last);
  EXPECT_EQ(got.trainer.at("update").get<int64_t>(), kUpdates);
  expect_same_tensors(got.weights, want.weights, "weight");
  expect_same_tensors(got.optimizer, want.optimizer, "optimizer state");
  expect_same_tensors(got.ema, want.ema, "EMA weight");
  EXPECT_EQ(got.trainer.dump(), want.trainer.dump());
  fs::remove_all(dir);
}


// results.json is written through an AtomicFile too (tensor/atomic_file.h): when
// its rename fails (here: a directory in the way) the run stops with one
// sentence naming the file and the OS's reason, leaves no temporary behind and
// deletes nothing. (A writer killed before its rename: tests/unit/atomic_file_test.cpp.)
TEST(KillResume, AFailedResultsWriteNamesTheFileAndLeavesNoTemporary) {
  const std::string dir = test::temp_dir("kill_results_tmp"), run = dir + "/run";
  fs::remove_all(run);
  test::write_tiny_fashion_mnist(dir, 32, 16);
  const std::string tiny = "--threads 1 " + test::tiny_run(dir, run) + " train.max_epochs=0 lr.total=3";
  fs::create_directories(run + "/results.json/in_the_way");
  // --resume: a fresh start would refuse the directory, results.json being in the way.
  const auto failed = test::run_cmha("train --resume " + tiny + " train.max_updates=2");
  ASSERT_EQ(failed.code, 2) << failed.output;
  EXPECT_TRUE(has(failed.output, "cannot write '" + run + "/results.json'")) << failed.output;
  EXPECT_TRUE(has(failed.output, "Is a directory")) << failed.output;
  EXPECT_TRUE(temporaries(run).empty()) << temporaries(run).front();
  EXPECT_TRUE(fs::is_directory(run + "/results.json/in_the_way"));
  EXPECT_TRUE(fs::exists(run + "/checkpoint_2.safetensors"));
  fs::remove_all(dir);
}

}  // namespace
