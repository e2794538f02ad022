#pragma once
// TensorBoard event files beside metrics.jsonl (train.tensorboard: true), so
// `tensorboard --logdir runs/` shows a cmha run's curves.
//
// The format (TensorFlow's TFRecord of tensorboard.Event protos): each record is
//   uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)
// little endian, with masked_crc32c(x) = rotr(crc32c(x), 15) + 0xa282ead8. The
// first record is an Event with file_version "brain.Event:2"; each scalar is an
// Event{wall_time = 1, step = 2, summary = 5 {value = 1 {tag = 1, simple_value = 2}}}
// (field numbers of tensorboard/compat/proto/event.proto and summary.proto).
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace cmha::run {

using Scalars = std::vector<std::pair<std::string, float>>;  // (tag, value)

// CRC-32C (Castagnoli), as TFRecord frames use it, and its masked form.
uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);
// One TFRecord: the framing above around `data`.
std::string tfrecord(const std::string& data);
// Serialised tensorboard.Event protos.
std::string file_version_event(double wall_time);
std::string scalars_event(double wall_time, int64_t step, const Scalars& values);
// The scalars of a metrics.jsonl row: every number but update/epoch/time keys,
// tagged "<split>/<key>" ({"split":"valid","bleu":21.2} -> "valid/bleu").
Scalars scalars_of_row(const nlohmann::json& row);

class TensorBoardWriter {
 public:
  // Creates DIR/events.out.tfevents.<unix seconds>.<hostname>.cmha (the name
  // TensorBoard looks for) and writes the file-version record.
  explicit TensorBoardWriter(const std::string& dir);
  const std::string& path() const { return path_; }
  // Appends one Event holding `values` at `step` and flushes, so a running
  // TensorBoard sees it.
  void write(int64_t step, const Scalars& values);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace cmha::run
