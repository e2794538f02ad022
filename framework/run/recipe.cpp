#include "run/recipe.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include "run/options.h"
#include "tensor/error.h"

namespace cmha::run {

namespace {

std::string where_of(const std::string& file, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  return m.line >= 0 ? file + ":" + std::to_string(m.line + 1) : file;
}

// "[0, 10]", "at least 0", "at most 1": a bound of ±kUnbounded is no bound,
// and is never printed (as an integer it does not even fit).
std::string range_of(const OptionSpec& spec) {
  const bool integer = spec.type == OptionType::integer;
  auto num = [&](double v) {
    if (integer) return std::to_string(static_cast<int64_t>(v));
    std::ostringstream os;
    os << v;
    return os.str();
  };
  const bool low = spec.min > -kUnbounded, high = spec.max < kUnbounded;
  if (low && high) return "[" + num(spec.min) + ", " + num(spec.max) + "]";
  if (low) return "at least " + num(spec.min);
  if (high) return "at most " + num(spec.max);
  return "any number";
}

// Checks that `node` holds a value of the spec's type and range; returns an
// error sentence or "".
std::string check_value(const OptionSpec& spec, const YAML::Node& node) {
  const std::string expect = spec.path + " expects " + option_type_name(spec.type);
  try {
    switch (spec.type) {
      case OptionType::integer: {
        if (!node.IsScalar()) return expect;
        const auto v = node.as<int64_t>();
        if (v < spec.min || v > spec.max) return spec.path + " = " + std::to_string(v) + " is out of range: " + range_of(spec);
        return "";
      }
      case OptionType::real: {
        if (!node.IsScalar()) return expect;
        const auto v = node.as<double>();
        if (!std::isfinite(v)) return spec.path + " = " + node.Scalar() + " is not a finite number";
        if (v < spec.min || v > spec.max) {
          std::ostringstream os;
          os << spec.path << " = " << v << " is out of range: " << range_of(spec);
          return os.str();
        }
        return "";
      }
      case OptionType::boolean:
        if (!node.IsScalar()) return expect;
        node.as<bool>();
        return "";
      case OptionType::string: {
        if (!node.IsScalar()) return expect;
        const auto v = node.as<std::string>();
        if (spec.choices.empty()) return "";
        std::string list;
        for (const auto& c : spec.choices) {
          if (c == v) return "";
          list += (list.empty() ? "" : ", ") + c;
        }
        return spec.path + " = '" + v + "' is not one of: " + list;
      }
      case OptionType::real_list:
        if (!node.IsSequence()) return expect;
        for (const auto& e : node) {
          // Checked first: the Dump below must not meet an alias of the list itself ("&b [1, *b]").
          if (!e.IsScalar()) return expect + ", got a list or mapping inside it";
          if (!std::isfinite(e.as<double>())) return spec.path + " holds " + e.Scalar() + ", not a finite number";
        }
        return "";
    }
  } catch (const YAML::Exception&) {
    return expect + ", got '" + YAML::Dump(node) + "'";
  }
  return "";
}

// True when registered keys lie below `path` ("model.attention" for
// "model.attention.type"). Recipes descend only into such mappings; any other
// is an unknown key. That also bounds the walk by the registry's depth when
// an alias makes a mapping contain itself ("model: &x {attention: *x}").
bool is_option_group(const std::string& path) {
  const std::string prefix = path + ".";
  for (const auto& spec : option_registry())
    if (spec.path.compare(0, prefix.size(), prefix) == 0) return true;
  return false;
}

// YAML forbids a key twice in one mapping, but yaml-cpp keeps both and
// Recipe::absorb would let the last win silently; the same key path spelt
// twice in one file ("model.depth: 2" and "model: {depth: 4}") is the same
// mistake. Paths are built as absorb builds them. `seen`: path → its line.
void refuse_duplicate_keys(const YAML::Node& map, const std::string& prefix, const std::string& file,
                           std::map<std::string, int>& seen) {
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) continue;  // absorb reports it
    const std::string key = kv.first.as<std::string>();
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (kv.second.IsMap() && !find_option(path) && is_option_group(path)) {
      refuse_duplicate_keys(kv.second, path, file, seen);
      continue;
    }
    const int line = kv.first.Mark().line + 1;
    const auto [it, fresh] = seen.emplace(path, line);
    CMHA_CHECK(fresh, file + ":" + std::to_string(line) + ": the key '" + path + "' is set a second time (first at line " +
                          std::to_string(it->second) + "); YAML keeps only one of them: remove the other");
  }
}

