// cmha train: until recipes land, the built-in demo (see demo_train.cpp).
#include <cstdio>

#include "cli/commands.h"
#include "tensor/error.h"

namespace cmha::cli {
namespace {

const char* kTrainUsage =
    "usage: cmha train [options]\n"
    "\n"
    "Trains a model. YAML recipes (cmha train recipe.yaml) are not supported\n"
    "yet; without one, cmha trains the built-in demo: an MLP 784-256-10 on\n"
    "Fashion-MNIST with AdamW, printing the loss and the test accuracy.\n"
    "\n"
    "options:\n"
    "  --data-dir DIR  folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]\n"
    "                  (default /usr/share/datasets/fashion-mnist, from the Debian\n"
    "                  package dataset-fashion-mnist)\n"
    "  --epochs N      passes over the training set (default 2)\n"
    "  --threads N     CPU threads (default: OMP_NUM_THREADS or every core)\n"
    "  --seed N        seed of the initialisation and the shuffling (default 0)\n"
    "  -h, --help      show this help\n";

}  // namespace

int train_command(const Args& args) {
  DemoOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kTrainUsage, stdout);
      return 0;
    } else if (a == "--data-dir") {
      o.data_dir = option_value(args, i, "train");
    } else if (a == "--epochs") {
      o.epochs = static_cast<int>(parse_int(option_value(args, i, "train"), a, 1, 1000));
    } else if (a == "--threads") {
      o.threads = static_cast<int>(parse_int(option_value(args, i, "train"), a, 1, 4096));
    } else if (a == "--seed") {
      o.seed = static_cast<unsigned long long>(parse_int(option_value(args, i, "train"), a, 0, 1LL << 62));
    } else if (!a.empty() && a[0] == '-') {
      throw Error("unknown option '" + a + "' for 'cmha train' (try 'cmha train --help')");
    } else {
      throw Error("YAML recipes are not supported yet, so '" + a +
                  "' was not run (run 'cmha train' without a recipe for the built-in Fashion-MNIST demo)");
    }
  }
  return run_demo(o);
}

}  // namespace cmha::cli
