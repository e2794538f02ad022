// cmha average: the mean of several checkpoints' weights.
#include <cstdio>

#include "cli/commands.h"
#include "tensor/error.h"
#include "train/average.h"

namespace cmha::cli {

namespace {
const char* kAverageUsage =
    "usage: cmha average CKPT CKPT ... -o OUT\n"
    "       cmha average --last N RUN_DIR [-o OUT]\n"
    "\n"
    "Averages the weights of several checkpoints in f32 (fairseq's\n"
    "average_checkpoints). With --last, the N latest update checkpoints of a run\n"
    "directory; OUT defaults to RUN_DIR/checkpoint_avg_lastN.safetensors.\n";
}  // namespace

int average_command(const Args& args) {
  std::vector<std::string> inputs;
  std::string out, run_dir;
  long long last = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kAverageUsage, stdout);
      return 0;
    }
    if (a == "-o" || a == "--output") out = option_value(args, i, "average");
    else if (a == "--last") last = parse_int(option_value(args, i, "average"), a, 1, 100000);
    else if (!a.empty() && a[0] == '-') throw Error("unknown option '" + a + "' for 'cmha average'");
    else inputs.push_back(a);
  }
  if (last > 0) {
    CMHA_CHECK(inputs.size() == 1, "cmha average --last N takes one run directory");
    run_dir = inputs[0];
    inputs = train::last_checkpoints(run_dir, static_cast<int>(last));
    if (out.empty()) out = run_dir + "/checkpoint_avg_last" + std::to_string(last) + ".safetensors";
  }
  CMHA_CHECK(!inputs.empty(), "cmha average needs checkpoints (try 'cmha average --help')");
  CMHA_CHECK(!out.empty(), "cmha average needs -o OUT");
  train::save_checkpoint(out, train::average_checkpoints(inputs));
  std::printf("averaged %zu checkpoints into %s\n", inputs.size(), out.c_str());
  return 0;
}

}  // namespace cmha::cli