void refuse_duplicate_keys(const YAML::Node& root, const std::string& file) {
  std::map<std::string, int> seen;
  refuse_duplicate_keys(root, "", file, seen);
}

}  // namespace

Recipe Recipe::load(const std::string& path, const std::vector<std::string>& overrides) {
  Recipe r;
  r.load_file(path, 0);
  r.finish(overrides, Unread::refuse);
  return r;
}

Recipe Recipe::load_stored(const std::string& path, const std::vector<std::string>& overrides) {
  Recipe r;
  r.load_file(path, 0);
  r.finish(overrides, Unread::drop);
  return r;
}

Recipe Recipe::parse(const std::string& yaml_text, const std::string& name, const std::vector<std::string>& overrides) {
  Recipe r = parse_text(yaml_text, name);
  r.finish(overrides, Unread::refuse);
  return r;
}

Recipe Recipe::parse_stored(const std::string& yaml_text, const std::string& name,
                            const std::vector<std::string>& overrides) {
  Recipe r = parse_text(yaml_text, name);
  r.finish(overrides, Unread::drop);
  return r;
}

namespace {

bool reads_key(const OptionSpec& spec, const std::string& kind, const std::string& task) {
  auto holds = [](const std::vector<std::string>& v, const std::string& x) {
    return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
  };
  return holds(spec.model_kinds, kind) && holds(spec.tasks, task);
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
  return out;
}

}  // namespace

void Recipe::finish(const std::vector<std::string>& overrides, Unread stored) {
  if (stored == Unread::drop) {
    const std::string kind = string("model.kind"), task = string("train.task");
    for (auto it = values_.begin(); it != values_.end();)
      it = reads_key(*find_option(it->first), kind, task) ? std::next(it) : values_.erase(it);
  }
  for (const auto& o : overrides) apply_override(o);
  // A key no code of this model and task reads would be silently ignored (a
  // ViT's feed-forward blocks are GELU whatever model.activation says).
  const std::string kind = string("model.kind"), task = string("train.task");
  for (const auto& spec : option_registry()) {
    const auto it = values_.find(spec.path);
    if (it == values_.end() || reads_key(spec, kind, task)) continue;
    const bool by_kind = !spec.model_kinds.empty() &&
                         std::find(spec.model_kinds.begin(), spec.model_kinds.end(), kind) == spec.model_kinds.end();
    const std::string chooser = by_kind ? "model.kind" : "train.task";
    const std::string value = by_kind ? kind : task;
    const std::string where = origin(chooser);
    throw Error(it->second.origin + ": " + spec.path + " is read only by " + chooser + " " +
                joined(by_kind ? spec.model_kinds : spec.tasks) + ", and this recipe's " + chooser + " is " + value +
                (where == "default" ? " (the default)" : " (" + where + ")") + ": remove it, as nothing would read it");
  }
}

Recipe Recipe::parse_text(const std::string& yaml_text, const std::string& name) {
  Recipe r;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw Error(name + ":" + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg);
  }
  CMHA_CHECK(!root.IsDefined() || root.IsNull() || root.IsMap(), name + ": a recipe must be a YAML mapping of keys");
  CMHA_CHECK(!root["include"], name + ": include: needs a recipe file (its paths are relative to the file)");
  if (root.IsMap()) {
    refuse_duplicate_keys(root, name);
    r.absorb(root, "", name);
  }
  return r;
}

