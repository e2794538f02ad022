#include "run/run_results.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "tensor/error.h"
#include "tensor/atomic_file.h"

namespace cmha::run {

std::string run_results_path(const std::string& run_dir) { return run_dir + "/results.json"; }

void write_run_results(const std::string& run_dir, const nlohmann::json& results) {
  write_file_atomically(run_results_path(run_dir), results.dump(2) + "\n");
}

nlohmann::json read_run_results(const std::string& run_dir) {
  const std::string path = run_results_path(run_dir);
  std::ifstream in(path);
  CMHA_CHECK(in.good(), "'" + path + "' does not exist: the run has not finished its final evaluation");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error("'" + path + "' is not valid JSON: " + e.what());
  }
  CMHA_CHECK(j.is_object(), "'" + path + "' does not hold a JSON object");
  return j;
}

}  // namespace cmha::run
