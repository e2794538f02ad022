#include "tensorboard_reader.h"

#include <cstring>
#include <stdexcept>

namespace cmha::test {
namespace {

uint32_t crc32c_bitwise(const char* p, size_t n) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= static_cast<unsigned char>(p[i]);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1) ? 0x82f63b78u : 0);
  }
  return ~crc;
}

uint32_t masked(const char* p, size_t n) {
  const uint32_t c = crc32c_bitwise(p, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

uint64_t little_endian(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(p[i]);
  return v;
}

// A protobuf message's fields, one at a time.
struct ProtoReader {
  const char* p;
  const char* end;
  bool done() const { return p == end; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p == end) throw std::runtime_error("truncated varint");
      const auto b = static_cast<unsigned char>(*p++);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("varint too long");
  }
  const char* take(size_t n) {
    if (static_cast<size_t>(end - p) < n) throw std::runtime_error("truncated field");
    const char* at = p;
    p += n;
    return at;
  }
  // The next field's number and wire type; its payload via the accessors below.
  std::pair<int, int> key() {
    const uint64_t k = varint();
    return {static_cast<int>(k >> 3), static_cast<int>(k & 7)};
  }
  std::string bytes() {
    const size_t n = varint();
    return std::string(take(n), n);
  }
  void skip(int wire) {
    if (wire == 0) varint();
    else if (wire == 1) take(8);
    else if (wire == 2) bytes();
    else if (wire == 5) take(4);
    else throw std::runtime_error("unknown wire type " + std::to_string(wire));
  }
};

ProtoReader over(const std::string& s) { return {s.data(), s.data() + s.size()}; }

}  // namespace

TensorBoardFile read_tensorboard(const std::string& bytes) {
  TensorBoardFile file;
  size_t at = 0;
  bool first = true;
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) throw std::runtime_error("truncated record header");
    const char* h = bytes.data() + at;
    const uint64_t n = little_endian(h, 8);
    if (little_endian(h + 8, 4) != masked(h, 8)) throw std::runtime_error("length CRC mismatch");
    if (bytes.size() - at - 12 < n + 4) throw std::runtime_error("truncated record");
    const std::string data(h + 12, n);
    if (little_endian(h + 12 + n, 4) != masked(data.data(), n)) throw std::runtime_error("data CRC mismatch");
    at += 12 + n + 4;

    double wall_time = 0;
    int64_t step = 0;
    std::vector<std::pair<std::string, float>> values;
    for (ProtoReader event = over(data); !event.done();) {
      const auto [field, wire] = event.key();
      if (field == 1 && wire == 1) {
        const uint64_t bits = little_endian(event.take(8), 8);
        std::memcpy(&wall_time, &bits, 8);
      } else if (field == 2 && wire == 0) {
        step = static_cast<int64_t>(event.varint());
      } else if (field == 3 && wire == 2) {
        if (first) file.file_version = event.bytes();
        else event.bytes();
      } else if (field == 5 && wire == 2) {
        const std::string summary = event.bytes();
        for (ProtoReader s = over(summary); !s.done();) {
          const auto [sf, sw] = s.key();
          if (sf != 1 || sw != 2) {
            s.skip(sw);
            continue;
          }
          const std::string value = s.bytes();
          std::pair<std::string, float> tv;
          for (ProtoReader v = over(value); !v.done();) {
            const auto [vf, vw] = v.key();
            if (vf == 1 && vw == 2) tv.first = v.bytes();
            else if (vf == 2 && vw == 5) {
              const auto bits = static_cast<uint32_t>(little_endian(v.take(4), 4));
              std::memcpy(&tv.second, &bits, 4);
            } else v.skip(vw);
          }
          values.push_back(tv);
        }
      } else {
        event.skip(wire);
      }
    }
    for (auto& [tag, v] : values) file.scalars.push_back({wall_time, step, tag, v});
    first = false;
  }
  return file;
}

}  // namespace cmha::test
