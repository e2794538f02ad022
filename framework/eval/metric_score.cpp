// sacreBLEU's output formats (metrics/base.py Score.format, utils.py
// print_single_results) and its command line's file reading.
#include "eval/metric_score.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "eval/bleu.h"
#include "tensor/error.h"

#ifndef CMHA_VERSION
#define CMHA_VERSION "unknown"
#endif

namespace cmha::eval {

std::string metric_version() { return std::string("cmha-") + CMHA_VERSION + "+sacreBLEU-" + kSacrebleuVersion; }

std::string make_signature(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [key, value] : fields) out += key + ":" + value + "|";
  return out + "version:" + metric_version();
}

std::string format_score(double score, int width) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", std::clamp(width, 0, 20), score);
  return buf;
}

std::string MetricScore::score_text(int width) const {
  std::string out = format_score(score, width);
  if (confidence_mean && *confidence_mean > 0)  // sacreBLEU prints it when the mean is above 0
    out += " (μ = " + format_score(*confidence_mean, width) + " ± " + format_score(*confidence_ci, width) + ")";
  return out;
}

std::string MetricScore::text(int width) const {
  std::string out = name + "|" + signature + " = " + score_text(width);
  if (!verbose.empty()) out += " " + verbose;
  return out;
}

nlohmann::ordered_json MetricScore::json(int width) const {
  nlohmann::ordered_json j;
  j["name"] = name;
  // sacreBLEU: float(f"{score:.{width}f}"), a number rounded as printed.
  j["score"] = std::strtod(format_score(score, width).c_str(), nullptr);
  j["signature"] = signature;
  if (confidence_mean && *confidence_mean > 0) {
    const std::string mean = format_score(*confidence_mean, width), ci = format_score(*confidence_ci, width);
    j["confidence_mean"] = std::strtod(mean.c_str(), nullptr);
    j["confidence_var"] = std::strtod(ci.c_str(), nullptr);
    j["confidence"] = "μ = " + mean + " ± " + ci;
  }
  if (!verbose.empty()) j["verbose_score"] = verbose;
  size_t start = 0;
  while (start <= signature.size()) {
    size_t end = signature.find('|', start);
    if (end == std::string::npos) end = signature.size();
    const std::string field = signature.substr(start, end - start);
    const size_t colon = field.find(':');
    if (colon != std::string::npos) j[field.substr(0, colon)] = field.substr(colon + 1);
    start = end + 1;
  }
  return j;
}

std::string format_results_text(const std::vector<MetricScore>& scores, int width, bool score_only) {
  std::vector<std::string> lines;
  for (const MetricScore& s : scores) lines.push_back(score_only ? s.score_text(width) : s.text(width));
  // Right-align the "name|signature" parts so that the '=' signs line up.
  size_t w = 0;
  if (!score_only)
    for (const std::string& l : lines) w = std::max(w, l.find(" = "));
  std::string out;
  for (const std::string& l : lines) {
    if (!out.empty()) out += '\n';
    if (!score_only) out += std::string(w - l.find(" = "), ' ');
    out += l;
  }
  return out;
}

std::string format_results_json(const std::vector<MetricScore>& scores, int width, bool score_only) {
  std::vector<std::string> items;
  for (const MetricScore& s : scores) items.push_back(score_only ? s.score_text(width) : s.json(width).dump(1));
  if (items.size() == 1) return items[0];
  std::string out = "[\n";
  for (size_t i = 0; i < items.size(); ++i) out += items[i] + (i + 1 < items.size() ? ",\n" : "\n");
  return out + "]";
}

std::vector<std::string> read_segments(const std::string& path, const std::string& role) {
  std::error_code ec;
  CMHA_CHECK(!std::filesystem::is_directory(path, ec), role + " '" + path + "' is a directory, not a text file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + role + " '" + path + "': " + std::strerror(errno));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CMHA_CHECK(!in.bad(), "cannot read " + role + " '" + path + "'");

  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    const size_t bad = detail::find_invalid_utf8(line);
    if (bad != std::string_view::npos) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(line[bad]));
      throw Error(role + " '" + path + "' line " + std::to_string(lines.size() + 1) + " is not valid UTF-8 (byte " +
                  byte + " at byte " + std::to_string(bad + 1) + " of the line)");
    }
    // sacreBLEU strips each line's trailing whitespace as it reads it.
    const std::u32string decoded = detail::decode_utf8(line);
    lines.push_back(detail::encode_utf8(detail::py_rstrip(decoded)));
    start = end + 1;
  }
  return lines;
}

MetricInput read_metric_input(const std::string& hyp_path, const std::vector<std::string>& ref_paths) {
  CMHA_CHECK(!ref_paths.empty(), "scoring needs at least one reference file");
  const bool from_stdin = hyp_path == "-";
  // Standard input is read through its /dev path, so the reader and its errors are the same.
  const std::string hyp_name = from_stdin ? "standard input" : "hypothesis file '" + hyp_path + "'";
  MetricInput in;
  in.hyps = read_segments(from_stdin ? "/dev/stdin" : hyp_path, from_stdin ? "standard input" : "hypothesis file");
  for (const std::string& ref : ref_paths) {
    in.refs.push_back(read_segments(ref, "reference"));
    CMHA_CHECK(in.refs.back().size() == in.hyps.size(),
               hyp_name + " has " + std::to_string(in.hyps.size()) + " lines but reference '" + ref + "' has " +
                   std::to_string(in.refs.back().size()));
  }
  return in;
}

}  // namespace cmha::eval
