// The cmha command: dispatches to subcommands. Exit codes: 0 success,
// 2 usage or input error (cmha::Error), 1 other failure, 130 interrupted.
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "tensor/error.h"

#ifndef CMHA_VERSION
#define CMHA_VERSION "unknown"
#endif

namespace cmha::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_signal(int sig) {
  g_interrupted = 1;
  std::signal(sig, SIG_DFL);  // a second Ctrl-C stops at once
}

const char* kUsage =
    "usage: cmha <command> [options]\n"
    "\n"
    "Trains transformers with collaborative multi-head attention.\n"
    "\n"
    "commands:\n"
    "  train   train a model from a YAML recipe (without one: the built-in Fashion-MNIST ViT)\n"
    "  bench   time full training steps of a recipe's transformer (one JSON line)\n"
    "  average average the weights of several checkpoints\n"
    "  plot    draw the loss and metric curves of runs to a PNG\n"
    "  translate translate text with a transformer checkpoint (beam search)\n"
    "  score   log-probability of each reference translation under a checkpoint\n"
    "  bleu    corpus BLEU of a hypothesis file against a reference, as sacreBLEU\n"
    "  eval    top-1/top-5 accuracy and loss of an image classifier checkpoint\n"
    "  sweep   run a recipe once per point of a grid of keys and tabulate the results\n"
    "  info    show a checkpoint, or the build and the devices this machine offers\n"
    "\n"
    "options:\n"
    "  -h, --help     show this help (or 'cmha <command> --help' for a command's)\n"
    "  --version      print the version\n"
    "\n"
    "exit codes: 0 success, 2 usage or input error, 1 other failure, 130 interrupted\n";

}  // namespace

bool interrupted() { return g_interrupted != 0; }

std::string option_value(const Args& args, size_t& i, const char* command) {
  if (i + 1 >= args.size())
    throw Error("option '" + args[i] + "' of 'cmha " + command + "' needs a value");
  return args[++i];
}

long long parse_int(const std::string& text, const std::string& option, long long min, long long max) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || used == 0 || v < min || v > max)
    throw Error("option '" + option + "' needs a whole number from " + std::to_string(min) + " to " +
                std::to_string(max) + ", not '" + text + "'");
  return v;
}

}  // namespace cmha::cli

int main(int argc, char** argv) {
  using namespace cmha::cli;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  try {
    const std::string command = argc > 1 ? argv[1] : "";
    if (argc < 2 || command == "--help" || command == "-h" || command == "help") {
      if (command == "help" && argc > 2) {  // "cmha help train" = "cmha train --help"
        const std::string topic = argv[2];
        if (topic == "train") return train_command({"--help"});
        if (topic == "info") return info_command({"--help"});
        if (topic == "bench") return bench_command({"--help"});
        if (topic == "average") return average_command({"--help"});
        if (topic == "plot") return plot_command({"--help"});
        if (topic == "translate") return translate_command({"--help"});
        if (topic == "bleu") return bleu_command({"--help"});
        if (topic == "eval") return eval_command({"--help"});
        if (topic == "sweep") return sweep_command({"--help"});
        if (topic == "score") return score_command({"--help"});
        std::fprintf(stderr, "cmha: unknown command '%s' (try 'cmha --help')\n", topic.c_str());
        return 2;
      }
      std::fputs(kUsage, argc < 2 ? stderr : stdout);
      return argc < 2 ? 2 : 0;
    }
    if (command == "--version") {
      std::printf("cmha %s\n", CMHA_VERSION);
      return 0;
    }
    Args args(argv + 2, argv + argc);
    if (command == "train") return train_command(args);
    if (command == "info") return info_command(args);
    if (command == "bench") return bench_command(args);
    if (command == "average") return average_command(args);
    if (command == "plot") return plot_command(args);
    if (command == "translate") return translate_command(args);
    if (command == "bleu") return bleu_command(args);
    if (command == "eval") return eval_command(args);
    if (command == "sweep") return sweep_command(args);
    if (command == "score") return score_command(args);
    std::fprintf(stderr, "cmha: unknown command '%s' (try 'cmha --help')\n", command.c_str());
    return 2;
  } catch (const Interrupted&) {
    std::fprintf(stderr, "cmha: interrupted\n");
    return 130;
  } catch (const cmha::Error& e) {
    std::fprintf(stderr, "cmha: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cmha: internal error: %s\n", e.what());
    return 1;
  }
}
