#include "run/metrics_log.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <sstream>

#include "tensor/error.h"
#include "tensor/atomic_file.h"

namespace cmha::run {

namespace {

// The complete lines of `text` (a last line without '\n' is torn and left out).
std::vector<std::string> complete_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(text.substr(start, nl - start));
  return lines;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::vector<std::string> metrics_lines_to_keep(const std::string& text, int64_t rows, int64_t update) {
  std::vector<std::string> lines = complete_lines(text);
  if (rows >= 0) {
    if (lines.size() > static_cast<size_t>(rows)) lines.resize(static_cast<size_t>(rows));
    return lines;
  }
  struct Kept {
    std::string line;
    std::optional<int64_t> update;  // none: not a JSON row with an update
  };
  std::vector<Kept> kept;
  for (std::string& line : lines) {
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    if (!row.is_object() || !row.contains("update") || !row["update"].is_number_integer()) {
      kept.push_back({std::move(line), std::nullopt});
      continue;
    }
    const int64_t u = row["update"].get<int64_t>();
    if (u > update) continue;
    // A train row is the first row of its update in a run: rows of that update or later
    // before it were written by a run that a resume rewound.
    const bool train = row.value("split", "") == "train";
    while (!kept.empty() && kept.back().update && (*kept.back().update > u || (train && *kept.back().update == u)))
      kept.pop_back();
    kept.push_back({std::move(line), u});
  }
  std::vector<std::string> out;
  for (Kept& k : kept) out.push_back(std::move(k.line));
  return out;
}

std::string iso8601_utc(double unix_seconds) {
  const long long total_ms = std::llround(unix_seconds * 1000);
  const auto t = static_cast<std::time_t>(total_ms / 1000);
  const int ms = static_cast<int>(total_ms % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

void MetricsLog::open(const std::string& path) {
  path_ = path;
  const std::string text = read_all(path);
  rows_ = static_cast<int64_t>(complete_lines(text).size());
  out_.open(path, std::ios::app);
  CMHA_CHECK(out_.good(), "cannot write '" + path + "': " + std::strerror(errno));
  if (!text.empty() && text.back() != '\n') {  // end a torn row, so the next one is whole
    out_ << '\n';
    ++rows_;
  }
}

void MetricsLog::open_resumed(const std::string& path, int64_t rows, int64_t update) {
  const std::string text = read_all(path);
  const std::vector<std::string> kept = metrics_lines_to_keep(text, rows, update);
  std::string rewound;
  for (const std::string& l : kept) rewound += l + '\n';
  if (rewound != text) {
    write_file_atomically(path, rewound);  // a killed rewind leaves the old log whole
  }
  open(path);
}

void MetricsLog::append(nlohmann::json row) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (row.contains("loss") && row["loss"].is_number()) {
    row["loss_bits"] = row["loss"].get<double>() / std::log(2.0);
    row["loss_unit"] = "nats";
  }
  row["time"] = iso8601_utc(now);
  row["unix_time"] = std::round(now * 1000) / 1000;
  out_ << row.dump() << '\n';
  out_.flush();
  ++rows_;
}

}  // namespace cmha::run
