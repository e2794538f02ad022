// Issue 20, point 1: `cmha translate` streams (each line translated and
// flushed as soon as it arrives), decodes by default as the checkpoint's run
// translated its test split (so it reproduces test.de.hyp byte for byte),
// prints n-best lists with scores, and checks --device as train.device.
#include <gtest/gtest.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "distributed/communicator.h"
#include "eval/translator.h"
#include "run/device.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "support/toy_translation.h"
#include "train/trainer.h"
#include "train/translation_task.h"
#include "support/source_paths.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;

// `cmha <args>` through the shell with standard output and standard error
// kept apart (run_cmha joins them); the exit code.
int run_split(const std::string& args, const std::string& out, const std::string& err) {
  const std::string cmd = std::string(CMHA_BINARY_DIR) + "/cmha " + args + " > " + out + " 2> " + err;
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The lines of `text` that start with `prefix`.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  return out;
}

// One toy run for every test here: trained 120 updates with eval.* settings
// unlike cmha translate's former built-in ones, then its final evaluation
// (average of the last 2 checkpoints, test.de.hyp). eval.max_source_tokens
// is small enough that some test lines are cut.
class TranslateStream : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    dir_ = test::toy_dir("translate_stream");
    test::write_toy_corpus(dir_ + "/test", 60, 4);
    const run::Recipe r = test::toy_recipe(
        dir_, {"data.test_prefix=" + dir_ + "/test", "train.max_updates=120", "train.save_every=20", "eval.average_last=2", "eval.beam=3",
               "eval.lenpen=1.3", "eval.max_len_a=0.7", "eval.max_len_b=6", "eval.max_tokens=150",
               "eval.max_source_tokens=14"});
    Generator g(3);
    train::TranslationTask task(r, g);
    distributed::SingleCommunicator comm;
    train::Trainer(r, task, comm).run();
    task.final_evaluation(dir_ + "/run");
    omp_set_num_threads(threads);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string ckpt() { return dir_ + "/run/checkpoint_average.safetensors"; }
  static std::string dir_;
};
std::string TranslateStream::dir_;

}  // namespace

TEST_F(TranslateStream, WithNoOptionsReproducesTheRunsTestHypothesesByteForByte) {
  const std::string hyp = test::read_file(dir_ + "/run/test.de.hyp");
  ASSERT_EQ(test::read_lines(dir_ + "/run/test.de.hyp").size(), 60u);
  ASSERT_EQ(run_split("translate " + ckpt() + " < " + dir_ + "/test.en", dir_ + "/out.txt", dir_ + "/err.txt"), 0)
      << test::read_file(dir_ + "/err.txt");
  EXPECT_EQ(test::read_file(dir_ + "/out.txt"), hyp);
  const std::string err = test::read_file(dir_ + "/err.txt");
  EXPECT_TRUE(has(err, "beam 3, lenpen 1.3")) << err;
  const std::vector<std::string> cuts = lines_starting(err, "translate: standard input line ");
  EXPECT_FALSE(cuts.empty()) << err;  // the recipe's eval.max_source_tokens applied

  // The settings matter: cmha translate's former built-in ones give other translations.
  ASSERT_EQ(run_split("translate " + ckpt() + " --beam 4 --lenpen 0.6 --max-len-a 1 --max-len-b 50 "
                      "--max-source-tokens 160 < " + dir_ + "/test.en", dir_ + "/old.txt", dir_ + "/e"),
            0);
  EXPECT_NE(test::read_file(dir_ + "/old.txt"), hyp);

  // Read in parts of 7 lines: the same bytes, and the cut lines numbered in the whole input.
  ASSERT_EQ(run_split("translate " + ckpt() + " --buffer-size 7 < " + dir_ + "/test.en", dir_ + "/out7.txt",
                      dir_ + "/err7.txt"),
            0)
      << test::read_file(dir_ + "/err7.txt");
  EXPECT_EQ(test::read_file(dir_ + "/out7.txt"), hyp);
  EXPECT_EQ(lines_starting(test::read_file(dir_ + "/err7.txt"), "translate: standard input line "), cuts);

  // A file translated into itself.
  fs::copy_file(dir_ + "/test.en", dir_ + "/in_place.txt", fs::copy_options::overwrite_existing);
  const std::string file = dir_ + "/in_place.txt";
  ASSERT_EQ(run_split("translate " + ckpt() + " --input " + file + " --output " + file, dir_ + "/o", dir_ + "/e"), 0)
      << test::read_file(dir_ + "/e");
  EXPECT_EQ(test::read_file(file), hyp);
}

