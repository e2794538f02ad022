#pragma once
// The one registry of recipe keys: every key has a type, a default and a
// one-sentence help text. `cmha train --help` lists them, validation checks
// recipes against them, and --dump-config prints them resolved.
#include <string>
#include <vector>

namespace cmha::run {

enum class OptionType { integer, real, boolean, string, real_list };

// The bound of a number key that has none (min = -kUnbounded, max = kUnbounded).
inline constexpr double kUnbounded = 1e300;

struct OptionSpec {
  std::string path;           // "model.d_model"
  OptionType type;
  std::string default_value;  // as YAML text; "" with inherit_from set means "inherit"
  std::string help;
  double min = -kUnbounded, max = kUnbounded;  // for numbers
  std::vector<std::string> choices;            // for strings; empty = any
  std::string inherit_from;                    // unset keys take this key's value
  // Who reads the key: the model.kind values and train.task values whose code
  // reads it; empty = every one. Setting it for another is an error (it would
  // be silently ignored), and --dump-config leaves it out.
  std::vector<std::string> model_kinds = {};
  std::vector<std::string> tasks = {};
};

const std::vector<OptionSpec>& option_registry();
const OptionSpec* find_option(const std::string& path);
// The registered key closest to `path` (edit distance), for "did you mean".
std::string nearest_option(const std::string& path);
const char* option_type_name(OptionType t);
// "transformer models", "vit models, image_classification", "": whom the key
// is for, as --help shows it ("" = everyone).
std::string option_applies_to(const OptionSpec& spec);

}  // namespace cmha::run
