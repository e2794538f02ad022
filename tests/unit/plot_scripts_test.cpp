// The plotting scripts of framework/cli/ on small samples: each writes its PNG
// (cmha plot's own run is in cli_test). Skipped where python3-matplotlib is
// missing (install.sh installs it).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/check.h"
#include "support/files.h"
#include "support/source_paths.h"

namespace fs = std::filesystem;
using namespace cmha;

namespace {

bool have_matplotlib() { return std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") == 0; }

int run_script(const std::string& script, const std::string& args, const std::string& log) {
  const std::string cmd = "/usr/bin/python3 " + std::string(CMHA_SOURCE_DIR) + "/framework/cli/" + script + " " + args +
                          " > " + log + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string curve(int n) {
  std::string out = "[";
  for (int i = 1; i <= n; ++i) out += (i > 1 ? "," : "") + std::to_string(1.0 - 1.0 / (1.0 + i));
  return out + ",1.0]";
}

}  // namespace

TEST(PlotScripts, HeadsDrawsConcatCollaborativeAndMixedCheckpoints) {
  if (!have_matplotlib()) GTEST_SKIP() << "python3-matplotlib is not installed (install.sh installs it)";
  const std::string dir = test::temp_dir("plot_heads");
  auto layer = [](const std::string& name, const std::string& type, int key_dim) {
    return R"({"layer":")" + name + R"(","type":")" + type + R"(","heads":4,"key_dim":)" + std::to_string(key_dim) +
           R"(,"query":)" + curve(key_dim - 1) + R"(,"key":)" + curve(key_dim - 1) + R"(,"products":)" + curve(31) + "}";
  };
  const std::pair<std::string, std::string> docs[] = {
      {"concat", layer("blocks.0.attn.", "concat", 16) + "," + layer("blocks.1.attn.", "concat", 16)},
      {"collaborative", layer("blocks.0.attn.", "collaborative", 8)},
      {"mixed", layer("encoder.layers.0.self_attn.", "concat", 16) + "," +
                    layer("decoder.layers.0.self_attn.", "collaborative", 8)}};
  for (const auto& [name, layers] : docs) {
    test::write_file(dir + "/" + name + ".json", R"({"checkpoint":"/x/)" + name + R"(.safetensors","layers":[)" + layers + "]}");
    EXPECT_EQ(run_script("plot_heads.py", dir + "/" + name + ".json -o " + dir + "/" + name + ".png", dir + "/log"), 0)
        << test::read_file(dir + "/log");
    EXPECT_GT(fs::file_size(dir + "/" + name + ".png"), 10000u) << name;
  }
  test::write_file(dir + "/empty.json", R"({"checkpoint":"x","layers":[]})");
  EXPECT_NE(run_script("plot_heads.py", dir + "/empty.json -o " + dir + "/empty.png", dir + "/log"), 0);
  EXPECT_NE(test::read_file(dir + "/log").find("no concat or collaborative attention layer"), std::string::npos);
  fs::remove_all(dir);
}

TEST(PlotScripts, SweepDrawsAPercentMetricAgainstAGridKey) {
  if (!have_matplotlib()) GTEST_SKIP() << "python3-matplotlib is not installed (install.sh installs it)";
  const std::string dir = test::temp_dir("plot_sweep");
  test::write_file(dir + "/sweep.csv",
                   "name,model.attention.type,model.attention.key_dim,top1\n"
                   "a,concat,32,87.1\nb,concat,8,80.2\nc,collaborative,32,87.3\nd,collaborative,8,84.9\n");
  EXPECT_EQ(run_script("plot_sweep.py", dir + "/sweep.csv --keys model.attention.type,model.attention.key_dim "
                                        "--x model.attention.key_dim --metric top1 -o " + dir + "/sweep.png",
                       dir + "/log"),
            0)
      << test::read_file(dir + "/log");
  EXPECT_GT(fs::file_size(dir + "/sweep.png"), 10000u);
  // Replicates: the mean with error bars.
  test::write_file(dir + "/seeds.csv",
                   "name,model.attention.key_dim,train.seed,top1\n"
                   "a,32,1,87.1\nb,32,2,86.5\nc,8,1,80.2\nd,8,2,81.0\n");
  EXPECT_EQ(run_script("plot_sweep.py", dir + "/seeds.csv --keys model.attention.key_dim,train.seed "
                                        "--x model.attention.key_dim --metric top1 --replicates train.seed -o " +
                                            dir + "/seeds.png",
                       dir + "/log"),
            0)
      << test::read_file(dir + "/log");
  EXPECT_GT(fs::file_size(dir + "/seeds.png"), 10000u);
  fs::remove_all(dir);
}
