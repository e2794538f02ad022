// Run directories that cannot be destroyed (issue 19, items 2 and 5): a fresh
// `cmha train` never replaces or mixes with an earlier run, two processes never
// share a directory, a killed holder leaves no stale lock, and temporaries of
// killed saves are cleaned at the next start.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <string>

#include "run/run_dir.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "support/tiny_images.h"
#include "support/source_paths.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;

// One sentence on one line, the way every input error is reported.
void expect_one_sentence(const test::CommandResult& r) {
  EXPECT_EQ(r.output.rfind("cmha: ", 0), 0u) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
}

// A tiny ViT run of `updates` updates (2 batches an epoch) into dir/run.
std::string tiny(const std::string& dir, int updates) {
  return "--threads 1 " + test::tiny_run(dir, dir + "/run") + " train.max_epochs=0 train.max_updates=" +
         std::to_string(updates) + " lr.total=" + std::to_string(updates);
}

std::string fresh_data(const std::string& tag) {
  const std::string dir = test::temp_dir(tag);
  fs::remove_all(dir + "/run");
  test::write_tiny_fashion_mnist(dir, 32, 16);
  return dir;
}

size_t train_rows(const std::string& metrics) {
  size_t n = 0;
  for (const std::string& line : test::read_lines(metrics)) n += has(line, R"("split":"train")");
  return n;
}

// Every file of a run directory (the lock aside): name → bytes.
std::map<std::string, std::string> files_of(const std::string& run) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(run))
    if (e.is_regular_file() && e.path().filename() != ".lock")
      out[e.path().filename().string()] = test::read_file(e.path().string());
  return out;
}

// A PID that ran and has ended (reaped, so kill(pid, 0) reports ESRCH).
pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

TEST(RunDir, FreshTrainIntoARunDirectoryIsRefusedAndTouchesNothing) {
  const std::string dir = fresh_data("rundir_refuse"), run = dir + "/run";
  const auto first = test::run_cmha("train " + tiny(dir, 4));
  ASSERT_EQ(first.code, 0) << first.output;
  const std::map<std::string, std::string> before = files_of(run);
  ASSERT_TRUE(before.count("checkpoint_4.safetensors") && before.count("checkpoint_best.safetensors"));

  const auto again = test::run_cmha("train " + tiny(dir, 2));
  EXPECT_EQ(again.code, 2) << again.output;
  expect_one_sentence(again);
  EXPECT_TRUE(has(again.output, "'" + run + "'")) << again.output;
  EXPECT_TRUE(has(again.output, "--resume")) << again.output;
  EXPECT_TRUE(has(again.output, "--overwrite")) << again.output;
  // The earlier run is exactly as it was: the same files, byte for byte.
  const std::map<std::string, std::string> after = files_of(run);
  EXPECT_EQ(after.size(), before.size());
  for (const auto& [name, bytes] : before) EXPECT_TRUE(after.count(name) && after.at(name) == bytes) << name;
  fs::remove_all(dir);
}

TEST(RunDir, OverwriteDeletesTheEarlierRunAndStartsAfresh) {
  const std::string dir = fresh_data("rundir_overwrite"), run = dir + "/run";
  ASSERT_EQ(test::run_cmha("train " + tiny(dir, 4)).code, 0);
  test::write_file(run + "/notes.txt", "mine");
  const auto r = test::run_cmha("train --overwrite " + tiny(dir, 2));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "--overwrite: removed")) << r.output;
  EXPECT_FALSE(fs::exists(run + "/checkpoint_4.safetensors"));  // no older, longer run to resume by mistake
  EXPECT_TRUE(fs::exists(run + "/checkpoint_2.safetensors"));
  EXPECT_EQ(train_rows(run + "/metrics.jsonl"), 2u);  // the new run's rows only
  EXPECT_EQ(test::read_file(run + "/notes.txt"), "mine");  // not a file of the run: left alone
  fs::remove_all(dir);
}

TEST(RunDir, ResumeAndOverwriteTogetherAreRefused) {
  const auto r = test::run_cmha("train --resume --overwrite train.save_dir=/nonexistent/run");
  EXPECT_EQ(r.code, 2) << r.output;
  expect_one_sentence(r);
  EXPECT_TRUE(has(r.output, "--resume") && has(r.output, "--overwrite")) << r.output;
}

