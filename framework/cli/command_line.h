#pragma once
// One argument parser for every subcommand: CLI11 (Debian's libcli11-dev,
// header-only, BSD licence). Chosen over cxxopts because its validators
// check a value and print the allowed range or choices in --help from one
// declaration, defaults show with capture_default_str(), and positionals mix
// freely with options (cmha train's `key=value` overrides).
//
//   CommandLine cl("average", "Averages the weights of several checkpoints.");
//   cl.app().add_option("-o,--output", out, "where to write")->type_name("OUT");
//   cl.app().add_option("--last", n, "...")->check(whole_number(1, 100000))->capture_default_str();
//   if (!cl.parse(args)) return 0;  // --help was printed
//
// --help reads: the usage line, the description, the positionals and the
// options, each option with its allowed values (from its validator) and its
// default "(default 10)" (from capture_default_str()), then the exit codes.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "run/options.h"

namespace cmha::cli {

class CommandLine {
 public:
  // `command` is the subcommand's name ("average"); `description` the text
  // under the usage line of its --help.
  CommandLine(std::string command, std::string description);

  CLI::App& app() { return app_; }

  // Parses args (those after the subcommand's name). Returns false when -h or
  // --help was given: the help went to stdout and the caller returns 0 (the
  // positionals given with it are stored, so `cmha train RECIPE --help` can
  // show that recipe). A mistake (an unknown option, a second argument where
  // one positional is declared, "takes one checkpoint, got 'a' and 'b'", a
  // missing or malformed value, a value out of range or not among the
  // choices) is a cmha::Error of one sentence naming the option (exit 2).
  bool parse(const Args& args);

  std::string help() const { return app_.help(); }

 private:
  std::string command_;
  CLI::App app_;
};

// The positionals of `cmha train RECIPE key.path=value ...` (and of bench,
// sweep, eval): those holding '=' are overrides, the one other the file
// (`what`: "recipe", "checkpoint"); a second one is an error naming both.
struct FileAndOverrides {
  std::string file;  // "" when none was given
  std::vector<std::string> overrides;
};
FileAndOverrides split_overrides(const std::vector<std::string>& positionals, const std::string& command,
                                 const std::string& what);

// Validators whose messages read as the rest of cmha's ("option '--steps'
// needs a whole number from 1 to 1000000, not '0'"), shown in --help as
// CLI::Range and CLI::IsMember show theirs ("INT in [1 - 1000000]",
// "{svd,random}"). CLI::Range itself words a word as "not in range" and
// prints an unbounded maximum (train::kUnbounded) with all its 301 digits.
CLI::Validator whole_number(long long min, long long max);
// A finite number in [min, max]; max train::kUnbounded: no upper bound.
CLI::Validator number(double min, double max = run::kUnbounded);
CLI::Validator one_of(std::vector<std::string> choices);

}  // namespace cmha::cli
