// The recipe parser: YAML text, `include:` of other files and `key=value`
// overrides. An input is the main recipe; a line "#> NAME" starts another
// file NAME (an include target) and a line "#= key=value" is an override
// (both are YAML comments, so a seed stays a valid recipe). The recipe is read
// from text (Recipe::parse) and from a file (Recipe::load); what loads from the
// file must resolve every key to its type and survive a dump and re-parse
// unchanged, as a checkpoint's stored recipe must (checked once per input:
// it is most of the time an input takes).
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_scratch.h"
#include "run/options.h"
#include "run/recipe.h"
#include "tensor/error.h"

namespace {

namespace fs = std::filesystem;
using cmha::run::OptionType;
using cmha::run::Recipe;

struct Input {
  std::string main;
  std::vector<std::pair<std::string, std::string>> files;  // name, text
  std::vector<std::string> overrides;
};

// A file name of [A-Za-z0-9_.-] that stays inside the scratch folder.
std::string safe_name(const std::string& raw) {
  std::string out;
  for (char c : raw)
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') out.push_back(c);
  if (out.empty() || out[0] == '.' || out == "recipe.yaml") out = "x" + out;
  return out.substr(0, 40);
}

Input split(const std::string& text) {
  Input in;
  std::string* current = &in.main;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line.rfind("#> ", 0) == 0 && in.files.size() < 8) {
      in.files.emplace_back(safe_name(line.substr(3)), "");
      current = &in.files.back().second;
    } else if (line.rfind("#= ", 0) == 0 && in.overrides.size() < 16) {
      in.overrides.push_back(line.substr(3));
    } else {
      *current += line;
      if (end < text.size()) *current += '\n';
    }
    start = end + 1;
  }
  return in;
}

// Every key resolves to its registered type, and the dump parses back to itself.
void check_resolved(const Recipe& r) {
  for (const auto& spec : cmha::run::option_registry()) {
    switch (spec.type) {
      case OptionType::integer: (void)r.integer(spec.path); break;
      case OptionType::real: (void)r.real(spec.path); break;
      case OptionType::boolean: (void)r.boolean(spec.path); break;
      case OptionType::string: (void)r.string(spec.path); break;
      case OptionType::real_list: (void)r.reals(spec.path); break;
    }
  }
  const std::string text = r.dump();
  if (Recipe::parse(text, "dump").dump() != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Input in = split(std::string(reinterpret_cast<const char*>(data), size));
  try {
    (void)Recipe::parse(in.main, "recipe.yaml", in.overrides);
  } catch (const cmha::Error&) {
  }
  // A fresh folder per input: files of earlier inputs must not be found.
  const fs::path dir = cmha::fuzz::scratch_dir() / "recipe";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "recipe.yaml").string();
  cmha::fuzz::write_scratch("recipe/recipe.yaml", in.main.data(), in.main.size());
  for (const auto& [name, text] : in.files) cmha::fuzz::write_scratch("recipe/" + name, text.data(), text.size());
  try {
    check_resolved(Recipe::load(path, in.overrides));
  } catch (const cmha::Error&) {
  }
  return 0;
}
