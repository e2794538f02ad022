#pragma once
// String helpers shared by the tests.
#include <sstream>
#include <string>
#include <vector>

namespace cmha::test {

// Whether `text` (a command's output, a message) contains `part`.
inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The whitespace-separated words of `s` (a command line whose overrides hold no quoted spaces).
inline std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace cmha::test
