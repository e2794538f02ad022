#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "tensor/error.h"
#include "tensor/regular_file.h"

namespace cmha::data {
namespace {

constexpr uint8_t kUnsignedByte = 0x08;
// 16 GiB: far above any IDX data set; a larger header is corruption, and
// trusting it would be an allocation failure instead of a clear message.
constexpr uint64_t kMaxBytes = uint64_t{1} << 34;

std::string quoted(const std::string& path) { return "'" + path + "'"; }

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads up to n bytes; returns how many were read, throws on a zlib error.
size_t read_some(gzFile f, void* dst, size_t n, const std::string& path) {
  size_t done = 0;
  auto* out = static_cast<uint8_t*>(dst);
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, size_t{1} << 30));
    const int got = gzread(f, out + done, chunk);
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      throw Error("cannot read IDX file " + quoted(path) + ": the gzip data is corrupt (" + msg + ")");
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  // A gzip stream cut short reads as a short count with Z_BUF_ERROR set.
  return done;
}

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

IdxBytes read_idx_u8(const std::string& path, int rank) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("cannot read IDX file " + quoted(path) + ": it is a directory");
  refuse_special_file(path, "IDX file");
  errno = 0;
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) {
    throw Error("cannot open IDX file " + quoted(path) + ": " +
                (errno ? std::strerror(errno) : "out of memory"));
  }
  gzbuffer(f.get(), 1 << 17);

  uint8_t magic[4];
  if (read_some(f.get(), magic, 4, path) < 4)
    throw Error("IDX file " + quoted(path) + " is truncated: it is shorter than the 4-byte magic number");
  if (magic[0] != 0 || magic[1] != 0) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%02x%02x%02x%02x", magic[0], magic[1], magic[2], magic[3]);
    throw Error(quoted(path) + " is not an IDX file: its magic number is " + hex +
                " where 0x0000 followed by a type code and a rank was expected");
  }
  if (magic[2] != kUnsignedByte) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", magic[2]);
    throw Error("IDX file " + quoted(path) + " has element type code " + hex +
                ", but only unsigned bytes (0x08) are supported");
  }
  if (magic[3] != rank) {
    throw Error("IDX file " + quoted(path) + " has " + std::to_string(magic[3]) + " dimension(s) where " +
                std::to_string(rank) + " were expected");
  }

  IdxBytes out;
  std::vector<uint8_t> header(static_cast<size_t>(rank) * 4);
  if (read_some(f.get(), header.data(), header.size(), path) < header.size())
    throw Error("IDX file " + quoted(path) + " is truncated: its header ends before the " + std::to_string(rank) +
                " dimension sizes");
  uint64_t total = 1;
  for (int d = 0; d < rank; ++d) {
    const uint32_t size = big_endian_u32(header.data() + 4 * d);
    out.dims.push_back(size);
    total *= size;
    if (total > kMaxBytes)
      throw Error("IDX file " + quoted(path) + " has a corrupt header: its sizes " + shape_str(out.dims) +
                  "... describe more than 16 GiB of data");
  }

  // The data grows as it is read, in chunks that double from 1 MiB: a header
  // that promises more than follows (16 GiB in a 40-byte file) allocates no
  // more than twice what is there.
  size_t got = 0;
  while (got < total) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(total - got, std::max<size_t>(got, size_t{1} << 20)));
    out.values.resize(got + want);
    const size_t n = read_some(f.get(), out.values.data() + got, want, path);
    got += n;
    if (n < want) break;
  }
  if (got < total) {
    throw Error("IDX file " + quoted(path) + " is truncated: its header " + shape_str(out.dims) + " promises " +
                std::to_string(total) + " bytes of data but only " + std::to_string(got) + " follow");
  }
  uint8_t extra;
  if (read_some(f.get(), &extra, 1, path) != 0) {
    throw Error("IDX file " + quoted(path) + " is corrupt: more data follows the " + std::to_string(total) +
                " bytes its header " + shape_str(out.dims) + " describes");
  }
  return out;
}

Tensor read_idx_images(const std::string& path) {
  IdxBytes raw = read_idx_u8(path, 3);
  Tensor t = Tensor::empty(raw.dims, DType::f32);
  float* dst = t.data<float>();
  const uint8_t* src = raw.values.data();
  const int64_t n = static_cast<int64_t>(raw.values.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]) * (1.0f / 255.0f);
  return t;
}

Tensor read_idx_labels(const std::string& path) {
  IdxBytes raw = read_idx_u8(path, 1);
  Tensor t = Tensor::empty(raw.dims, DType::i64);
  int64_t* dst = t.data<int64_t>();
  for (size_t i = 0; i < raw.values.size(); ++i) dst[i] = raw.values[i];
  return t;
}

LabelledImages load_idx_split(const std::string& images_path, const std::string& labels_path) {
  LabelledImages out{read_idx_images(images_path), read_idx_labels(labels_path)};
  if (out.images.size(0) != out.labels.size(0)) {
    throw Error("IDX files do not match: " + quoted(images_path) + " holds " + std::to_string(out.images.size(0)) +
                " images but " + quoted(labels_path) + " holds " + std::to_string(out.labels.size(0)) + " labels");
  }
  return out;
}

void write_idx_u8(const std::string& path, const std::vector<int64_t>& dims, const std::vector<uint8_t>& values,
                  bool gzip) {
  CMHA_CHECK(dims.size() < 256, "cannot write IDX file " + quoted(path) + ": rank " + std::to_string(dims.size()) +
                                    " is above the format's limit of 255");
  std::vector<uint8_t> bytes = {0, 0, kUnsignedByte, static_cast<uint8_t>(dims.size())};
  int64_t total = 1;
  for (int64_t d : dims) {
    CMHA_CHECK(d >= 0 && d <= 0xffffffffLL, "cannot write IDX file " + quoted(path) + ": size " +
                                                std::to_string(d) + " does not fit the format");
    total *= d;
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(d >> shift));
  }
  CMHA_CHECK(total == static_cast<int64_t>(values.size()),
             "cannot write IDX file " + quoted(path) + ": sizes " + shape_str(dims) + " need " + std::to_string(total) +
                 " values, got " + std::to_string(values.size()));
  bytes.insert(bytes.end(), values.begin(), values.end());

  errno = 0;
  GzFile f(gzopen(path.c_str(), gzip ? "wb6" : "wbT"));  // "T": plain, no gzip wrapper
  if (!f) throw Error("cannot create IDX file " + quoted(path) + ": " + (errno ? std::strerror(errno) : "out of memory"));
  size_t done = 0;
  while (done < bytes.size()) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes.size() - done, size_t{1} << 30));
    const int put = gzwrite(f.get(), bytes.data() + done, chunk);
    if (put <= 0) throw Error("cannot write IDX file " + quoted(path) + ": " + std::strerror(errno ? errno : EIO));
    done += static_cast<size_t>(put);
  }
  if (gzclose(f.release()) != Z_OK) throw Error("cannot write IDX file " + quoted(path) + ": closing it failed");
}

}  // namespace cmha::data
