// Corpus BLEU as sacreBLEU 2.6.0 computes it: segment statistics, the
// corpus score with its smoothing and brevity penalty, the signature, and
// Python's notion of whitespace. (UTF-8 coding lives in tokenizer_intl.cpp
// with the other Unicode pieces.)
#include "eval/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "tensor/error.h"

namespace cmha::eval {

namespace detail {

bool is_py_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  if (c < 0x85) return false;
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

std::vector<std::u32string> py_split(std::u32string_view s) {
  std::vector<std::u32string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_py_space(s[i])) ++i;
    size_t j = i;
    while (j < s.size() && !is_py_space(s[j])) ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::u32string_view py_rstrip(std::u32string_view s) {
  size_t n = s.size();
  while (n > 0 && is_py_space(s[n - 1])) --n;
  return s.substr(0, n);
}

}  // namespace detail

namespace {

constexpr int kMaxOrder = 4;

enum class Tok { k13a, kIntl, kChar, kNone };
enum class Smooth { kExp, kFloor, kAddK, kNone };

Tok parse_tokenizer(const std::string& name) {
  if (name == "13a") return Tok::k13a;
  if (name == "intl") return Tok::kIntl;
  if (name == "char") return Tok::kChar;
  if (name == "none") return Tok::kNone;
  throw Error("unknown BLEU tokenizer '" + name + "' (expected 13a, intl, char or none)");
}

Smooth parse_smooth(const std::string& name) {
  if (name == "exp") return Smooth::kExp;
  if (name == "floor") return Smooth::kFloor;
  if (name == "add-k") return Smooth::kAddK;
  if (name == "none") return Smooth::kNone;
  throw Error("unknown BLEU smoothing '" + name + "' (expected exp, floor, add-k or none)");
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

void check_utf8(const std::string& s, const std::string& what, size_t index) {
  const size_t bad = detail::find_invalid_utf8(s);
  if (bad == std::string_view::npos) return;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(s[bad]));
  throw Error(what + " " + std::to_string(index + 1) + " is not valid UTF-8 (byte " + byte + " at byte " +
              std::to_string(bad + 1) + ")");
}

// sacreBLEU's "char" tokenizer, " ".join(line): every character apart.
std::u32string tokenize_char_raw(std::u32string_view line) {
  std::u32string out;
  for (const char32_t c : line) {
    if (!out.empty()) out.push_back(U' ');
    out.push_back(c);
  }
  return out;
}

std::u32string tokenize_raw(std::u32string text, Tok tok) {
  if (tok == Tok::k13a) return detail::tokenize_13a_raw(std::move(text));
  if (tok == Tok::kIntl) return detail::tokenize_intl_raw(text);
  if (tok == Tok::kChar) return tokenize_char_raw(text);
  return text;
}

// A segment as tokens, after lowercasing, stripping and tokenizing.
std::vector<std::string> segment_tokens(const std::string& line, Tok tok, const BleuOptions& o) {
  std::u32string text = detail::decode_utf8(o.lowercase ? unicode_lower(line) : line);
  text = tokenize_raw(std::u32string(detail::py_rstrip(text)), tok);
  std::vector<std::u32string> parts = detail::py_split(text);
  if (o.compound_split) {
    std::u32string joined;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i) joined.push_back(U' ');
      joined += parts[i];
    }
    parts = detail::py_split(detail::compound_split_raw(joined));
  }
  std::vector<std::string> out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.push_back(detail::encode_utf8(p));
  return out;
}

// n-grams of orders 1..4 as keys "w1 w2 ..." (tokens hold no space, so the
// number of spaces tells the order apart) with their counts.
using NgramCounts = std::unordered_map<std::string, int64_t>;

NgramCounts count_ngrams(const std::vector<std::string>& tokens) {
  NgramCounts counts;
  const size_t n_tok = tokens.size();
  for (size_t i = 0; i < n_tok; ++i) {
    std::string key = tokens[i];
    ++counts[key];
    for (int n = 2; n <= kMaxOrder && i + n <= n_tok; ++n) {
      key.push_back(' ');
      key += tokens[i + n - 1];
      ++counts[key];
    }
  }
  return counts;
}

int order_of(const std::string& key) {
  int n = 1;
  for (const char c : key) n += c == ' ';
  return n;
}

// Python's sum() of floats (CPython >= 3.12: Neumaier compensation).
double py_sum(const std::array<double, kMaxOrder>& v, int n) {
  double sum = 0.0, c = 0.0;
  for (int i = 0; i < n; ++i) {
    const double x = v[i];
    const double t = sum + x;
    c += std::fabs(sum) >= std::fabs(x) ? (sum - t) + x : (x - t) + sum;
    sum = t;
  }
  if (c != 0.0 && std::isfinite(c)) sum += c;
  return sum;
}

