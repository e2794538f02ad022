#pragma once
// <run dir>/metrics.jsonl: one JSON object a line, appended by rank 0.
//
// Every row has "split" ("train" or "valid"), "update", "epoch" (1-based: the
// epoch the update belongs to, the same numbering for both splits), "time"
// (ISO 8601 UTC, milliseconds) and "unix_time" (seconds since the epoch).
// Losses are in nats per unit ("loss_unit": "nats"), with "loss_bits" the
// same loss in base 2 (fairseq's unit). Train rows: loss, loss_bits, top1
// (% of units predicted right), lr, gnorm, tokens_per_s or samples_per_s
// (training time only), skipped_updates. Valid rows: the task's metrics
// (loss, top1, ..., bleu) and loss_bits.
//
// A checkpoint records how many rows had been written when it was saved
// ("metrics_rows"), so --resume rewinds the file to exactly that row: rows
// of updates the resumed run will redo are not kept twice.
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cmha::run {

// The lines of metrics.jsonl (its whole `text`) a resumed run keeps, in
// order, without their '\n'. `rows` >= 0: the checkpoint's "metrics_rows",
// the first `rows` lines. `rows` < 0 (a checkpoint from before that field):
// the rows of updates up to `update`, and of rows an earlier resume wrote
// twice, the later ones (a train row of an update at or below the rows before
// it starts a resumed run: those rows are dropped). Lines that are not JSON
// rows stay where they are; a torn last line (no '\n': a process killed
// mid-write) is dropped.
std::vector<std::string> metrics_lines_to_keep(const std::string& text, int64_t rows, int64_t update);

// "2025-05-01T12:34:56.789Z" for seconds since the Unix epoch.
std::string iso8601_utc(double unix_seconds);

class MetricsLog {
 public:
  // Opens `path` for appending (rows already there are counted).
  void open(const std::string& path);
  // Opens `path` for a resumed run: rewinds it first (metrics_lines_to_keep),
  // through a temporary file renamed over it, so a crash leaves either the old
  // or the new file whole. A missing file is created.
  void open_resumed(const std::string& path, int64_t rows, int64_t update);
  // Appends `row` with "time" and "unix_time" set, flushed.
  void append(nlohmann::json row);
  // Rows in the file (those kept plus those appended).
  int64_t rows() const { return rows_; }
  bool is_open() const { return out_.is_open(); }

 private:
  std::string path_;
  std::ofstream out_;
  int64_t rows_ = 0;
};

}  // namespace cmha::run
