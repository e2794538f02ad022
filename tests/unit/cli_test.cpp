// The cmha command as a user runs it: help, exit codes, clear errors, and the
// training on a tiny synthetic Fashion-MNIST.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "data/idx.h"
#include "run/checkpoint.h"
#include "run/run_dir.h"
#include "support/check.h"
#include "support/text.h"
#include "support/tiny_images.h"
#include "tensor/safetensors.h"
#include "train/trainer.h"
#include "support/source_paths.h"

using namespace cmha;
using cmha::run::latest_checkpoint;
using cmha::run::load_checkpoint;
namespace fs = std::filesystem;

namespace {

using Result = test::CommandResult;
using test::run_cmha;
using test::tiny_run;
using test::write_tiny_fashion_mnist;

using cmha::test::has;

}  // namespace

TEST(Cli, HelpAndVersionExitZero) {
  Result r = run_cmha("--help");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "usage: cmha")) << r.output;
  EXPECT_TRUE(has(r.output, "train")) << r.output;
  r = run_cmha("train --help");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "--resume")) << r.output;
  EXPECT_TRUE(has(r.output, "model.attention.type")) << r.output;  // every recipe key with its help
  for (const char* command : {"info", "bench", "average"}) {
    r = run_cmha(std::string(command) + " --help");
    EXPECT_EQ(r.code, 0) << command << ": " << r.output;
  }
  r = run_cmha("info --help");
  EXPECT_EQ(r.code, 0) << r.output;
  r = run_cmha("--version");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "cmha ")) << r.output;
}

TEST(Cli, NoCommandOrUnknownCommandExitsTwo) {
  Result r = run_cmha("");
  EXPECT_EQ(r.code, 2) << r.output;
  r = run_cmha("frobnicate");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "unknown command 'frobnicate'")) << r.output;
  r = run_cmha("train --bogus");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "'--bogus'")) << r.output;
  r = run_cmha("train --epochs zero");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "--epochs")) << r.output;
}

TEST(Cli, InfoDevicesShowsThreadsOneDnnAndCuda) {
  Result r = run_cmha("info --devices");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "cpu: ")) << r.output;
  EXPECT_TRUE(has(r.output, "oneDNN: ")) << r.output;
  EXPECT_TRUE(has(r.output, "cuda: ")) << r.output;
}

TEST(Cli, DistCheckAloneChecksTheCollectives) {
  const auto r = test::run_cmha("dist-check --max-mb 1 --iterations 2");
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char* part : {"1 rank, backend single", "rank", "device", "4 KiB", "1 MiB", "all-reduce ok, broadcast ok",
                           "every check holds"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " in:\n" << r.output;
  EXPECT_EQ(test::run_cmha("dist-check --backend nccl").code, 2);
  EXPECT_EQ(test::run_cmha("dist-check --max-mb 0").code, 2);
}

TEST(Cli, TrainWithAMissingRecipeFileExitsTwoNamingIt) {
  Result r = run_cmha("train /nonexistent/recipe.yaml");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "recipe file '/nonexistent/recipe.yaml' does not exist")) << r.output;
}

TEST(Cli, TrainWithAMistypedKeyNamesTheNearestKey) {
  Result r = run_cmha("train model.d_modle=3");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "did you mean 'model.d_model'")) << r.output;
}

TEST(Cli, DumpConfigPrintsTheResolvedDefaultRecipe) {
  Result r = run_cmha("train --dump-config model.encoder_layers=2");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "encoder_layers: 2")) << r.output;
  EXPECT_TRUE(has(r.output, "type: collaborative")) << r.output;
  EXPECT_TRUE(has(r.output, "schedule: cosine")) << r.output;
}

TEST(Cli, TrainWithoutDataIsOneSentenceNamingThePath) {
  Result r = run_cmha("train " + std::string(CMHA_SOURCE_DIR) +
                      "/recipes/local/fashion_mnist_vit.yaml data.train_images=/nonexistent/fashion/train-images-idx3-ubyte.gz");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "/nonexistent/fashion/train-images-idx3-ubyte.gz")) << r.output;
  // One sentence on one line, and nothing else.
  EXPECT_EQ(r.output.rfind("cmha: ", 0), 0u) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
}