// sacreBLEU's BLEU.compute_bleu on the corpus statistics.
void compute_score(BleuScore& s, Smooth smooth, double smooth_value, bool effective_order) {
  if (s.sys_len < s.ref_len)
    s.bp = s.sys_len > 0 ? std::exp(1.0 - static_cast<double>(s.ref_len) / static_cast<double>(s.sys_len)) : 0.0;
  else
    s.bp = 1.0;
  s.precisions.fill(0.0);
  s.score = 0.0;
  bool any = false;
  for (const int64_t c : s.counts) any = any || c != 0;
  if (!any) return;

  double smooth_mteval = 1.0;
  int eff_order = kMaxOrder;
  for (int n = 1; n <= kMaxOrder; ++n) {
    double correct = static_cast<double>(s.counts[n - 1]);
    double total = static_cast<double>(s.totals[n - 1]);
    if (smooth == Smooth::kAddK && n > 1) {
      correct += smooth_value;
      total += smooth_value;
    }
    if (total == 0.0) break;
    if (effective_order) eff_order = n;
    if (correct == 0.0) {
      if (smooth == Smooth::kExp) {
        smooth_mteval *= 2.0;
        s.precisions[n - 1] = 100.0 / (smooth_mteval * total);
      } else if (smooth == Smooth::kFloor) {
        s.precisions[n - 1] = 100.0 * smooth_value / total;
      }
    } else {
      s.precisions[n - 1] = 100.0 * correct / total;
    }
  }
  std::array<double, kMaxOrder> logs{};
  for (int n = 0; n < eff_order; ++n)
    logs[n] = s.precisions[n] == 0.0 ? -9999999999.0 : std::log(s.precisions[n]);
  s.score = s.bp * std::exp(py_sum(logs, eff_order) / eff_order);
}

}  // namespace

std::string BleuScore::verbose() const {
  std::string out;
  for (int n = 0; n < kMaxOrder; ++n) {
    if (n) out += '/';
    out += fmt("%.1f", precisions[n]);
  }
  const double ratio = ref_len ? static_cast<double>(sys_len) / static_cast<double>(ref_len) : 0.0;
  out += " (BP = " + fmt("%.3f", bp) + " ratio = " + fmt("%.3f", ratio) + " hyp_len = " + std::to_string(sys_len) +
         " ref_len = " + std::to_string(ref_len) + ")";
  return out;
}

MetricScore BleuScore::result() const { return {"BLEU", score, signature, verbose(), std::nullopt, std::nullopt}; }

std::vector<BleuSegmentStats> bleu_segment_stats(const std::vector<std::string>& hyps,
                                                 const std::vector<std::vector<std::string>>& ref_streams,
                                                 const BleuOptions& options) {
  const Tok tok = parse_tokenizer(options.tokenize);
  CMHA_CHECK(!ref_streams.empty(), "BLEU needs at least one reference stream");
  for (size_t r = 0; r < ref_streams.size(); ++r)
    CMHA_CHECK(ref_streams[r].size() == hyps.size(),
               "BLEU: " + std::to_string(hyps.size()) + " hypotheses but reference stream " + std::to_string(r + 1) +
                   " has " + std::to_string(ref_streams[r].size()) + " segments");
  const bool multi = ref_streams.size() > 1;

  std::vector<BleuSegmentStats> out(hyps.size());
  for (size_t i = 0; i < hyps.size(); ++i) {
    BleuSegmentStats& s = out[i];
    s.fill(0);
    // References of this segment: n-gram counts as the maximum over them.
    NgramCounts ref_counts;
    std::vector<int64_t> ref_lens;
    for (size_t r = 0; r < ref_streams.size(); ++r) {
      const std::string& ref = ref_streams[r][i];
      check_utf8(ref, multi ? "reference stream " + std::to_string(r + 1) + " segment" : "reference segment", i);
      const std::vector<std::string> tokens = segment_tokens(ref, tok, options);
      ref_lens.push_back(static_cast<int64_t>(tokens.size()));
      for (auto& [gram, count] : count_ngrams(tokens)) {
        int64_t& slot = ref_counts[gram];
        if (count > slot) slot = count;
      }
    }

    check_utf8(hyps[i], "hypothesis segment", i);
    const std::vector<std::string> hyp_tokens = segment_tokens(hyps[i], tok, options);
    const auto hyp_len = static_cast<int64_t>(hyp_tokens.size());
    // The closest reference length; the shorter one on a tie.
    int64_t closest = -1, closest_diff = -1;
    for (const int64_t len : ref_lens) {
      const int64_t diff = std::llabs(hyp_len - len);
      if (closest_diff < 0 || diff < closest_diff || (diff == closest_diff && len < closest)) {
        closest_diff = diff;
        closest = len;
      }
    }
    s[0] = hyp_len;
    s[1] = closest;
    for (const auto& [gram, count] : count_ngrams(hyp_tokens)) {
      const int n = order_of(gram);
      s[1 + kMaxOrder + n] += count;
      const auto it = ref_counts.find(gram);
      if (it != ref_counts.end()) s[1 + n] += std::min(count, it->second);
    }
  }
  return out;
}

