// The cmha command: dispatches to subcommands. Exit codes: 0 success,
// 2 usage or input error (cmha::Error), 1 other failure, 130 interrupted.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <string>

#include "cli/commands.h"
#include "tensor/error.h"

#ifndef CMHA_VERSION
#define CMHA_VERSION "unknown"
#endif

namespace cmha::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
// Set by the first interrupted() call: from then on the command looks at the
// flag and stops cleanly (training saves a checkpoint). Before it, nothing
// would look (loading, reading standard input, an open() blocked on a FIFO),
// so the signal would be swallowed: the process ends at once instead.
volatile std::sig_atomic_t g_watched = 0;

extern "C" void on_signal(int sig) {
  if (!g_watched) {
    static const char kMessage[] = "cmha: interrupted\n";
    const ssize_t written = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);  // async-signal-safe
    (void)written;
    _exit(130);
  }
  g_interrupted = 1;
  std::signal(sig, SIG_DFL);  // a second Ctrl-C stops at once
}

// Every subcommand once: its name, its entry point, its arguments in brief and
// its line in the usage. README.md's command list is this list (a test
// checks that each command is there once).
struct Command {
  const char* name;
  int (*run)(const Args&);
  const char* synopsis;
  const char* summary;
};
const Command kCommands[] = {
    {"train", train_command, "[RECIPE] [key=value ...]",
     "train a model from a YAML recipe (without one: the built-in local EN-DE translation)"},
    {"eval", eval_command, "CKPT [CKPT_B] [--ema] [--data DIR]",
     "top-1 (bootstrap 95 % interval)/top-5 and loss of an image classifier; two: McNemar's exact test"},
    {"translate", translate_command, "CKPT [--nbest N]",
     "translate text with a transformer checkpoint (beam search), line by line"},
    {"score", score_command, "CKPT --src F --tgt G", "log-probability of each reference translation under a checkpoint"},
    {"bleu", bleu_command, "REF... [-i HYP...]",
     "BLEU, chrF and TER as sacreBLEU 2.6.0; --confidence, --paired-bs, --paired-ar"},
    {"average", average_command, "CKPT... -o OUT", "average the weights of several checkpoints (or --last N RUN_DIR)"},
    {"compress", compress_command, "CKPT --key-dim D [--finetune U] -o OUT",
     "turn concat attention into collaborative by CP decomposition; --finetune: per D~k, score, fine-tune, score"},
    {"import", import_command, "FORMAT FILE -o OUT",
     "read a timm, Hugging Face ViT/DeiT or fairseq state dict into a checkpoint"},
    {"export", export_command, "FORMAT CKPT -o OUT",
     "write a checkpoint's weights in timm, Hugging Face or fairseq names (or --weights)"},
    {"heads", heads_command, "CKPT [-o OUT.png]",
     "energy of the principal components of each layer's query/key projections (PNG)"},
    {"sweep", sweep_command, "RECIPE --grid K=V1,V2 [--seeds N] --metric M -o DIR",
     "run a recipe once (or N seeds) per point of a grid of keys and tabulate the results"},
    {"info", info_command, "[CKPT] [--tensors] [--json]",
     "show a checkpoint, or the build and the devices this machine offers"},
    {"bench", bench_command, "RECIPE", "time full training steps of a recipe's transformer (one JSON line)"},
    {"dist-check", dist_check_command, "[--max-mb MB]",
     "check a data-parallel launch: where each rank runs, collectives' values and bandwidth"},
    {"pack", pack_command, "SRC OUT [--max-side PX]",
     "write an ImageFolder split (ImageNet's train/ or val/) as tar shards for data.format=shards"},
    {"plot", plot_command, "RUN_DIR... -o OUT.png", "draw the loss and metric curves of runs to a PNG"},
};

