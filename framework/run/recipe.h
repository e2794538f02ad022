#pragma once
// A recipe: YAML that may `include:` presets (paths relative to the
// including file; later keys win), then `key.path=value` overrides from the
// command line. Every key is checked against the option registry when it is
// read: an unknown key, a wrong type or an out-of-range value is an error
// naming the file, the line and the nearest valid key. Once all of it is
// read, a key set for a model.kind or train.task that does not read it
// (OptionSpec::model_kinds, tasks) is an error naming where it was set.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace cmha::run {

class Recipe {
 public:
  static Recipe load(const std::string& path, const std::vector<std::string>& overrides = {});
  static Recipe parse(const std::string& yaml_text, const std::string& name = "<recipe>",
                      const std::vector<std::string>& overrides = {});
  // A recipe cmha wrote (a checkpoint's, a run directory's recipe.yaml): as
  // parse and load, except that keys its model and task do not read are
  // dropped, not refused — before --dump-config left them out, every
  // resolved recipe listed every key. The overrides are checked as usual.
  static Recipe parse_stored(const std::string& yaml_text, const std::string& name,
                             const std::vector<std::string>& overrides = {});
  static Recipe load_stored(const std::string& path, const std::vector<std::string>& overrides = {});

  bool has(const std::string& path) const { return values_.count(path) > 0; }  // set explicitly
  int64_t integer(const std::string& path) const;
  double real(const std::string& path) const;
  bool boolean(const std::string& path) const;
  std::string string(const std::string& path) const;
  std::vector<double> reals(const std::string& path) const;
  // Where a key was set ("recipe.yaml:12", "command line"), or "default".
  std::string origin(const std::string& path) const;
  // Whether this recipe's model.kind and train.task read the key.
  bool reads(const std::string& path) const;
  // The key's resolved value as YAML text ("64", "[0.9, 0.98]", "''").
  std::string text(const std::string& path) const;
  // Every key this recipe's model and task read, with its resolved value, as YAML.
  std::string dump() const;
  // The same as JSON, nested by the keys' dotted parts in registry order, each value of its key's type.
  nlohmann::ordered_json to_json() const;

 private:
  struct Value {
    YAML::Node node;
    std::string origin;
  };
  static Recipe parse_text(const std::string& yaml_text, const std::string& name);
  void load_file(const std::string& path, int depth, const std::string& included_at = "");
  void absorb(const YAML::Node& node, const std::string& prefix, const std::string& file);
  void set(const std::string& path, const YAML::Node& node, const std::string& origin);
  void apply_override(const std::string& text);
  enum class Unread { refuse, drop };
  // Applies the overrides, then refuses (or drops) keys set for a model or task that does not read them.
  void finish(const std::vector<std::string>& overrides, Unread stored);
  // The node that decides `path`: explicit, else inherited, else the default.
  YAML::Node resolve(const std::string& path, std::string* where = nullptr) const;
  std::map<std::string, Value> values_;
};

// The first key, in registry order, whose resolved value differs between a
// and b, compared as values of its type (2e-3 == 0.002), a key one reads and
// the other does not counting as different; "" when none does. Keys in
// `ignored` are skipped.
std::string first_difference(const Recipe& a, const Recipe& b, const std::vector<std::string>& ignored = {});

}  // namespace cmha::run
