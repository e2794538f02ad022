#include "train/run_results.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "tensor/error.h"

namespace cmha::train {

std::string run_results_path(const std::string& run_dir) { return run_dir + "/results.json"; }

void write_run_results(const std::string& run_dir, const nlohmann::json& results) {
  // NAME.tmp.PID, like every other save: one left by a killed run is removed at the next start (run_dir.h).
  const std::string path = run_results_path(run_dir), tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    CMHA_CHECK(out.good(), "cannot write '" + tmp + "': " + std::strerror(errno));
    out << results.dump(2) << "\n";
    out.flush();
    CMHA_CHECK(out.good(), "writing '" + tmp + "' failed (disk full?)");
  }
  CMHA_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0,
             "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
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

}  // namespace cmha::train
