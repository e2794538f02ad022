#include "study/sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "run/options.h"
#include "run/run_dir.h"
#include "tensor/error.h"

namespace cmha::study {

namespace {

std::string leaf(const std::string& key) { return key.substr(key.rfind('.') + 1); }

// A value as a directory-name part: path separators and spaces become '_'.
std::string name_safe(std::string v) {
  for (char& c : v)
    if (c == '/' || c == ' ' || c == '\\') c = '_';
  return v;
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::string table_number(double v) {
  char buf[64];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, std::fabs(v) >= 10 ? "%.2f" : "%.4f", v);
  return buf;
}

GridAxis parse_grid_axis(const std::string& text) {
  const size_t eq = text.find('=');
  CMHA_CHECK(eq != std::string::npos && eq > 0, "--grid needs KEY=V1,V2,..., got '" + text + "'");
  GridAxis axis;
  axis.key = text.substr(0, eq);
  CMHA_CHECK(run::find_option(axis.key), "--grid key '" + axis.key + "' is not a recipe key (did you mean '" +
                                        run::nearest_option(axis.key) + "'?)");
  const std::string list = text.substr(eq + 1);
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string v = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    CMHA_CHECK(!v.empty(), "--grid " + axis.key + " has an empty value in '" + list + "'");
    axis.values.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return axis;
}

GridAxis seed_axis(long long count, long long first_seed) {
  CMHA_CHECK(count >= 1, "--seeds needs a number of replicates of 1 or more, got " + std::to_string(count));
  CMHA_CHECK(count <= 1000, "--seeds " + std::to_string(count) + " is more replicates than a sweep can train (at most 1000)");
  CMHA_CHECK(first_seed >= 0, "train.seed must be 0 or more for --seeds, got " + std::to_string(first_seed));
  GridAxis axis{kSeedKey, {}};
  for (long long k = 0; k < count; ++k) axis.values.push_back(std::to_string(first_seed + k));
  return axis;
}

int seed_axis_index(const std::vector<GridAxis>& axes) {
  for (size_t a = 0; a < axes.size(); ++a)
    if (axes[a].key == kSeedKey) return static_cast<int>(a);
  return -1;
}

std::vector<GridPoint> expand_grid(const std::vector<GridAxis>& axes) {
  std::map<std::string, int> leaves;
  std::set<std::string> keys;
  for (const auto& a : axes) {
    CMHA_CHECK(keys.insert(a.key).second, "--grid " + a.key + " is given twice; list all its values in one --grid");
    ++leaves[leaf(a.key)];
  }
  std::vector<GridPoint> points(1);
  for (const auto& a : axes) {
    const std::string label = leaves[leaf(a.key)] > 1 ? a.key : leaf(a.key);
    std::vector<GridPoint> next;
    for (const auto& p : points)
      for (const auto& v : a.values) {
        GridPoint q = p;
        q.name += (q.name.empty() ? "" : "_") + label + "-" + name_safe(v);
        q.overrides.push_back(a.key + "=" + v);
        q.values.push_back(v);
        next.push_back(std::move(q));
      }
    points = std::move(next);
  }
  return axes.empty() ? std::vector<GridPoint>{} : points;
}

std::string stale_run_reason(const std::string& dir, const run::Recipe& wanted) {
  const std::string stored = (std::filesystem::path(dir) / "recipe.yaml").string();
  if (!std::filesystem::exists(stored)) {
    const std::vector<std::string> run = run::previous_run_files(dir);
    return run.empty() ? "" : "it holds a run (" + run.front() + ") but no recipe.yaml that says of which recipe";
  }
  const run::Recipe there = run::Recipe::load_stored(stored);
  const std::string key = run::first_difference(
      there, wanted, {"train.save_dir", "train.threads", "train.log_every", "data.workers", "data.prefetch"});
  if (key.empty()) return "";
  auto value = [&](const run::Recipe& r) { return r.reads(key) ? r.text(key) : "not read"; };
  return "its recipe.yaml has " + key + " " + value(there) + ", this point " + value(wanted);
}

std::vector<std::string> result_columns(const std::vector<SweepRow>& rows, const std::string& metric) {
  std::set<std::string> others;
  for (const auto& r : rows) {
    CMHA_CHECK(r.results.contains(metric) && r.results[metric].is_number(),
               "run '" + r.point.name + "' has no numeric '" + metric + "' in its results.json (it has: " +
                   r.results.dump() + ")");
    for (auto it = r.results.begin(); it != r.results.end(); ++it)
      if (it.value().is_number() && it.key() != metric) others.insert(it.key());
  }
  std::vector<std::string> cols{metric};
  cols.insert(cols.end(), others.begin(), others.end());
  return cols;
}

std::string sweep_csv(const std::vector<GridAxis>& axes, const std::vector<SweepRow>& rows, const std::string& metric) {
  const auto cols = result_columns(rows, metric);
  std::string out = "name";
  for (const auto& a : axes) out += "," + csv_cell(a.key);
  for (const auto& c : cols) out += "," + csv_cell(c);
  out += "\n";
  for (const auto& r : rows) {
    out += csv_cell(r.point.name);
    for (const auto& v : r.point.values) out += "," + csv_cell(v);
    for (const auto& c : cols) out += "," + (r.results.contains(c) && r.results[c].is_number() ? r.results[c].dump() : "");
    out += "\n";
  }
  return out;
}

namespace {

std::string markdown_per_run(const std::vector<GridAxis>& axes, const std::vector<SweepRow>& rows,
                             const std::vector<std::string>& cols) {
  std::string head = "|", rule = "|";
  for (const auto& a : axes) head += " " + a.key + " |", rule += "---|";
  for (const auto& c : cols) head += " " + c + " |", rule += "---:|";
  std::string out = head + "\n" + rule + "\n";
  for (const auto& r : rows) {
    out += "|";
    for (const auto& v : r.point.values) out += " " + v + " |";
    for (const auto& c : cols)
      out += " " + (r.results.contains(c) && r.results[c].is_number() ? table_number(r.results[c].get<double>()) : "") + " |";
    out += "\n";
  }
  return out;
}

// mean ± sample standard deviation of the values a column has over a point's seeds; the value alone
// (an integer as one) where the seeds agree, as counts like "samples" do.
std::string mean_std(const std::vector<double>& v) {
  if (v.empty()) return "";
  if (std::all_of(v.begin(), v.end(), [&](double x) { return x == v.front(); })) return table_number(v.front());
  double mean = 0.0;
  for (const double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double ss = 0.0;
  for (const double x : v) ss += (x - mean) * (x - mean);
  const double sd = std::sqrt(ss / static_cast<double>(v.size() - 1));
  char buf[64];
  std::snprintf(buf, sizeof buf, std::fabs(mean) >= 10 ? "%.2f ± %.2f" : "%.4f ± %.4f", mean, sd);
  return buf;
}

}  // namespace

std::string sweep_markdown(const std::vector<GridAxis>& axes, const std::vector<SweepRow>& rows,
                           const std::string& metric) {
  const auto cols = result_columns(rows, metric);
  const int seed = seed_axis_index(axes);
  if (seed < 0) return markdown_per_run(axes, rows, cols);
  // The points without their seed, in the order they first appear.
  std::vector<std::vector<std::string>> groups;
  std::map<std::vector<std::string>, std::vector<const SweepRow*>> members;
  for (const auto& r : rows) {
    std::vector<std::string> values = r.point.values;
    values.erase(values.begin() + seed);
    if (!members.count(values)) groups.push_back(values);
    members[values].push_back(&r);
  }
  std::string head = "|", rule = "|";
  for (size_t a = 0; a < axes.size(); ++a)
    if (static_cast<int>(a) != seed) head += " " + axes[a].key + " |", rule += "---|";
  head += " n |", rule += "---:|";
  for (const auto& c : cols) head += " " + c + " (mean ± std) |", rule += "---:|";
  std::string out = head + "\n" + rule + "\n";
  for (const auto& g : groups) {
    const auto& runs = members[g];
    out += "|";
    for (const auto& v : g) out += " " + v + " |";
    out += " " + std::to_string(runs.size()) + " |";
    for (const auto& c : cols) {
      std::vector<double> v;
      for (const SweepRow* r : runs)
        if (r->results.contains(c) && r->results[c].is_number()) v.push_back(r->results[c].get<double>());
      out += " " + mean_std(v) + " |";
    }
    out += "\n";
  }
  return out;
}

}  // namespace cmha::study
