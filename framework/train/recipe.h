#pragma once
// A recipe: YAML that may `include:` presets (paths relative to the
// including file; later keys win), then `key.path=value` overrides from the
// command line. Every key is checked against the option registry when it is
// read: an unknown key, a wrong type or an out-of-range value is an error
// naming the file, the line and the nearest valid key.
#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace cmha::train {

class Recipe {
 public:
  static Recipe load(const std::string& path, const std::vector<std::string>& overrides = {});
  static Recipe parse(const std::string& yaml_text, const std::string& name = "<recipe>",
                      const std::vector<std::string>& overrides = {});

  bool has(const std::string& path) const { return values_.count(path) > 0; }  // set explicitly
  int64_t integer(const std::string& path) const;
  double real(const std::string& path) const;
  bool boolean(const std::string& path) const;
  std::string string(const std::string& path) const;
  std::vector<double> reals(const std::string& path) const;
  // Where a key was set ("recipe.yaml:12", "command line"), or "default".
  std::string origin(const std::string& path) const;
  // Every registered key with its resolved value, as YAML.
  std::string dump() const;

 private:
  struct Value {
    YAML::Node node;
    std::string origin;
  };
  void load_file(const std::string& path, int depth, const std::string& included_at = "");
  void absorb(const YAML::Node& node, const std::string& prefix, const std::string& file);
  void set(const std::string& path, const YAML::Node& node, const std::string& origin);
  void apply_override(const std::string& text);
  // The node that decides `path`: explicit, else inherited, else the default.
  YAML::Node resolve(const std::string& path, std::string* where = nullptr) const;
  std::map<std::string, Value> values_;
};

}  // namespace cmha::train
