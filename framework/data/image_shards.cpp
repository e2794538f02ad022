#include "data/image_shards.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tensor/atomic_file.h"
#include "tensor/error.h"

namespace cmha::data {

namespace fs = std::filesystem;

namespace {

constexpr char kIndexMagic[8] = {'C', 'M', 'H', 'A', 'S', 'H', 'I', '1'};
constexpr const char* kSetFormat = "cmha-shards-1";
constexpr size_t kBlock = 512;  // tar's record unit

// A ustar header for a regular file: NAME of SIZE bytes.
void tar_header(const std::string& name, uint64_t size, char out[kBlock]) {
  std::memset(out, 0, kBlock);
  std::memcpy(out, name.data(), std::min<size_t>(name.size(), 99));
  std::snprintf(out + 100, 8, "%07o", 0644);                                      // mode
  std::snprintf(out + 108, 8, "%07o", 0);                                         // uid
  std::snprintf(out + 116, 8, "%07o", 0);                                         // gid
  std::snprintf(out + 124, 12, "%011llo", static_cast<unsigned long long>(size));  // size
  std::snprintf(out + 136, 12, "%011o", 0);                                       // mtime: 0, so a pack is reproducible
  out[156] = '0';                                                                 // a regular file
  std::memcpy(out + 257, "ustar", 6);                                             // magic, NUL-terminated
  std::memcpy(out + 263, "00", 2);                                                // version
  std::memset(out + 148, ' ', 8);  // the checksum counts its own field as spaces
  unsigned sum = 0;
  for (size_t i = 0; i < kBlock; ++i) sum += static_cast<unsigned char>(out[i]);
  std::snprintf(out + 148, 8, "%06o", sum);  // six digits, NUL, then the space left from above
}

}  // namespace

std::string shard_index_path(const std::string& tar_path) {
  return fs::path(tar_path).replace_extension(".idx").string();
}

ShardSetInfo read_shard_set(const std::string& dir) {
  const std::string path = (fs::path(dir) / kShardSetFile).string();
  std::ifstream in(path);
  CMHA_CHECK(in.good(), "'" + path + "' does not exist: '" + dir + "' is not a folder of shards (cmha pack writes one)");
  ShardSetInfo set;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    CMHA_CHECK(j.value("format", "") == kSetFormat, "'" + path + "' is not a cmha shard set (format " +
                                                        std::string(kSetFormat) + ")");
    set.classes = j.at("classes").get<std::vector<std::string>>();
    set.samples = j.at("samples").get<int64_t>();
    set.max_side = j.value("max_side", int64_t{0});
    set.quality = j.value("quality", int64_t{0});
    set.source = j.value("source", "");
    for (const auto& s : j.at("shards"))
      set.shards.push_back({s.at("file").get<std::string>(), s.at("samples").get<int64_t>(),
                            s.at("tar_bytes").get<uint64_t>()});
  } catch (const nlohmann::json::exception& e) {
    throw Error("'" + path + "' is not a valid shard set: " + e.what());
  }
  int64_t total = 0;
  for (const ShardInfo& s : set.shards) {
    CMHA_CHECK(s.samples > 0 && s.file.find('/') == std::string::npos && !s.file.empty(),
               "'" + path + "' lists shard '" + s.file + "' with " + std::to_string(s.samples) + " samples");
    total += s.samples;
  }
  CMHA_CHECK(!set.classes.empty() && !set.shards.empty() && total == set.samples,
             "'" + path + "' is inconsistent: " + std::to_string(set.classes.size()) + " classes, " +
                 std::to_string(set.shards.size()) + " shards of " + std::to_string(total) + " samples, " +
                 std::to_string(set.samples) + " promised");
  return set;
}

void write_shard_set(const std::string& dir, const ShardSetInfo& set) {
  nlohmann::json shards = nlohmann::json::array();
  for (const ShardInfo& s : set.shards)
    shards.push_back({{"file", s.file}, {"samples", s.samples}, {"tar_bytes", s.tar_bytes}});
  const nlohmann::json j = {{"format", kSetFormat}, {"samples", set.samples}, {"max_side", set.max_side},
                            {"quality", set.quality}, {"source", set.source}, {"classes", set.classes},
                            {"shards", shards}};
  write_file_atomically((fs::path(dir) / kShardSetFile).string(), j.dump(1) + "\n");
}

std::vector<ShardMember> read_shard_index(const std::string& path, int64_t expected) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  CMHA_CHECK(fd >= 0, "cannot open shard index '" + path + "': " + std::strerror(errno));
  struct stat st {};
  char head[16] = {};
  const bool ok = ::fstat(fd, &st) == 0 && ::pread(fd, head, 16, 0) == 16 && std::memcmp(head, kIndexMagic, 8) == 0;
  uint64_t count = 0;
  std::memcpy(&count, head + 8, 8);
  const auto size = static_cast<uint64_t>(st.st_size);
  // The count is bounded by the file's size before it sizes anything.
  const bool fits = ok && count <= size / 24 && size == 16 + 24 * count &&
                    (expected < 0 || count == static_cast<uint64_t>(expected));
  std::vector<ShardMember> members;
  bool read = fits;
  if (fits) {
    members.resize(count);
    static_assert(sizeof(ShardMember) == 24);
    const ssize_t want = static_cast<ssize_t>(24 * count);
    read = ::pread(fd, members.data(), static_cast<size_t>(want), 16) == want;
  }
  ::close(fd);
  CMHA_CHECK(read,
             "shard index '" + path + "' is truncated or corrupt (" + std::to_string(size) + " bytes" +
                 (expected >= 0 ? ", " + std::to_string(expected) + " samples expected)" : ")"));
  return members;
}

ShardWriter::ShardWriter(std::string tar_path)
    : path_(std::move(tar_path)), file_(std::make_unique<AtomicFile>(path_)) {}

ShardWriter::~ShardWriter() = default;

void ShardWriter::member(const std::string& name, const uint8_t* data, size_t n) {
  char header[kBlock];
  tar_header(name, n, header);
  static const char zeros[kBlock] = {};
  const size_t pad = (kBlock - n % kBlock) % kBlock;
  file_->write(header, kBlock);
  if (n > 0) file_->write(data, n);
  if (pad > 0) file_->write(zeros, pad);
  at_ += kBlock + n + pad;
}

void ShardWriter::add(const std::string& key, const std::string& ext, const std::vector<uint8_t>& image,
                      int64_t label) {
  index_.push_back({at_ + kBlock, image.size(), label});
  member(key + "." + ext, image.data(), image.size());
  const std::string cls = std::to_string(label);
  member(key + ".cls", reinterpret_cast<const uint8_t*>(cls.data()), cls.size());
}

uint64_t ShardWriter::finish() {
  static const char zeros[2 * kBlock] = {};
  file_->write(zeros, sizeof zeros);  // tar's end: two zero records
  at_ += sizeof zeros;
  // The tar first: an index never names a tar that is not there.
  file_->commit();
  file_.reset();
  const uint64_t count = index_.size();
  std::string index(kIndexMagic, 8);
  index.append(reinterpret_cast<const char*>(&count), 8);
  index.append(reinterpret_cast<const char*>(index_.data()), 24 * count);
  write_file_atomically(shard_index_path(path_), index);
  return at_;
}

}  // namespace cmha::data