// `cmha translate --device cuda` on the emulated CUDA device (the decoder's
// caches, beam search and greedy search on the device's memory, the CPU's
// kernels): the CPU's hypotheses byte for byte.
TEST_F(TranslateStream, OnTheEmulatedGpuGivesTheCpusHypotheses) {
  const std::string hyp = test::read_file(dir_ + "/run/test.de.hyp");
  setenv("CMHA_EMULATE_CUDA", "async", 1);
  const int beam = run_split("translate " + ckpt() + " --device cuda < " + dir_ + "/test.en", dir_ + "/gpu.txt",
                             dir_ + "/gpu_err.txt");
  const int greedy = run_split("translate " + ckpt() + " --device cuda --beam 1 < " + dir_ + "/test.en",
                               dir_ + "/gpu1.txt", dir_ + "/gpu1_err.txt");
  unsetenv("CMHA_EMULATE_CUDA");
  ASSERT_EQ(beam, 0) << test::read_file(dir_ + "/gpu_err.txt");
  EXPECT_EQ(test::read_file(dir_ + "/gpu.txt"), hyp);
  ASSERT_EQ(greedy, 0) << test::read_file(dir_ + "/gpu1_err.txt");
  ASSERT_EQ(run_split("translate " + ckpt() + " --beam 1 < " + dir_ + "/test.en", dir_ + "/cpu1.txt", dir_ + "/e"), 0);
  EXPECT_EQ(test::read_file(dir_ + "/gpu1.txt"), test::read_file(dir_ + "/cpu1.txt"));
}

