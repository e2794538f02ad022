#include "run/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "tensor/error.h"

namespace cmha::run {
namespace {

// The reflected CRC-32C table (polynomial 0x82f63b78).
const std::array<uint32_t, 256>& crc32c_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82f63b78u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_little_endian(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Protobuf wire format: key = field << 3 | wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
void put_double(std::string& out, int field, double v) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | 1);
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_little_endian(out, bits, 8);
}
void put_float(std::string& out, int field, float v) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | 5);
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_little_endian(out, bits, 4);
}
void put_int64(std::string& out, int field, int64_t v) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | 0);
  put_varint(out, static_cast<uint64_t>(v));  // int64: negative numbers as 10-byte two's complement
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | 2);
  put_varint(out, bytes.size());
  out += bytes;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto& table = crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& data) {
  std::string out, length;
  put_little_endian(length, data.size(), 8);
  out += length;
  put_little_endian(out, masked_crc32c(length.data(), length.size()), 4);
  out += data;
  put_little_endian(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

std::string file_version_event(double wall_time) {
  std::string event;
  put_double(event, 1, wall_time);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

std::string scalars_event(double wall_time, int64_t step, const Scalars& values) {
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    put_bytes(value, 1, tag);
    put_float(value, 2, v);
    put_bytes(summary, 1, value);
  }
  std::string event;
  put_double(event, 1, wall_time);
  if (step != 0) put_int64(event, 2, step);  // proto3 leaves a zero out
  put_bytes(event, 5, summary);
  return event;
}

Scalars scalars_of_row(const nlohmann::json& row) {
  const std::string split = row.value("split", "train");
  Scalars out;
  for (const auto& [key, v] : row.items()) {
    if (!v.is_number() || key == "update" || key == "epoch" || key == "time" || key == "unix_time") continue;
    out.emplace_back(split + "/" + key, v.get<float>());
  }
  return out;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  const double now = unix_seconds();
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(static_cast<long long>(now)) + "." +
                                         host + ".cmha"))
              .string();
  out_.open(path_, std::ios::binary | std::ios::app);
  CMHA_CHECK(out_.good(), "train.tensorboard: cannot write '" + path_ + "'");
  out_ << tfrecord(file_version_event(now));
  out_.flush();
}

void TensorBoardWriter::write(int64_t step, const Scalars& values) {
  if (values.empty()) return;
  out_ << tfrecord(scalars_event(unix_seconds(), step, values));
  out_.flush();
  CMHA_CHECK(out_.good(), "train.tensorboard: cannot write '" + path_ + "' (is the disk full?)");
}

}  // namespace cmha::run