void Recipe::load_file(const std::string& path, int depth, const std::string& included_at) {
  CMHA_CHECK(depth < 16, path + ": includes nested more than 16 deep (an include cycle?)");
  // An included file's errors start with the include: line that names it.
  const std::string by = included_at.empty() ? "" : included_at + ": include: ";
  std::error_code ec;
  CMHA_CHECK(!std::filesystem::is_directory(path, ec), by + "'" + path + "' is a directory, not a recipe file");
  CMHA_CHECK(std::filesystem::exists(path, ec), by + "recipe file '" + path + "' does not exist");
  CMHA_CHECK(std::filesystem::is_regular_file(path, ec), by + "'" + path + "' is not a regular file (a pipe?), not a recipe file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::ParserException& e) {
    throw Error(path + ":" + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg);
  } catch (const YAML::BadFile&) {
    throw Error("cannot read recipe file '" + path + "'");
  }
  if (!root.IsDefined() || root.IsNull()) return;
  CMHA_CHECK(root.IsMap(), path + ": a recipe must be a YAML mapping of keys");
  refuse_duplicate_keys(root, path);
  if (const YAML::Node inc = root["include"]) {
    const auto dir = std::filesystem::path(path).parent_path();
    std::vector<YAML::Node> items;
    if (inc.IsSequence())
      for (const auto& i : inc) items.push_back(i);
    else
      items.push_back(inc);
    for (const auto& i : items) {
      CMHA_CHECK(i.IsScalar(), where_of(path, i) + ": include: expects a file name or a list of them");
      load_file((dir / i.as<std::string>()).lexically_normal().string(), depth + 1, where_of(path, i));
    }
  }
  absorb(root, "", path);
}

void Recipe::absorb(const YAML::Node& node, const std::string& prefix, const std::string& file) {
  for (const auto& kv : node) {
    CMHA_CHECK(kv.first.IsScalar(), where_of(file, kv.first) + ": a recipe key must be a plain name, not a list or a mapping");
    const std::string key = kv.first.as<std::string>();
    if (prefix.empty() && key == "include") continue;
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    const YAML::Node& value = kv.second;
    if (value.IsMap() && !find_option(path) && is_option_group(path)) {
      absorb(value, path, file);
      continue;
    }
    set(path, value, where_of(file, kv.first));
  }
}

void Recipe::set(const std::string& path, const YAML::Node& given, const std::string& origin) {
  const OptionSpec* spec = find_option(path);
  CMHA_CHECK(spec, origin + ": unknown key '" + path + "'; did you mean '" + nearest_option(path) + "'?");
  // `data.test_prefix=` or `test_prefix:` with nothing after it: the empty string the help speaks of ('').
  const YAML::Node node = spec->type == OptionType::string && given.IsNull() ? YAML::Node(std::string()) : given;
  const std::string problem = check_value(*spec, node);
  CMHA_CHECK(problem.empty(), origin + ": " + problem);
  values_[path] = Value{YAML::Clone(node), origin};
}

void Recipe::apply_override(const std::string& text) {
  const auto eq = text.find('=');
  CMHA_CHECK(eq != std::string::npos && eq > 0,
             "command-line override '" + text + "' must look like key.path=value");
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(eq + 1));
  } catch (const YAML::ParserException& e) {
    throw Error("command-line override '" + text + "': cannot parse the value: " + e.msg);
  }
  set(text.substr(0, eq), value, "command line (" + text + ")");
}

YAML::Node Recipe::resolve(const std::string& path, std::string* where) const {
  const OptionSpec* spec = find_option(path);
  CMHA_CHECK(spec, "internal: the recipe key '" + path + "' is not registered");
  auto it = values_.find(path);
  if (it != values_.end()) {
    if (where) *where = it->second.origin;
    return it->second.node;
  }
  if (!spec->inherit_from.empty()) return resolve(spec->inherit_from, where);
  if (where) *where = "default";
  return YAML::Load(spec->default_value);
}

