#pragma once
// One argument parser for every subcommand: CLI11 (Debian's libcli11-dev,
// header-only, BSD licence). Chosen over cxxopts because its validators
// (CLI::Range, CLI::IsMember) check a value and print the allowed range or
// choices in --help from one declaration, defaults show with
// capture_default_str(), and positionals mix freely with options (cmha train's
// `key=value` overrides).
//
//   CommandLine cl("average", "Averages the weights of several checkpoints.");
//   cl.app().add_option("-o,--output", out, "where to write")->type_name("OUT");
//   if (!cl.parse(args)) return 0;  // --help was printed
#include <CLI/CLI.hpp>
#include <string>

#include "cli/commands.h"

namespace cmha::cli {

class CommandLine {
 public:
  // `command` is the subcommand's name ("average"); `description` the text at
  // the top of its --help.
  CommandLine(std::string command, std::string description);

  CLI::App& app() { return app_; }

  // Parses args (those after the subcommand's name). Returns false when -h or
  // --help was given: the help went to stdout and the caller returns 0. A
  // mistake (an unknown option, a missing or malformed value, a value out of
  // range or not among the choices, a missing required argument) is a
  // cmha::Error of one sentence naming the option (exit 2).
  bool parse(const Args& args);

  std::string help() const { return app_.help(); }

 private:
  std::string command_;
  CLI::App app_;
};

}  // namespace cmha::cli
