#include "cli/command_line.h"

#include <algorithm>
#include <cstdio>

#include "tensor/error.h"

namespace cmha::cli {

CommandLine::CommandLine(std::string command, std::string description)
    : command_(std::move(command)), app_(std::move(description), "cmha " + command_) {
  app_.get_formatter()->column_width(30);
  app_.footer("exit codes: 0 success, 2 usage or input error, 1 other failure, 130 interrupted");
}

bool CommandLine::parse(const Args& args) {
  // CLI11 consumes a vector from its back.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app_.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app_.help().c_str(), stdout);
    return false;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (!what.empty() && what.back() == '.') what.pop_back();
    throw Error(command_ + ": " + what + " (see 'cmha " + command_ + " --help')");
  }
  return true;
}

}  // namespace cmha::cli
