// sacreBLEU's output of a paired test (utils.py _format_score_lines and
// print_results_table, with tabulate's fancy_grid layout), without colours.
#include "eval/significance_report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tensor/error.h"

namespace cmha::eval {

namespace {

// Characters as tabulate counts them (one per code point).
size_t text_width(const std::string& s) {
  size_t n = 0;
  for (const unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = s.find('\n', start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// Python's format(s, "^w") (the extra space on the right) or right-aligned.
std::string align(const std::string& s, size_t width, bool right) {
  const size_t pad = width > text_width(s) ? width - text_width(s) : 0;
  if (right) return std::string(pad, ' ') + s;
  return std::string(pad / 2, ' ') + s + std::string(pad - pad / 2, ' ');
}

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// tabulate(..., tablefmt="fancy_grid", colalign=("right",), stralign="center").
std::string fancy_grid(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows) {
  const size_t cols = headers.size();
  std::vector<size_t> widths(cols);
  for (size_t c = 0; c < cols; ++c) {
    widths[c] = text_width(headers[c]) + 2;  // tabulate's MIN_PADDING for headers
    for (const auto& row : rows)
      for (const std::string& line : split_lines(row[c])) widths[c] = std::max(widths[c], text_width(line));
  }
  const auto rule = [&](const char* left, const char* fill, const char* mid, const char* right) {
    std::string out = left;
    for (size_t c = 0; c < cols; ++c) out += repeat(fill, widths[c] + 2) + (c + 1 < cols ? mid : right);
    return out + "\n";
  };
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "│";
    for (size_t c = 0; c < cols; ++c) out += " " + align(cells[c], widths[c], c == 0) + " │";
    return out + "\n";
  };
  std::string out = rule("╒", "═", "╤", "╕") + line(headers) + rule("╞", "═", "╪", "╡");
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<std::vector<std::string>> cell_lines(cols);
    size_t height = 0;
    for (size_t c = 0; c < cols; ++c) {
      cell_lines[c] = split_lines(rows[r][c]);
      height = std::max(height, cell_lines[c].size());
    }
    for (size_t h = 0; h < height; ++h) {
      std::vector<std::string> cells(cols);
      for (size_t c = 0; c < cols; ++c) cells[c] = h < cell_lines[c].size() ? cell_lines[c][h] : "";
      out += line(cells);
    }
    out += r + 1 < rows.size() ? rule("├", "─", "┼", "┤") : rule("╘", "═", "╧", "╛");
  }
  return out;
}

std::string format_p(double p) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "(p = %.4f)", p);
  return std::string(buf) + (p > 0.05 ? "" : "*");
}

}  // namespace

std::string format_paired_text(const PairedReport& report, int width) {
  CMHA_CHECK(!report.results.empty() && !report.results[0].empty(), "a paired test report needs results");
  const size_t n_metrics = report.results[0].size();
  std::vector<std::string> headers = {"System"};
  for (size_t m = 0; m < n_metrics; ++m)
    headers.push_back(report.results[0][m].score.name + (report.bootstrap ? " (μ ± 95% CI)" : ""));
  std::vector<std::vector<std::string>> rows;
  for (size_t s = 0; s < report.systems.size(); ++s) {
    std::vector<std::string> row = {report.systems[s]};
    for (const TestResult& r : report.results[s]) {
      std::string cell = format_score(r.score.score, width);
      if (r.mean) cell += " (" + format_score(*r.mean, width) + " ± " + format_score(*r.ci, width) + ")";
      if (r.p_value) cell += "\n" + format_p(*r.p_value);
      row.push_back(cell);
    }
    rows.push_back(row);
  }
  std::string out = fancy_grid(headers, rows) + "\n";

  const std::string msg = report.bootstrap
                              ? "Paired bootstrap resampling test with " + std::to_string(report.samples) +
                                    " resampling trials"
                              : "Paired approximate randomization test with " + std::to_string(report.samples) +
                                    " trials";
  const std::string dashes(msg.size(), '-');
  out += dashes + "\n" + msg + "\n" + dashes + "\n";
  out += " - Each system is pairwise compared to " + report.systems[0] + ".\n";
  out += report.bootstrap
             ? "   Actual system score / bootstrap estimated true mean / 95% CI are provided for each metric.\n"
             : "   Actual system score is provided for each metric.\n";
  out +=
      "\n"
      " - Null hypothesis: the system and the baseline translations are essentially\n"
      "   generated by the same underlying process. For a given system and the baseline,\n"
      "   the p-value is roughly the probability of the absolute score difference (delta)\n"
      "   or higher occurring due to chance, under the assumption that the null hypothesis is correct.\n"
      "\n"
      " - Assuming a significance threshold of 0.05, the null hypothesis can be rejected\n"
      "   for p-values < 0.05 (marked with \"*\"). This means that the delta is unlikely to be attributed\n"
      "   to chance, hence the system is significantly \"different\" than the baseline.\n"
      "   Otherwise, the p-values are highlighted in red.\n"
      "\n"
      " - NOTE: Significance does not tell whether a system is \"better\" than the baseline but rather\n"
      "   emphasizes the \"difference\" of the systems in terms of the replicability of the delta.\n"
      "\n"
      "-----------------\n"
      "Metric signatures\n"
      "-----------------";
  for (size_t m = 0; m < n_metrics; ++m) {
    const MetricScore& sc = report.results[0][m].score;
    std::string name = sc.name;
    if (name.size() < 10) name += std::string(10 - name.size(), ' ');
    out += "\n - " + name + " " + sc.signature;
  }
  return out;
}

std::string format_paired_json(const PairedReport& report) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  const auto number = [](const std::optional<double>& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
  };
  for (size_t s = 0; s < report.systems.size(); ++s) {
    nlohmann::ordered_json item;
    item["system"] = report.systems[s];
    for (const TestResult& r : report.results[s])
      item[r.score.name] = {{"score", r.score.score}, {"p_value", number(r.p_value)}, {"mean", number(r.mean)},
                            {"ci", number(r.ci)}};
    out.push_back(item);
  }
  // json.dumps' default ensure_ascii: non-ASCII characters as \u escapes.
  return out.dump(4, ' ', true);
}

}  // namespace cmha::eval
