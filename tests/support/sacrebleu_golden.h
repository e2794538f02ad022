#pragma once
// sacreBLEU 2.6.0's golden files (tests/data/bleu-golden; the metric cases
// made by tests/reference/make_metric_golden.py) and the version stamp cmha
// writes where sacreBLEU wrote its own.
#include <string>
#include <utility>

#include "eval/metric_score.h"
#include "support/source_paths.h"

namespace cmha::test {

inline const std::string kBleuGoldenDir = std::string(CMHA_SOURCE_DIR) + "/tests/data/bleu-golden";

// sacreBLEU's output with cmha's version in place of "2.6.0", in signatures
// ("...|version:2.6.0") and in JSON's "version" field.
inline std::string with_cmha_version(std::string s) {
  const std::string v = eval::kSacrebleuVersion, mine = eval::metric_version();
  for (const auto& [from, to] : {std::pair{"version:" + v, "version:" + mine},
                                 std::pair{"\"version\": \"" + v + "\"", "\"version\": \"" + mine + "\""}})
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  return s;
}

}  // namespace cmha::test
