#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "run/run_results.h"
#include "support/check.h"
#include "tensor/error.h"

namespace fs = std::filesystem;
using namespace cmha;

using cmha::test::fresh_dir;

TEST(RunResults, RoundTrip) {
  const std::string dir = fresh_dir("cmha_run_results_roundtrip");
  run::write_run_results(dir, {{"bleu", 21.5}, {"top1", 0.9}});
  const nlohmann::json j = run::read_run_results(dir);
  EXPECT_DOUBLE_EQ(j["bleu"].get<double>(), 21.5);
  EXPECT_DOUBLE_EQ(j["top1"].get<double>(), 0.9);
  EXPECT_FALSE(fs::exists(dir + "/results.json.tmp"));
}

TEST(RunResults, MissingAndCorruptFilesAreNamed) {
  const std::string dir = fresh_dir("cmha_run_results_errors");
  try {
    run::read_run_results(dir);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/results.json' does not exist"), std::string::npos) << e.what();
  }
  std::ofstream(dir + "/results.json") << "{\"bleu\": 2";  // truncated
  try {
    run::read_run_results(dir);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not valid JSON"), std::string::npos) << e.what();
  }
}
