// The cmha command as a user runs it: help, exit codes, clear errors, and the
// built-in training demo on a tiny synthetic Fashion-MNIST.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "data/idx.h"
#include "support/check.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

struct Result {
  int code = -1;
  std::string output;  // stdout and stderr together
};

// Runs "cmha <args>" through the shell (args are quoted by the caller).
Result cmha_run(const std::string& args) {
  const std::string cmd = std::string(CMHA_BINARY_DIR) + "/cmha " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A Fashion-MNIST look-alike: class c images are bright in band c, so even
// one epoch of a few steps learns something.
void write_tiny_fashion_mnist(const std::string& dir, int64_t train, int64_t test) {
  for (auto [split, n] : {std::pair<std::string, int64_t>{"train", train}, {"t10k", test}}) {
    std::vector<uint8_t> pixels(static_cast<size_t>(n * 28 * 28)), labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      labels[i] = static_cast<uint8_t>(i % 10);
      for (int64_t r = 0; r < 28; ++r)
        for (int64_t c = 0; c < 28; ++c)
          pixels[(i * 28 + r) * 28 + c] = static_cast<uint8_t>(r / 3 == labels[i] ? 200 + (i + c) % 50 : (i * c) % 40);
    }
    data::write_idx_u8(dir + "/" + split + "-images-idx3-ubyte.gz", {n, 28, 28}, pixels, true);
    data::write_idx_u8(dir + "/" + split + "-labels-idx1-ubyte.gz", {n}, labels, true);
  }
}

}  // namespace

TEST(Cli, HelpAndVersionExitZero) {
  Result r = cmha_run("--help");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "usage: cmha")) << r.output;
  EXPECT_TRUE(has(r.output, "train")) << r.output;
  r = cmha_run("train --help");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "--data-dir")) << r.output;
  r = cmha_run("info --help");
  EXPECT_EQ(r.code, 0) << r.output;
  r = cmha_run("--version");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "cmha ")) << r.output;
}

TEST(Cli, NoCommandOrUnknownCommandExitsTwo) {
  Result r = cmha_run("");
  EXPECT_EQ(r.code, 2) << r.output;
  r = cmha_run("frobnicate");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "unknown command 'frobnicate'")) << r.output;
  r = cmha_run("train --bogus");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "'--bogus'")) << r.output;
  r = cmha_run("train --epochs zero");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "--epochs")) << r.output;
}

TEST(Cli, InfoDevicesShowsThreadsOneDnnAndCuda) {
  Result r = cmha_run("info --devices");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "cpu: ")) << r.output;
  EXPECT_TRUE(has(r.output, "oneDNN: ")) << r.output;
  EXPECT_TRUE(has(r.output, "cuda: ")) << r.output;
}

TEST(Cli, TrainWithARecipeSaysRecipesAreNotSupportedYet) {
  Result r = cmha_run("train recipes/local/anything.yaml");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "not supported yet")) << r.output;
  EXPECT_TRUE(has(r.output, "recipes/local/anything.yaml")) << r.output;
  EXPECT_FALSE(has(r.output, "epoch")) << "the demo must not run: " << r.output;
}

TEST(Cli, TrainWithoutDataIsOneSentenceNamingThePath) {
  Result r = cmha_run("train --data-dir /nonexistent/fashion");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "'/nonexistent/fashion'")) << r.output;
  EXPECT_TRUE(has(r.output, "dataset-fashion-mnist")) << r.output;
  // One sentence on one line, and nothing else.
  EXPECT_EQ(r.output.rfind("cmha: ", 0), 0u) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
}

TEST(Cli, DemoTrainsOnATinySyntheticDataSet) {
  const std::string dir = test::temp_dir("cli_demo");
  write_tiny_fashion_mnist(dir, 256, 64);
  Result r = cmha_run("train --data-dir '" + dir + "' --epochs 1 --threads 2 --seed 3");
  fs::remove_all(dir);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "256 training and 64 test images")) << r.output;
  EXPECT_TRUE(has(r.output, "epoch 1  step    2/2  loss ")) << r.output;
  EXPECT_TRUE(has(r.output, "test accuracy")) << r.output;
}

TEST(Cli, DemoRejectsALabelFileThatDoesNotMatchItsImages) {
  const std::string dir = test::temp_dir("cli_mismatch");
  write_tiny_fashion_mnist(dir, 20, 10);
  data::write_idx_u8(dir + "/t10k-labels-idx1-ubyte.gz", {9}, std::vector<uint8_t>(9, 1), true);
  Result r = cmha_run("train --data-dir '" + dir + "'");
  fs::remove_all(dir);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "t10k-images-idx3-ubyte.gz")) << r.output;
  EXPECT_TRUE(has(r.output, "t10k-labels-idx1-ubyte.gz")) << r.output;
}