TEST(Cli, TrainsAVitOnATinySyntheticDataSetAndInfoReadsTheCheckpoint) {
  const std::string dir = test::temp_dir("cli_train");
  write_tiny_fashion_mnist(dir, 64, 32);
  Result r = run_cmha("train --threads 2 " + tiny_run(dir, dir + "/run") + " train.max_epochs=2");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "valid | epoch 2 | update 8")) << r.output;
  EXPECT_TRUE(has(r.output, "| top1 ")) << r.output;
  // Off a terminal: no bar, only whole lines, and the closing summary.
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\033["), std::string::npos) << r.output;
  EXPECT_TRUE(has(r.output, "epoch 2 | update 8/8 | loss ")) << r.output;
  EXPECT_TRUE(has(r.output, "cmha train: 8 updates in ")) << r.output;
  EXPECT_TRUE(has(r.output, "| 2 epochs | ")) << r.output;
  EXPECT_TRUE(has(r.output, " samples/s | best top1 ")) << r.output;
  EXPECT_TRUE(fs::exists(dir + "/run/checkpoint_8.safetensors"));
  EXPECT_TRUE(fs::exists(dir + "/run/checkpoint_best.safetensors"));
  EXPECT_TRUE(fs::exists(dir + "/run/metrics.jsonl"));
  Result info = run_cmha("info " + dir + "/run/checkpoint_8.safetensors");
  EXPECT_EQ(info.code, 0) << info.output;
  EXPECT_TRUE(has(info.output, "attention: collaborative, 2 heads, key_dim 8")) << info.output;
  EXPECT_TRUE(has(info.output, "trainer: update 8")) << info.output;
  Result avg = run_cmha("average --last 2 " + dir + "/run");
  EXPECT_EQ(avg.code, 0) << avg.output;
  EXPECT_TRUE(fs::exists(dir + "/run/checkpoint_avg_last2.safetensors"));
  fs::remove_all(dir);
}

TEST(Cli, TrainRejectsALabelFileThatDoesNotMatchItsImages) {
  const std::string dir = test::temp_dir("cli_mismatch");
  write_tiny_fashion_mnist(dir, 20, 10);
  data::write_idx_u8(dir + "/t10k-labels-idx1-ubyte.gz", {9}, std::vector<uint8_t>(9, 1), true);
  Result r = run_cmha("train " + tiny_run(dir, dir + "/run"));
  fs::remove_all(dir);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "t10k-images-idx3-ubyte.gz")) << r.output;
  EXPECT_TRUE(has(r.output, "t10k-labels-idx1-ubyte.gz")) << r.output;
}

TEST(Cli, ResumeContinuesBitIdentically) {
  // 6 updates in one go == 3 updates, stop, resume, 3 more: every weight equal bit for bit.
  const std::string dir = test::temp_dir("cli_resume");
  write_tiny_fashion_mnist(dir, 96, 16);
  auto args = [&](const std::string& run) {
    return "--threads 2 " + tiny_run(dir, dir + run) + " lr.total=6 model.drop_path=0.3 train.max_epochs=0";
  };
  Result full = run_cmha("train " + args("/full") + " train.max_updates=6");
  ASSERT_EQ(full.code, 0) << full.output;
  Result first = run_cmha("train " + args("/split") + " train.max_updates=3");
  ASSERT_EQ(first.code, 0) << first.output;
  Result second = run_cmha("train --resume " + args("/split") + " train.max_updates=6");
  ASSERT_EQ(second.code, 0) << second.output;
  EXPECT_TRUE(has(second.output, "resumed from")) << second.output;
  auto a = load_safetensors(dir + "/full/checkpoint_6.safetensors");
  auto b = load_safetensors(dir + "/split/checkpoint_6.safetensors");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (auto& [name, t] : a.tensors) EXPECT_TRUE(test::all_close(b.tensors.at(name), t, 0, 0)) << name;
  fs::remove_all(dir);
}

TEST(Cli, InterruptFinishesTheStepWritesACheckpointAndExits130) {
  const std::string dir = test::temp_dir("cli_sigint");
  write_tiny_fashion_mnist(dir, 64, 16);
  const std::string run = dir + "/run";
  const std::string cmd = std::string(CMHA_BINARY_DIR) + "/cmha train --threads 1 " + tiny_run(dir, run) +
                          " train.max_updates=100000 train.max_epochs=0 lr.total=100000 > " + dir + "/log 2>&1";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until training is under way (a metrics row exists), then Ctrl-C.
  for (int i = 0; i < 600 && !(fs::exists(run + "/metrics.jsonl") && fs::file_size(run + "/metrics.jsonl") > 0); ++i)
    usleep(50000);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  const std::string ckpt = latest_checkpoint(run);
  ASSERT_FALSE(ckpt.empty());
  EXPECT_NO_THROW(load_checkpoint(ckpt));
  fs::remove_all(dir);
}

