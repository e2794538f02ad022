#include "data/shard_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "data/sample_random.h"
#include "tensor/error.h"

namespace cmha::data {

namespace fs = std::filesystem;

namespace {
// Random-stream domains of the shard order and the shuffle buffer (the loader's own use 1-3).
constexpr uint32_t kShardOrderDomain = 11, kShuffleBufferDomain = 12;

std::string sample_key(int64_t i) {
  char key[24];
  std::snprintf(key, sizeof key, "%06lld", static_cast<long long>(i));
  return key;
}
}  // namespace

struct ShardDataset::Shard {
  std::string tar, index;
  uint64_t tar_bytes = 0;  // as found at start
  std::once_flag read_once;
  std::vector<ShardMember> members;
  std::string index_error;  // set instead of members when the index could not be read
  std::atomic<bool> warned{false};
};

ShardDataset::ShardDataset(const std::string& dir, ColorMode mode, int64_t num_classes, int64_t max_pixels,
                           int64_t shuffle_buffer)
    : dir_(dir), info_(read_shard_set(dir)), mode_(mode), max_pixels_(max_pixels), shuffle_buffer_(shuffle_buffer) {
  CMHA_CHECK(shuffle_buffer_ >= 1, "data.shuffle_buffer must be at least 1, not " + std::to_string(shuffle_buffer_));
  CMHA_CHECK(num_classes <= 0 || num_classes >= this->num_classes(),
             dir + ": " + std::to_string(this->num_classes()) + " classes in " + kShardSetFile + ", more than the " +
                 std::to_string(num_classes) + " classes expected (labels would be out of range)");
  int64_t first = 0;
  int64_t short_tars = 0;
  for (const ShardInfo& info : info_.shards) {
    auto s = std::make_unique<Shard>();
    s->tar = (fs::path(dir) / info.file).string();
    s->index = shard_index_path(s->tar);
    struct stat st {};
    CMHA_CHECK(::stat(s->tar.c_str(), &st) == 0 && S_ISREG(st.st_mode),
               "shard '" + s->tar + "' listed in " + (fs::path(dir) / kShardSetFile).string() + " is missing");
    s->tar_bytes = static_cast<uint64_t>(st.st_size);
    short_tars += s->tar_bytes < info.tar_bytes;
    struct stat si {};
    CMHA_CHECK(::stat(s->index.c_str(), &si) == 0 && S_ISREG(si.st_mode), "shard index '" + s->index + "' is missing");
    CMHA_CHECK(static_cast<uint64_t>(si.st_size) == 16 + 24 * static_cast<uint64_t>(info.samples),
               "shard index '" + s->index + "' is truncated or corrupt (" + std::to_string(si.st_size) +
                   " bytes for " + std::to_string(info.samples) + " samples)");
    first_.push_back(first);
    first += info.samples;
    shards_.push_back(std::move(s));
  }
  if (short_tars > 0)
    std::fprintf(stderr, "data: warning: %lld shard(s) of %s are shorter than %s says: the members cut off are skipped\n",
                 static_cast<long long>(short_tars), dir.c_str(), kShardSetFile);
}

ShardDataset::~ShardDataset() = default;

size_t ShardDataset::shard_of(int64_t i) const {
  CMHA_CHECK(i >= 0 && i < size(), dir_ + ": sample " + std::to_string(i) + " is outside the set's " +
                                       std::to_string(size()));
  return static_cast<size_t>(std::upper_bound(first_.begin(), first_.end(), i) - first_.begin() - 1);
}

const std::vector<ShardMember>& ShardDataset::members(size_t s) const {
  Shard& shard = *shards_[s];
  std::call_once(shard.read_once, [&] {
    try {
      shard.members = read_shard_index(shard.index, info_.shards[s].samples);
      for (const ShardMember& m : shard.members)
        CMHA_CHECK(m.label >= 0 && m.label < num_classes(),
                   "shard index '" + shard.index + "' holds label " + std::to_string(m.label) + ", outside the " +
                       std::to_string(num_classes()) + " classes");
    } catch (const Error& e) {
      shard.members.clear();
      shard.index_error = e.what();
    }
  });
  if (!shard.index_error.empty()) throw Error(shard.index_error);
  return shard.members;
}

void ShardDataset::count_bad(size_t s, const std::string& message) const {
  ++bad_;
  if (!shards_[s]->warned.exchange(true))
    std::fprintf(stderr, "data: warning: %s (skipped; further bad members of shard '%s' are skipped and counted "
                 "without a warning)\n", message.c_str(), shards_[s]->tar.c_str());
}

int64_t ShardDataset::label(int64_t i) const {
  const size_t s = shard_of(i);
  return members(s)[static_cast<size_t>(i - first_[s])].label;
}

std::string ShardDataset::describe(int64_t i) const {
  const size_t s = shard_of(i);
  return shards_[s]->tar + " member " + sample_key(i);
}

Image ShardDataset::load(int64_t i) const {
  const size_t s = shard_of(i);
  try {
    const ShardMember& m = members(s)[static_cast<size_t>(i - first_[s])];
    const std::string name = describe(i);
    CMHA_CHECK(m.bytes > 0 && m.bytes <= (uint64_t{1} << 30) && m.offset + m.bytes <= shards_[s]->tar_bytes,
               name + " is cut off: the shard is truncated");
    std::vector<uint8_t> bytes(m.bytes);
    const int fd = ::open(shards_[s]->tar.c_str(), O_RDONLY | O_CLOEXEC);
    CMHA_CHECK(fd >= 0, "cannot open shard '" + shards_[s]->tar + "': " + std::strerror(errno));
    const ssize_t got = ::pread(fd, bytes.data(), bytes.size(), static_cast<off_t>(m.offset));
    ::close(fd);
    CMHA_CHECK(got == static_cast<ssize_t>(bytes.size()), name + " is cut off: the shard is truncated");
    return decode_image(bytes.data(), bytes.size(), mode_, name, max_pixels_);
  } catch (const Error& e) {
    count_bad(s, e.what());
    throw;
  }
}

std::vector<int64_t> ShardDataset::epoch_order(uint64_t seed, int64_t epoch, int rank, int world, int64_t count,
                                               int repeats) const {
  // The shards permuted (Fisher-Yates), the same on every rank; rank r streams r, r + world, ... (with fewer
  // shards than ranks, ranks share them).
  const int64_t S = static_cast<int64_t>(shards_.size());
  std::vector<int64_t> perm(static_cast<size_t>(S));
  std::iota(perm.begin(), perm.end(), 0);
  SampleRandom order(seed, epoch, 0, kShardOrderDomain);
  for (int64_t i = S - 1; i > 0; --i) std::swap(perm[i], perm[order.integer(0, i + 1)]);
  std::vector<int64_t> mine;
  for (int64_t k = rank; k < std::max<int64_t>(S, world); k += world) mine.push_back(perm[k % S]);

  // The stream through the shuffle buffer: once it is full, each arriving sample takes the place of a random
  // one, which comes out; at the end the rest come out in random order.
  SampleRandom pick(seed, epoch, static_cast<uint64_t>(rank), kShuffleBufferDomain);
  std::vector<int64_t> out, buffer;
  out.reserve(static_cast<size_t>(count));
  buffer.reserve(static_cast<size_t>(std::min(shuffle_buffer_, size() * repeats)));
  for (int64_t s : mine) {
    for (int64_t i = first_[s]; i < first_[s] + info_.shards[s].samples; ++i)
      for (int r = 0; r < repeats; ++r) {
        if (static_cast<int64_t>(buffer.size()) < shuffle_buffer_) {
          buffer.push_back(i);
          continue;
        }
        int64_t& slot = buffer[static_cast<size_t>(pick.integer(0, shuffle_buffer_))];
        out.push_back(slot);
        slot = i;
      }
    if (static_cast<int64_t>(out.size()) >= count) break;  // enough: the rank reads no further shard
  }
  while (!buffer.empty() && static_cast<int64_t>(out.size()) < count) {
    const size_t j = static_cast<size_t>(pick.integer(0, static_cast<int64_t>(buffer.size())));
    out.push_back(buffer[j]);
    buffer[j] = buffer.back();
    buffer.pop_back();
  }
  out.resize(std::min<size_t>(out.size(), static_cast<size_t>(count)));
  // Fewer samples than the loader's share (ranks hold unequal shards): wrap around the rank's own stream.
  const size_t n = out.size();
  for (size_t k = n; static_cast<int64_t>(out.size()) < count; ++k) out.push_back(out[k % n]);
  return out;
}

}  // namespace cmha::data