const Command* find_command(const std::string& name) {
  for (const Command& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

std::string usage() {
  std::string u =
      "usage: cmha <command> [options]\n"
      "\n"
      "Trains transformers with collaborative multi-head attention.\n"
      "\n"
      "commands:\n";
  // "  cmha NAME SYNOPSIS" with the summary beside it, or under it when that does not fit.
  for (const Command& c : kCommands) {
    const std::string call = std::string("cmha ") + c.name + " " + c.synopsis;
    if (call.size() <= 38) {
      char line[512];
      std::snprintf(line, sizeof line, "  %-38s  %s\n", call.c_str(), c.summary);
      u += line;
    } else {
      u += "  " + call + "\n" + std::string(42, ' ') + c.summary + "\n";
    }
  }
  u +=
      "\n"
      "options:\n"
      "  -h, --help     show this help (or 'cmha <command> --help' for a command's)\n"
      "  --version      print the version\n"
      "\n"
      "exit codes: 0 success, 2 usage or input error, 1 other failure, 130 interrupted\n";
  return u;
}

// "cannot create directories 'a/b': Not a directory" from libstdc++'s
// "filesystem error: cannot create directories: Not a directory [a/b]".
std::string filesystem_sentence(const std::filesystem::filesystem_error& e) {
  std::string what = e.what();
  const std::string prefix = "filesystem error: ";
  if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
  std::string action = what.substr(0, what.find(':'));
  std::string paths;
  for (const auto* p : {&e.path1(), &e.path2()})
    if (!p->empty()) paths += (paths.empty() ? " '" : " and '") + p->string() + "'";
  return action + paths + ": " + e.code().message();
}

}  // namespace

bool interrupted() {
  g_watched = 1;
  return g_interrupted != 0;
}

// The hand-written parsing helpers of the commands not yet on cli/command_line.h
// (bleu, translate, plot); remove them with their last use.
}  // namespace cmha::cli

namespace {

// libgomp reads its wait policy once, when it loads, before main. Its
// default spins ~300 000 times before a thread sleeps: when another process
// holds the other core, a spinning worker burns its time slice and a
// parallel region can take milliseconds instead of microseconds (a 2-core
// machine under load: 1.8 to 6.4 ms per region, against 0.9 ms with 10 000
// spins; tests/bench/omp_wait_policy.sh). So the compute commands re-execute
// themselves once with GOMP_SPINCOUNT=10000 unless the user chose a policy
// (OMP_WAIT_POLICY or GOMP_SPINCOUNT set; CMHA_NO_REEXEC=1 turns this off).
void choose_omp_wait_policy(int argc, char** argv) {
  if (argc < 2) return;
  const std::string command = argv[1];
  if (command != "train" && command != "bench" && command != "translate" && command != "eval") return;
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT") || std::getenv("CMHA_NO_REEXEC")) return;
  setenv("GOMP_SPINCOUNT", "10000", 1);
  setenv("CMHA_NO_REEXEC", "1", 1);  // once: a failed exec must not loop
  execv("/proc/self/exe", argv);
  // No /proc (an unusual sandbox): run on with libgomp's default.
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cmha::cli;
  choose_omp_wait_policy(argc, argv);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  try {
    const std::string command = argc > 1 ? argv[1] : "";
    if (argc < 2 || command == "--help" || command == "-h" || command == "help") {
      if (command == "help" && argc > 2) {  // "cmha help train" = "cmha train --help"
        if (const Command* c = find_command(argv[2])) return c->run({"--help"});
        std::fprintf(stderr, "cmha: unknown command '%s' (try 'cmha --help')\n", argv[2]);
        return 2;
      }
      std::fputs(usage().c_str(), argc < 2 ? stderr : stdout);
      return argc < 2 ? 2 : 0;
    }
    if (command == "--version") {
      std::printf("cmha %s\n", CMHA_VERSION);
      return 0;
    }
    if (const Command* c = find_command(command)) return c->run(Args(argv + 2, argv + argc));
    std::fprintf(stderr, "cmha: unknown command '%s' (try 'cmha --help')\n", command.c_str());
    return 2;
  } catch (const Interrupted&) {
    std::fprintf(stderr, "cmha: interrupted\n");
    return 130;
  } catch (const cmha::Error& e) {
    std::fprintf(stderr, "cmha: %s\n", e.what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that the system refused (a file where a folder
    // belongs, no permission, a full disk): theirs to fix, so exit 2.
    std::fprintf(stderr, "cmha: %s\n", filesystem_sentence(e).c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    // Inputs are bounded where they are read; what is left is a model or batch too big for this machine.
    std::fprintf(stderr, "cmha: out of memory (the model, batch or input is too large for this machine)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cmha: internal error: %s\n", e.what());
    return 1;
  }
}
