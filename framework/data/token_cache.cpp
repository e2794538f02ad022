#include "data/token_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "tensor/error.h"
#include "tensor/atomic_file.h"

namespace cmha::data {

namespace {

constexpr char kMagic[8] = {'C', 'M', 'H', 'A', 'T', 'O', 'K', '1'};
constexpr uint32_t kVersion = 2;  // 2: the corpus identity in the header
constexpr size_t kHeaderBytes = 64;
constexpr uint64_t kOffsetChunk = uint64_t{1} << 16;  // offsets read (by pread) at a time: 512 KiB

struct FileHeader {
  char magic[8];
  uint32_t version, id_bytes;
  uint64_t key, count, total;
  uint64_t corpus_bytes;
  int64_t corpus_mtime_ns;
  uint64_t corpus_digest;
};
static_assert(sizeof(FileHeader) == kHeaderBytes);

bool read_file_header(int fd, FileHeader* h) {
  return ::pread(fd, h, sizeof(FileHeader), 0) == static_cast<ssize_t>(sizeof(FileHeader)) &&
         std::memcmp(h->magic, kMagic, 8) == 0 && h->version == kVersion && h->id_bytes == 4;
}

}  // namespace

TokenCache::TokenCache(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  CMHA_CHECK(fd >= 0, "cannot open token cache '" + path + "': " + std::strerror(errno));
  struct stat st {};
  FileHeader h{};
  const bool ok = ::fstat(fd, &st) == 0 && read_file_header(fd, &h);
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
  if (map_ == MAP_FAILED) {
    ::close(fd);
    map_ = nullptr;
    throw Error("cannot memory-map token cache '" + path + "': " + std::strerror(errno));
  }
  fd_ = fd;
  key_ = h.key;
  count_ = h.count;
  total_ = h.total;
  offsets_ = reinterpret_cast<const uint64_t*>(static_cast<const char*>(map_) + kHeaderBytes);
  ids_ = reinterpret_cast<const int32_t*>(offsets_ + count_ + 1);
  // Sentence i is ids[offsets[i], offsets[i+1]): the offsets must climb from 0 to the id count, or a
  // sentence would be read outside the file. Checked through pread, a chunk at a time: reading them
  // through the map would keep all of them (8 bytes a sentence) in this process's resident memory.
  std::vector<uint64_t> chunk;
  uint64_t last = 0;
  bool ordered = true;
  for (uint64_t first = 0; ordered && first <= count_; first += kOffsetChunk) {
    const uint64_t n = std::min<uint64_t>(kOffsetChunk, count_ + 1 - first);
    chunk.resize(n);
    read_offsets(first, n, chunk.data());
    if (first == 0) ordered = chunk[0] == 0;
    for (uint64_t k = 0; ordered && k < n; ++k) {
      ordered = chunk[k] >= last;
      last = chunk[k];
    }
  }
  if (!ordered || last != total_) {
    unmap();
    throw Error("token cache '" + path + "' is corrupt: its offsets do not cover its ids in order");
  }
}

void TokenCache::read_at(uint64_t at, size_t bytes, void* out, const char* what) const {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t got = ::pread(fd_, static_cast<char*>(out) + done, bytes - done, static_cast<off_t>(at + done));
    if (got < 0 && errno == EINTR) continue;
    CMHA_CHECK(got > 0, std::string("cannot read the ") + what + " of token cache '" + path_ + "': " +
                            (got < 0 ? std::string(std::strerror(errno)) : std::string("it was truncated")));
    done += static_cast<size_t>(got);
  }
}

void TokenCache::read_offsets(uint64_t first, uint64_t n, uint64_t* out) const {
  read_at(kHeaderBytes + first * 8, static_cast<size_t>(n) * 8, out, "offsets");
}

void TokenCache::read_ids(int64_t i, std::vector<int32_t>& out) const {
  CMHA_CHECK(i >= 0 && i < size(), "token cache '" + path_ + "': sentence " + std::to_string(i) +
                                       " is outside its " + std::to_string(size()));
  uint64_t range[2];
  read_offsets(static_cast<uint64_t>(i), 2, range);
  // The offsets were checked in order when the file was opened; a file changed since is caught here.
  CMHA_CHECK(range[0] <= range[1] && range[1] <= total_,
             "token cache '" + path_ + "' changed on disk while in use (sentence " + std::to_string(i) + ")");
  out.resize(static_cast<size_t>(range[1] - range[0]));
  if (!out.empty())
    read_at(kHeaderBytes + (count_ + 1) * 8 + range[0] * 4, out.size() * 4, out.data(), "ids");
}

