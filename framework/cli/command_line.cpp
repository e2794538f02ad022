#include "cli/command_line.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tensor/error.h"

namespace cmha::cli {

namespace {

// Breaks `text` into lines of at most `width` characters at spaces.
std::string wrap(const std::string& text, size_t width) {
  std::string out, line;
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}

// CLI11's formatter with the usage line first (lowercase, as `cmha --help`),
// positionals shown by their value names ("[RECIPE] [key.path=value ...]"),
// and an option's default at the end of its help, "(default 10)", rather than
// glued to its value's name; help text wrapped to 80 columns.
class HelpFormatter : public CLI::Formatter {
 public:
  static constexpr size_t kColumn = 30, kWidth = 80;
  HelpFormatter() {
    label("Usage", "usage");
    column_width(kColumn);
  }
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    std::string description = app->get_description();
    while (!description.empty() && description.back() == '\n') description.pop_back();
    return make_usage(app, name) + (description.empty() ? "" : "\n" + description + "\n") + make_positionals(app) +
           make_groups(app, mode) + "\n" + make_footer(app);
  }
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    if (is_positional && !opt->get_type_name().empty()) return opt->get_type_name();
    return CLI::Formatter::make_option_name(opt, is_positional);
  }
  std::string make_option_usage(const CLI::Option* opt) const override {
    if (!opt->get_type_name().empty()) return opt->get_type_name();
    return CLI::Formatter::make_option_usage(opt);
  }
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string out;
    if (opt->get_positional()) return out;  // its name is its value's name
    if (opt->get_type_size() != 0) {
      if (!opt->get_type_name().empty()) out += " " + opt->get_type_name();
      if (opt->get_expected_max() == CLI::detail::expected_max_vector_size && opt->get_allow_extra_args()) out += " ...";
      if (opt->get_required()) out += " REQUIRED";
    }
    return out;
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    const std::string def = opt->get_default_str();
    return wrap(opt->get_description() + (def.empty() ? "" : " (default " + def + ")"), kWidth - kColumn);
  }
};

// "--tol: needs a number ..." → {"--tol", "needs a number ..."}.
std::pair<std::string, std::string> split_name(const std::string& what) {
  const auto colon = what.find(": ");
  if (colon == std::string::npos) return {"", what};
  return {what.substr(0, colon), what.substr(colon + 2)};
}

std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

CommandLine::CommandLine(std::string command, std::string description)
    : command_(std::move(command)), app_(std::move(description), "cmha " + command_) {
  app_.formatter(std::make_shared<HelpFormatter>());
  app_.set_help_flag("-h,--help", "show this help and exit");
  app_.footer("exit codes: 0 success, 2 usage or input error, 1 other failure, 130 interrupted");
  // Left-over arguments are reported below, one sentence naming the first.
  app_.allow_extras();
}

bool CommandLine::parse(const Args& args) {
  // CLI11 consumes a vector from its back.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  const std::string see = " (see 'cmha " + command_ + " --help')";
  try {
    app_.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app_.help().c_str(), stdout);
    return false;
  } catch (const CLI::ValidationError& e) {
    // Our validators' messages follow the option's name: "option '--steps' needs a whole number ...".
    const auto [name, message] = split_name(e.what());
    throw Error("option '" + name + "' " + message + see);
  } catch (const CLI::ArgumentMismatch& e) {
    throw Error("option '" + split_name(e.what()).first + "' needs a value" + see);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (!what.empty() && what.back() == '.') what.pop_back();
    throw Error(what + see);
  }
  const std::vector<std::string> extra = app_.remaining();
  if (!extra.empty()) {
    const std::string& a = extra.front();
    if (a.size() > 1 && a[0] == '-')
      throw Error("unknown option '" + a + "' for 'cmha " + command_ + "'" + see);
    // A positional of one value already given: "cmha score takes one checkpoint, got 'a' and 'b'".
    for (const CLI::Option* p : app_.get_options([](const CLI::Option* o) { return o->get_positional(); }))
      if (p->get_expected_max() == 1 && p->count() > 0)
        throw Error("cmha " + command_ + " takes one " + p->get_name() + ", got '" + p->results().front() + "' and '" +
                    a + "'");
    throw Error("'cmha " + command_ + "' does not take the argument '" + a + "'" + see);
  }
  return true;
}

FileAndOverrides split_overrides(const std::vector<std::string>& positionals, const std::string& command,
                                 const std::string& what) {
  FileAndOverrides out;
  for (const std::string& a : positionals) {
    if (a.find('=') != std::string::npos) out.overrides.push_back(a);
    else if (out.file.empty()) out.file = a;
    else throw Error("cmha " + command + " takes one " + what + ", got '" + out.file + "' and '" + a + "'");
  }
  return out;
}

CLI::Validator whole_number(long long min, long long max) {
  const std::string range = "from " + std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [=](std::string& text) {
        size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == text.size() && used > 0 && v >= min && v <= max) return std::string();
        return "needs a whole number " + range + ", not '" + text + "'";
      },
      "INT in [" + std::to_string(min) + " - " + std::to_string(max) + "]");
}

CLI::Validator number(double min, double max) {
  const bool bounded = max < run::kUnbounded;
  const std::string range = bounded ? "from " + number_text(min) + " to " + number_text(max)
                                    : "of at least " + number_text(min);
  return CLI::Validator(
      [=](std::string& text) {
        size_t used = 0;
        double v = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == text.size() && used > 0 && std::isfinite(v) && v >= min && v <= max) return std::string();
        return "needs a number " + range + ", not '" + text + "'";
      },
      bounded ? "FLOAT in [" + number_text(min) + " - " + number_text(max) + "]" : "FLOAT >= " + number_text(min));
}

CLI::Validator one_of(std::vector<std::string> choices) {
  std::string listed, braces;
  for (size_t i = 0; i < choices.size(); ++i) {
    listed += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + ("'" + choices[i] + "'");
    braces += (i == 0 ? "" : ",") + choices[i];
  }
  return CLI::Validator(
      [=](std::string& text) {
        if (std::find(choices.begin(), choices.end(), text) != choices.end()) return std::string();
        return "is " + listed + ", not '" + text + "'";
      },
      "{" + braces + "}");
}

}  // namespace cmha::cli