BleuScore bleu_from_stats(const BleuSegmentStats& sums, size_t n_refs, const BleuOptions& options) {
  const Smooth smooth = parse_smooth(options.smooth);
  BleuScore s;
  s.sys_len = sums[0];
  s.ref_len = sums[1];
  for (int n = 0; n < kMaxOrder; ++n) {
    s.counts[n] = sums[2 + n];
    s.totals[n] = sums[2 + kMaxOrder + n];
  }
  double smooth_value = 0.0;
  std::string smooth_sig = options.smooth;
  if (smooth == Smooth::kFloor || smooth == Smooth::kAddK) {
    smooth_value = options.smooth_value.value_or(smooth == Smooth::kFloor ? 0.1 : 1.0);
    smooth_sig += "[" + fmt("%.2f", smooth_value) + "]";
  }
  compute_score(s, smooth, smooth_value, options.effective_order);

  s.signature = make_signature({{"nrefs", std::to_string(n_refs)},
                                 {"case", options.lowercase ? "lc" : "mixed"},
                                 {"eff", options.effective_order ? "yes" : "no"},
                                 {"tok", options.tokenize + (options.compound_split ? "+compound" : "")},
                                 {"smooth", smooth_sig}});
  return s;
}

double bleu_resampled_score(const std::array<float, kBleuStats>& sums, const BleuOptions& options) {
  // BLEU.compute_bleu on a float32 numpy row: each precision is a float32
  // (numpy 2 keeps a Python float beside a float32 in float32), its log, the
  // brevity penalty and the score are Python floats.
  const Smooth smooth = parse_smooth(options.smooth);
  const double smooth_value =
      options.smooth_value.value_or(smooth == Smooth::kFloor ? 0.1 : smooth == Smooth::kAddK ? 1.0 : 0.0);
  const auto sys_len = static_cast<int64_t>(sums[0]), ref_len = static_cast<int64_t>(sums[1]);
  double bp = 1.0;
  if (sys_len < ref_len)
    bp = sys_len > 0 ? std::exp(1.0 - static_cast<double>(ref_len) / static_cast<double>(sys_len)) : 0.0;
  bool any = false;
  for (int n = 0; n < kMaxOrder; ++n) any = any || sums[2 + n] != 0.0f;
  if (!any) return 0.0;
  std::array<float, kMaxOrder> precisions{};
  float smooth_mteval = 1.0f;
  int eff_order = kMaxOrder;
  for (int n = 1; n <= kMaxOrder; ++n) {
    float correct = sums[1 + n], total = sums[1 + kMaxOrder + n];
    if (smooth == Smooth::kAddK && n > 1) {
      correct += static_cast<float>(smooth_value);
      total += static_cast<float>(smooth_value);
    }
    if (total == 0.0f) break;
    if (options.effective_order) eff_order = n;
    if (correct == 0.0f) {
      if (smooth == Smooth::kExp) {
        smooth_mteval *= 2.0f;
        precisions[n - 1] = 100.0f / (smooth_mteval * total);
      } else if (smooth == Smooth::kFloor) {
        precisions[n - 1] = static_cast<float>(100.0 * smooth_value) / total;
      }
    } else {
      precisions[n - 1] = 100.0f * correct / total;
    }
  }
  std::array<double, kMaxOrder> logs{};
  for (int n = 0; n < eff_order; ++n)
    logs[n] = precisions[n] == 0.0f ? -9999999999.0 : std::log(static_cast<double>(precisions[n]));
  return bp * std::exp(py_sum(logs, eff_order) / eff_order);
}

BleuScore corpus_bleu_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams,
                            const BleuOptions& options) {
  parse_smooth(options.smooth);
  BleuSegmentStats sums{};
  for (const BleuSegmentStats& s : bleu_segment_stats(hyps, ref_streams, options))
    for (size_t k = 0; k < sums.size(); ++k) sums[k] += s[k];
  return bleu_from_stats(sums, ref_streams.size(), options);
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      const BleuOptions& options) {
  CMHA_CHECK(hyps.size() == refs.size(), "BLEU: " + std::to_string(hyps.size()) + " hypotheses but " +
                                             std::to_string(refs.size()) + " references");
  return corpus_bleu_multi(hyps, {refs}, options);
}

BleuScore corpus_bleu_files(const std::string& hyp_path, const std::string& ref_path, const BleuOptions& options) {
  const MetricInput in = read_metric_input(hyp_path, {ref_path});
  return corpus_bleu(in.hyps, in.refs[0], options);
}

std::string bleu_tokenize(std::string_view line, const std::string& name) {
  const Tok tok = parse_tokenizer(name);
  const size_t bad = detail::find_invalid_utf8(line);
  CMHA_CHECK(bad == std::string_view::npos,
             "bleu_tokenize: input is not valid UTF-8 (at byte offset " + std::to_string(bad) + ")");
  if (tok == Tok::kNone) return std::string(line);
  std::u32string joined;
  for (const auto& part : detail::py_split(tokenize_raw(detail::decode_utf8(line), tok))) {
    if (!joined.empty()) joined.push_back(U' ');
    joined += part;
  }
  return detail::encode_utf8(joined);
}

std::string compound_split(std::string_view line) {
  CMHA_CHECK(detail::find_invalid_utf8(line) == std::string_view::npos, "compound_split: input is not valid UTF-8");
  return detail::encode_utf8(detail::compound_split_raw(detail::decode_utf8(line)));
}

}  // namespace cmha::eval