TEST_F(TranslateStream, TranslatesEachLineBeforeTheNextArrives) {
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  const std::string binary = std::string(CMHA_BINARY_DIR) + "/cmha", err = dir_ + "/stream_err.txt";
  const std::string checkpoint = ckpt();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(to_child[0], STDIN_FILENO);
    ::dup2(from_child[1], STDOUT_FILENO);
    if (FILE* e = std::freopen(err.c_str(), "w", stderr)) (void)e;
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
    ::execl(binary.c_str(), binary.c_str(), "translate", checkpoint.c_str(), "--threads", "1",
            static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  // One line of the child's standard output, or "(timeout)" after 60 s (the test fails, it does not hang).
  std::string pending;
  auto read_line = [&]() -> std::string {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      const size_t nl = pending.find('\n');
      if (nl != std::string::npos) {
        std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return "(timeout)";
      pollfd p{from_child[0], POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(from_child[0], buf, sizeof buf);
      if (n <= 0) return "(end of output)";
      pending.append(buf, static_cast<size_t>(n));
    }
  };
  auto write_line = [&](const std::string& line) {
    const std::string s = line + "\n";
    ASSERT_EQ(::write(to_child[1], s.data(), s.size()), static_cast<ssize_t>(s.size()));
  };
  const std::vector<std::string> inputs = {"the big dog sees a house", "a small cat"};
  std::vector<std::string> outputs;
  for (const std::string& line : inputs) {
    write_line(line);  // the second only once the first one's translation is back
    outputs.push_back(read_line());
    if (outputs.back() == "(timeout)") break;
  }
  ::close(to_child[1]);
  const std::string after = read_line();
  int status = 0;
  pid_t ended = 0;
  for (int i = 0; i < 600 && (ended = ::waitpid(pid, &status, WNOHANG)) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (ended == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ADD_FAILURE() << "cmha translate did not end after its input did";
  }
  ::close(from_child[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << test::read_file(err);
  EXPECT_EQ(after, "(end of output)");
  eval::Translator t(ckpt(), eval::DecodingOverrides{});
  EXPECT_EQ(outputs, t.translate(inputs)) << test::read_file(err);
  EXPECT_TRUE(has(test::read_file(err), "cmha translate: 2 sentences")) << test::read_file(err);
}

TEST_F(TranslateStream, NbestListsAndScoresInTheMosesFormat) {
  const std::vector<std::string> src = test::read_lines(dir_ + "/test.en");
  test::write_file(dir_ + "/five.en", src[0] + "\n" + src[1] + "\n" + src[2] + "\n" + src[3] + "\n" + src[4] + "\n");
  ASSERT_EQ(run_split("translate " + ckpt() + " --nbest 3 < " + dir_ + "/five.en", dir_ + "/nbest.txt", dir_ + "/e"), 0)
      << test::read_file(dir_ + "/e");
  eval::DecodingOverrides three;
  three.nbest = 3;
  eval::Translator t(ckpt(), three);
  const std::vector<std::vector<eval::Translation>> expected =
      t.translate_part({src.begin(), src.begin() + 5}, 0, "five.en");
  std::vector<std::string> lines = test::read_lines(dir_ + "/nbest.txt");
  ASSERT_EQ(lines.size(), 15u);
  const std::vector<std::string> hyp = test::read_lines(dir_ + "/run/test.de.hyp");
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t id = i / 3, rank = i % 3;
    ASSERT_EQ(expected[id].size(), 3u);
    const eval::Translation& e = expected[id][rank];
    char score[64];
    std::snprintf(score, sizeof score, "%.6f", e.score);
    EXPECT_EQ(lines[i], std::to_string(id) + " ||| " + e.text + " ||| " + score);
    if (rank > 0) EXPECT_LE(e.score, expected[id][rank - 1].score);
    if (rank == 0) EXPECT_EQ(e.text, hyp[id]);  // the n-best list starts with the 1-best
  }
  // --print-scores alone: one line per input line.
  ASSERT_EQ(run_split("translate " + ckpt() + " --print-scores --input " + dir_ + "/five.en", dir_ + "/scores.txt",
                      dir_ + "/e"),
            0)
      << test::read_file(dir_ + "/e");
  lines = test::read_lines(dir_ + "/scores.txt");
  ASSERT_EQ(lines.size(), 5u);
  for (size_t id = 0; id < 5; ++id) EXPECT_EQ(lines[id].rfind(std::to_string(id) + " ||| " + hyp[id] + " ||| -", 0), 0u) << lines[id];
  // More than the beam (the recipe's eval.beam is 3).
  const test::CommandResult r = test::run_cmha("translate " + ckpt() + " --nbest 4 < /dev/null");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output,
            "cmha: translate: an n-best list of 4 (--nbest) needs a beam of at least that, but the beam is 3 "
            "(--beam, eval.beam)\n");
  EXPECT_EQ(test::run_cmha("translate " + ckpt() + " --nbest 4 --beam 4 < /dev/null").code, 0);
}

TEST_F(TranslateStream, DeviceIsCheckedAsTrainDeviceAndOptionsByRange) {
  const std::string train_device =
      test::error_of([] { run::recipe_device(test::toy_recipe(dir_, {"train.device=cuda"})); });
  ASSERT_EQ(train_device.rfind("train.device=cuda: ", 0), 0u) << train_device;
  test::CommandResult r = test::run_cmha("translate " + ckpt() + " --device cuda < /dev/null");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output, "cmha: --device cuda" + train_device.substr(std::string("train.device=cuda").size()) + "\n");
  r = test::run_cmha("translate " + ckpt() + " --device tpu < /dev/null");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "cmha: --device tpu: unknown device 'tpu'")) << r.output;
  EXPECT_EQ(test::run_cmha("translate " + ckpt() + " --device cpu < /dev/null").code, 0);
  for (const std::string& bad : {"--buffer-size 0", "--nbest 0", "--max-tokens 0", "--lenpen 1e9"}) {
    r = test::run_cmha("translate " + ckpt() + " " + bad + " < /dev/null");
    EXPECT_EQ(r.code, 2) << bad << ": " << r.output;
    EXPECT_TRUE(has(r.output, bad.substr(0, bad.find(' ')))) << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
  }
  r = test::run_cmha("translate --help");
  EXPECT_EQ(r.code, 0);
  for (const char* part : {"(default: the checkpoint's", "eval.beam)", "ID ||| hypothesis ||| score", "--device",
                           "--buffer-size", "--print-scores"})
    EXPECT_TRUE(has(r.output, part)) << part << "\n" << r.output;
}
