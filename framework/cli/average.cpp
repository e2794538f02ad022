// cmha average: the mean of several checkpoints' weights.
#include <cstdio>

#include "cli/command_line.h"
#include "run/average.h"
#include "run/run_dir.h"
#include "tensor/error.h"

namespace cmha::cli {

int average_command(const Args& args) {
  std::vector<std::string> inputs;
  std::string out;
  long long last = 0;
  CommandLine cl("average",
                 "Averages the weights of several checkpoints in f32 (fairseq's average_checkpoints).\n"
                 "  cmha average CKPT CKPT ... -o OUT\n"
                 "  cmha average --last N RUN_DIR [-o OUT]");
  cl.app().add_option("checkpoints", inputs, "checkpoints to average, or with --last one run directory")
      ->type_name("CKPT|RUN_DIR");
  cl.app().add_option("-o,--output", out, "the averaged checkpoint (with --last: RUN_DIR/checkpoint_avg_lastN.safetensors)")
      ->type_name("OUT");
  cl.app().add_option("--last", last, "average the N latest update checkpoints of RUN_DIR")
      ->check(whole_number(1, 100000))->type_name("N");
  if (!cl.parse(args)) return 0;
  if (last > 0) {
    CMHA_CHECK(inputs.size() == 1, "cmha average --last N takes one run directory");
    const std::string run_dir = inputs[0];
    inputs = run::last_checkpoints(run_dir, static_cast<int>(last));
    if (out.empty()) out = run_dir + "/checkpoint_avg_last" + std::to_string(last) + ".safetensors";
  }
  CMHA_CHECK(!inputs.empty(), "cmha average needs checkpoints (try 'cmha average --help')");
  CMHA_CHECK(!out.empty(), "cmha average needs -o OUT");
  run::save_checkpoint(out, run::average_checkpoints(inputs));
  std::printf("averaged %zu checkpoints into %s\n", inputs.size(), out.c_str());
  return 0;
}

}  // namespace cmha::cli
