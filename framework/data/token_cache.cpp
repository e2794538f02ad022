#include "data/token_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "tensor/error.h"
#include "tensor/atomic_file.h"

namespace cmha::data {

namespace {

constexpr char kMagic[8] = {'C', 'M', 'H', 'A', 'T', 'O', 'K', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;

struct Header {
  char magic[8];
  uint32_t version, id_bytes;
  uint64_t key, count, total;
};
static_assert(sizeof(Header) <= kHeaderBytes);

bool read_header(int fd, Header* h) {
  return ::pread(fd, h, sizeof(Header), 0) == static_cast<ssize_t>(sizeof(Header)) &&
         std::memcmp(h->magic, kMagic, 8) == 0 && h->version == kVersion && h->id_bytes == 4;
}

}  // namespace

TokenCache::TokenCache(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  CMHA_CHECK(fd >= 0, "cannot open token cache '" + path + "': " + std::strerror(errno));
  struct stat st {};
  Header h{};
  const bool ok = ::fstat(fd, &st) == 0 && read_header(fd, &h);
  if (!ok) {
    ::close(fd);
    throw Error("'" + path + "' is not a cmha token cache (format " + std::to_string(kVersion) + ")");
  }
  // The header's counts are bounded by the file's size before they are
  // multiplied: a count near 2^61 would wrap `need` around to the size.
  const auto size = static_cast<uint64_t>(st.st_size);
  const bool fits = h.count < size / 8 && h.total < size / 4;
  const uint64_t need = fits ? kHeaderBytes + (h.count + 1) * 8 + h.total * 4 : 0;
  if (!fits || size != need) {
    ::close(fd);
    throw Error("token cache '" + path + "' is truncated or corrupt: " + std::to_string(st.st_size) + " bytes, " +
                "the header promises " + std::to_string(need));
  }
  map_bytes_ = static_cast<size_t>(need);
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw Error("cannot memory-map token cache '" + path + "': " + std::strerror(errno));
  }
  key_ = h.key;
  count_ = h.count;
  total_ = h.total;
  offsets_ = reinterpret_cast<const uint64_t*>(static_cast<const char*>(map_) + kHeaderBytes);
  ids_ = reinterpret_cast<const int32_t*>(offsets_ + count_ + 1);
  // Sentence i is ids[offsets[i], offsets[i+1]): the offsets must climb from
  // 0 to the id count, or a sentence would be read outside the file.
  bool ordered = offsets_[0] == 0 && offsets_[count_] == total_;
  for (uint64_t i = 0; ordered && i < count_; ++i) ordered = offsets_[i] <= offsets_[i + 1];
  if (!ordered) {
    unmap();
    throw Error("token cache '" + path + "' is corrupt: its offsets do not cover its ids in order");
  }
}

TokenCache::TokenCache(TokenCache&& o) noexcept { *this = std::move(o); }

TokenCache& TokenCache::operator=(TokenCache&& o) noexcept {
  if (this != &o) {
    unmap();
    path_ = std::move(o.path_);
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    key_ = o.key_;
    count_ = o.count_;
    total_ = o.total_;
    offsets_ = o.offsets_;
    ids_ = o.ids_;
    o.map_ = nullptr;
    o.map_bytes_ = 0;
    o.count_ = o.total_ = 0;
    o.offsets_ = nullptr;
    o.ids_ = nullptr;
  }
  return *this;
}

TokenCache::~TokenCache() { unmap(); }

void TokenCache::unmap() {
  if (map_) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
}

bool TokenCache::read_key(const std::string& path, uint64_t* key) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  Header h{};
  const bool ok = read_header(fd, &h);
  ::close(fd);
  if (ok) *key = h.key;
  return ok;
}

void TokenCache::write(const std::string& path, uint64_t key, const std::vector<std::vector<int32_t>>& sentences) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  AtomicFile f(path);
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kVersion;
  h.id_bytes = 4;
  h.key = key;
  h.count = sentences.size();
  std::vector<uint64_t> offsets(sentences.size() + 1, 0);
  for (size_t i = 0; i < sentences.size(); ++i) offsets[i + 1] = offsets[i] + sentences[i].size();
  h.total = offsets.back();
  char header[kHeaderBytes] = {};
  std::memcpy(header, &h, sizeof h);
  f.write(header, kHeaderBytes);
  f.write(offsets.data(), 8 * offsets.size());
  for (const auto& s : sentences)
    if (!s.empty()) f.write(s.data(), 4 * s.size());
  f.commit();
}

}  // namespace cmha::data