int64_t Recipe::integer(const std::string& path) const { return resolve(path).as<int64_t>(); }
double Recipe::real(const std::string& path) const { return resolve(path).as<double>(); }
bool Recipe::boolean(const std::string& path) const { return resolve(path).as<bool>(); }
std::string Recipe::string(const std::string& path) const { return resolve(path).as<std::string>(); }
std::vector<double> Recipe::reals(const std::string& path) const { return resolve(path).as<std::vector<double>>(); }

std::string Recipe::origin(const std::string& path) const {
  std::string w;
  resolve(path, &w);
  return w;
}

namespace {
// Keys in registry order, nested by their dotted parts.
// (Names and subtrees in two vectors: a pair holding the incomplete DumpTree
// is refused by clang's standard library checks.)
struct DumpTree {
  std::vector<std::string> names;
  std::vector<DumpTree> children;  // children[i] is called names[i]
  YAML::Node leaf;
  DumpTree& child(const std::string& name) {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return children[i];
    names.push_back(name);
    children.emplace_back();
    return children.back();
  }
  void emit(YAML::Emitter& out) const {
    out << YAML::BeginMap;
    for (size_t i = 0; i < names.size(); ++i) {
      out << YAML::Key << names[i] << YAML::Value;
      if (children[i].children.empty()) out << children[i].leaf;
      else children[i].emit(out);
    }
    out << YAML::EndMap;
  }
};
}  // namespace

bool Recipe::reads(const std::string& path) const {
  const OptionSpec* spec = find_option(path);
  CMHA_CHECK(spec, "internal: the recipe key '" + path + "' is not registered");
  return reads_key(*spec, string("model.kind"), string("train.task"));
}

std::string Recipe::text(const std::string& path) const {
  YAML::Emitter out;
  out << YAML::Flow << resolve(path);
  return out.c_str();
}

std::string Recipe::dump() const {
  DumpTree root;
  const std::string kind = string("model.kind"), task = string("train.task");
  for (const auto& spec : option_registry()) {
    if (!reads_key(spec, kind, task)) continue;
    DumpTree* node = &root;
    std::stringstream ss(spec.path);
    for (std::string part; std::getline(ss, part, '.');) node = &node->child(part);
    node->leaf = resolve(spec.path);
  }
  YAML::Emitter out;
  root.emit(out);
  return std::string(out.c_str()) + "\n";
}

std::string first_difference(const Recipe& a, const Recipe& b, const std::vector<std::string>& ignored) {
  for (const auto& spec : option_registry()) {
    if (std::find(ignored.begin(), ignored.end(), spec.path) != ignored.end()) continue;
    const bool in_a = a.reads(spec.path), in_b = b.reads(spec.path);
    if (!in_a && !in_b) continue;
    if (in_a != in_b) return spec.path;
    bool same = false;
    switch (spec.type) {
      case OptionType::integer: same = a.integer(spec.path) == b.integer(spec.path); break;
      case OptionType::real: same = a.real(spec.path) == b.real(spec.path); break;
      case OptionType::boolean: same = a.boolean(spec.path) == b.boolean(spec.path); break;
      case OptionType::string: same = a.string(spec.path) == b.string(spec.path); break;
      case OptionType::real_list: same = a.reals(spec.path) == b.reals(spec.path); break;
    }
    if (!same) return spec.path;
  }
  return "";
}

nlohmann::ordered_json Recipe::to_json() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& spec : option_registry()) {
    if (!reads(spec.path)) continue;
    nlohmann::ordered_json* node = &out;
    std::stringstream ss(spec.path);
    for (std::string part; std::getline(ss, part, '.');) node = &(*node)[part];
    switch (spec.type) {
      case OptionType::integer: *node = integer(spec.path); break;
      case OptionType::real: *node = real(spec.path); break;
      case OptionType::boolean: *node = boolean(spec.path); break;
      case OptionType::string: *node = string(spec.path); break;
      case OptionType::real_list: *node = reals(spec.path); break;
    }
  }
  return out;
}

}  // namespace cmha::run