TEST(Cli, PlotDrawsThePngOfARun) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") != 0)
    GTEST_SKIP() << "python3-matplotlib is not installed (install.sh installs it)";
  const std::string dir = test::temp_dir("cli_plot");
  fs::create_directories(dir + "/mt");
  fs::create_directories(dir + "/vit");
  fs::create_directories(dir + "/old");
  std::ofstream(dir + "/mt/metrics.jsonl")
      << R"({"split":"train","update":10,"epoch":1,"loss":7.5,"top1":5.0,"lr":5e-4,"gnorm":1.2,"tokens_per_s":2500})" "\n"
      << R"({"split":"train","update":20,"epoch":1,"loss":6.5,"top1":9.0,"lr":4e-4,"gnorm":0.8,"tokens_per_s":2600})" "\n"
      << R"({"split":"valid","update":20,"epoch":1,"loss":6.4,"nll_loss":6.1,"top1":10.0,"bleu":1.5})" "\n";
  std::ofstream(dir + "/vit/metrics.jsonl")
      << R"({"split":"train","update":10,"epoch":1,"loss":2.0,"top1":30.0,"lr":1e-3,"gnorm":2.0,"samples_per_s":200})" "\n"
      << R"({"split":"valid","update":10,"epoch":1,"loss":1.5,"top1":45.0,"top5":90.0})" "\n";
  // A run directory from before the metrics were renamed.
  std::ofstream(dir + "/old/metrics.jsonl") << R"({"split":"train","update":1,"loss":2.0,"units_per_s":100})" "\n"
                                            << R"({"split":"valid","update":1,"loss":1.5,"accuracy":40.0})" "\n";
  Result r = run_cmha("plot " + dir + "/mt -o " + dir + "/mt.png");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_GT(fs::file_size(dir + "/mt.png"), 1000u);
  EXPECT_TRUE(has(r.output, "panels: training loss, validation loss, validation BLEU, validation top-1 accuracy, learning rate, "
                            "gradient norm, training throughput")) << r.output;
  r = run_cmha("plot " + dir + "/vit " + dir + "/old -o " + dir + "/vit.png");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_GT(fs::file_size(dir + "/vit.png"), 1000u);
  EXPECT_TRUE(has(r.output, "validation top-1 accuracy, validation top-5 accuracy")) << r.output;  // the old run's "accuracy" read as top1
  EXPECT_FALSE(has(r.output, "BLEU")) << r.output;                  // no run has BLEU: no BLEU panel
  Result missing = run_cmha("plot " + dir + "/nothing");
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_TRUE(has(missing.output, "metrics.jsonl' does not exist")) << missing.output;
  Result no_folder = run_cmha("plot " + dir + "/mt -o " + dir + "/no/such/folder.png");
  EXPECT_EQ(no_folder.code, 2) << no_folder.output;
  EXPECT_TRUE(has(no_folder.output, "the folder '" + dir + "/no/such' does not exist")) << no_folder.output;
  Result none = run_cmha("plot");
  EXPECT_EQ(none.code, 2) << none.output;
  Result help = run_cmha("plot --help");
  EXPECT_EQ(help.code, 0) << help.output;
  EXPECT_TRUE(has(help.output, "--output") && has(help.output, "curves.png")) << help.output;
  fs::remove_all(dir);
}

TEST(Cli, BenchAndAverageArgumentErrorsAreOneSentence) {
  struct Case {
    const char* args;
    const char* says;
  } cases[] = {
      {"bench", "needs a recipe file"},
      {"bench a.yaml b.yaml", "takes one recipe"},
      {"bench --frobnicate", "unknown option '--frobnicate'"},
      {"bench recipes/x.yaml --steps 0", "option '--steps' needs a whole number"},
      {"bench /nonexistent.yaml", "recipe file '/nonexistent.yaml' does not exist"},
      {"average", "needs checkpoints"},
      {"average a.safetensors", "needs -o OUT"},
      {"average --last 2 /nonexistent/run", "run directory '/nonexistent/run' does not exist"},
      {"average /nonexistent/a.safetensors -o /tmp/x.safetensors", "cannot open safetensors file"},
      {"info /nonexistent/c.safetensors", "cannot open safetensors file"},
  };
  for (const auto& c : cases) {
    Result r = run_cmha(c.args);
    EXPECT_EQ(r.code, 2) << c.args << ": " << r.output;
    EXPECT_TRUE(has(r.output, c.says)) << c.args << ": " << r.output;
  }
}