void TokenCache::read_lengths(int64_t first, int64_t n, int32_t* out) const {
  CMHA_CHECK(first >= 0 && n >= 0 && first + n <= size(),
             "token cache '" + path_ + "': sentences [" + std::to_string(first) + ", " + std::to_string(first + n) +
                 ") are outside its " + std::to_string(size()));
  std::vector<uint64_t> chunk;
  for (int64_t done = 0; done < n; done += static_cast<int64_t>(kOffsetChunk)) {
    const int64_t m = std::min<int64_t>(static_cast<int64_t>(kOffsetChunk), n - done);
    chunk.resize(static_cast<size_t>(m) + 1);
    read_offsets(static_cast<uint64_t>(first + done), static_cast<uint64_t>(m) + 1, chunk.data());
    for (int64_t k = 0; k < m; ++k)  // a sentence of 2^31 ids or more (none is) would read as the largest int32
      out[done + k] = static_cast<int32_t>(std::min<uint64_t>(chunk[k + 1] - chunk[k], INT32_MAX));
  }
}

TokenCache::TokenCache(TokenCache&& o) noexcept { *this = std::move(o); }

TokenCache& TokenCache::operator=(TokenCache&& o) noexcept {
  if (this != &o) {
    unmap();
    path_ = std::move(o.path_);
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    fd_ = o.fd_;
    key_ = o.key_;
    count_ = o.count_;
    total_ = o.total_;
    offsets_ = o.offsets_;
    ids_ = o.ids_;
    o.map_ = nullptr;
    o.map_bytes_ = 0;
    o.fd_ = -1;
    o.count_ = o.total_ = 0;
    o.offsets_ = nullptr;
    o.ids_ = nullptr;
  }
  return *this;
}

TokenCache::~TokenCache() { unmap(); }

void TokenCache::unmap() {
  if (map_) ::munmap(map_, map_bytes_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  map_ = nullptr;
  map_bytes_ = 0;
}

bool TokenCache::read_key(const std::string& path, uint64_t* key) {
  const std::optional<Header> h = read_header(path);
  if (h) *key = h->key;
  return h.has_value();
}

std::optional<TokenCache::Header> TokenCache::read_header(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  FileHeader h{};
  const bool ok = read_file_header(fd, &h);
  ::close(fd);
  if (!ok) return std::nullopt;
  TokenCache::Header out;
  out.key = h.key;
  out.count = h.count;
  out.total = h.total;
  out.corpus = {h.corpus_bytes, h.corpus_mtime_ns, h.corpus_digest};
  return out;
}

bool TokenCache::rewrite_corpus_identity(const std::string& path, const FileIdentity& corpus) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  FileHeader h{};
  bool ok = read_file_header(fd, &h);
  if (ok) {
    h.corpus_bytes = corpus.bytes;
    h.corpus_mtime_ns = corpus.mtime_ns;
    h.corpus_digest = corpus.digest;
    // One 64-byte write at offset 0: a reader sees the old header or the new one.
    ok = ::pwrite(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h);
  }
  ::close(fd);
  return ok;
}

void TokenCache::write(const std::string& path, uint64_t key, const std::vector<std::vector<int32_t>>& sentences,
                       const FileIdentity& corpus) {
  TokenCacheWriter w(path, sentences.size());
  for (const auto& s : sentences) w.append(s.data(), s.size());
  w.finish(key, corpus);
}

TokenCacheWriter::TokenCacheWriter(const std::string& path, uint64_t count) : path_(path), count_(count) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  file_ = std::make_unique<AtomicFile>(path);
  offsets_.reserve(count + 1);
  offsets_.push_back(0);
  // The ids follow the header and the offsets, which finish() writes over these zeros.
  const std::vector<char> zeros(size_t{1} << 16, 0);
  for (uint64_t left = kHeaderBytes + (count + 1) * 8; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, zeros.size()));
    file_->write(zeros.data(), n);
    left -= n;
  }
}

TokenCacheWriter::~TokenCacheWriter() = default;

void TokenCacheWriter::append(const int32_t* ids, size_t n) {
  CMHA_CHECK(appended() < count_, "token cache '" + path_ + "': more sentences than the " + std::to_string(count_) +
                                      " announced");
  if (n > 0) file_->write(ids, 4 * n);
  offsets_.push_back(offsets_.back() + n);
}

void TokenCacheWriter::finish(uint64_t key, const FileIdentity& corpus) {
  CMHA_CHECK(appended() == count_, "token cache '" + path_ + "': " + std::to_string(appended()) +
                                       " sentences written, " + std::to_string(count_) + " announced");
  FileHeader h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kVersion;
  h.id_bytes = 4;
  h.key = key;
  h.count = count_;
  h.total = offsets_.back();
  h.corpus_bytes = corpus.bytes;
  h.corpus_mtime_ns = corpus.mtime_ns;
  h.corpus_digest = corpus.digest;
  file_->write_at(0, &h, kHeaderBytes);
  file_->write_at(kHeaderBytes, offsets_.data(), 8 * offsets_.size());
  file_->commit();
  file_.reset();
}

}  // namespace cmha::data