// Without a recipe, --resume continues DIR/recipe.yaml; a directory without one is
// named rather than silently resumed with the built-in recipe.
TEST(RunDir, ResumeWithoutARecipeOfADirectoryWithoutARunIsRefused) {
  const std::string dir = test::temp_dir("rundir_norun");
  const auto r = test::run_cmha("train --resume train.save_dir=" + dir + "/run");
  EXPECT_EQ(r.code, 2) << r.output;
  expect_one_sentence(r);
  EXPECT_TRUE(has(r.output, "holds no run") && has(r.output, dir + "/run/recipe.yaml")) << r.output;
  fs::remove_all(dir);
}

TEST(RunDir, ASecondProcessOnADirectoryInUseIsRefusedWithTheHoldersPid) {
  const std::string dir = fresh_data("rundir_busy"), run = dir + "/run";
  const std::string cmd = std::string(CMHA_BINARY_DIR) + "/cmha train " + tiny(dir, 100000) + " > " + dir + "/log 2>&1";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 600 && !(fs::exists(run + "/metrics.jsonl") && fs::file_size(run + "/metrics.jsonl") > 0); ++i)
    usleep(50000);
  const auto second = test::run_cmha("train --resume " + tiny(dir, 2));
  EXPECT_EQ(second.code, 2) << second.output;
  expect_one_sentence(second);
  EXPECT_TRUE(has(second.output, "'" + run + "'")) << second.output;
  EXPECT_TRUE(has(second.output, "PID " + std::to_string(pid))) << second.output;
  // kill -9 leaves no stale lock: the kernel drops it with the process.
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  const auto after = test::run_cmha("train --resume " + tiny(dir, 2));
  EXPECT_EQ(after.code, 0) << after.output;
  fs::remove_all(dir);
}

TEST(RunDir, TheLockOfAKilledHolderIsFree) {
  const std::string dir = test::temp_dir("rundir_lock") + "/run";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    run::RunDirLock lock(dir);
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  const std::string refused = test::error_of([&] { run::RunDirLock second(dir); });
  EXPECT_TRUE(has(refused, "PID " + std::to_string(pid))) << refused;
  EXPECT_TRUE(has(refused, dir)) << refused;
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(test::error_of([&] { run::RunDirLock third(dir); }), "(no error)");
  close(ready[0]);
  close(ready[1]);
  fs::remove_all(fs::path(dir).parent_path());
}

TEST(RunDir, StaleTemporariesOfDeadProcessesAreRemovedAtStart) {
  const std::string dir = fresh_data("rundir_stale"), run = dir + "/run";
  ASSERT_EQ(test::run_cmha("train " + tiny(dir, 2)).code, 0);
  const pid_t dead = dead_pid();
  const std::string stale = run + "/checkpoint_3.safetensors.tmp." + std::to_string(dead);
  const std::string stale_cache = run + "/cache/train.src.tmp." + std::to_string(dead);
  const std::string live = run + "/checkpoint_3.safetensors.tmp." + std::to_string(getpid());  // this test is alive
  fs::create_directories(run + "/cache");
  test::write_file(stale, std::string(1000, 'x'));
  test::write_file(stale_cache, "x");
  test::write_file(live, "x");
  const auto r = test::run_cmha("train --resume " + tiny(dir, 3));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "removed 2 stale temporaries")) << r.output;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale_cache));
  EXPECT_TRUE(fs::exists(live));  // never a live process's file
  fs::remove_all(dir);
}

TEST(RunDir, ResumeWithoutARecipeContinuesTheRunsOwnRecipe) {
  const std::string dir = fresh_data("rundir_own_recipe"), run = dir + "/run";
  ASSERT_EQ(test::run_cmha("train " + tiny(dir, 2)).code, 0);
  const auto r = test::run_cmha("train --resume --threads 1 train.save_dir=" + run + " train.max_updates=3");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "resumed from " + run + "/checkpoint_2.safetensors at update 2")) << r.output;
  EXPECT_TRUE(fs::exists(run + "/checkpoint_3.safetensors"));
  fs::remove_all(dir);
}

}  // namespace
