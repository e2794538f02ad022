#include "data/pack_shards.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>

#include "data/image_dataset.h"
#include "data/image_transforms.h"
#include "data/sample_random.h"
#include "tensor/error.h"
#include "tensor/regular_file.h"

namespace cmha::data {

namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  refuse_special_file(path, "image");
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  CMHA_CHECK(f, "cannot open image '" + path + "': " + std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) bytes.insert(bytes.end(), buf, buf + n);
  CMHA_CHECK(!std::ferror(f.get()), "cannot read image '" + path + "': " + std::strerror(errno));
  return bytes;
}

bool is_png(const std::vector<uint8_t>& b) { return b.size() >= 8 && std::memcmp(b.data(), "\x89PNG\r\n\x1a\n", 8) == 0; }

struct Packed {
  std::vector<uint8_t> bytes;
  std::string ext;  // jpg | png
  bool reencoded = false, skipped = false;
  std::string error;
};

Packed pack_one(const std::string& path, const PackOptions& o) {
  Packed p;
  try {
    p.bytes = read_bytes(path);
    p.ext = is_png(p.bytes) ? "png" : "jpg";
    if (o.max_side > 0) {
      const Image im = decode_image(p.bytes.data(), p.bytes.size(), ColorMode::rgb, path);
      if (std::min(im.height, im.width) > o.max_side) {
        p.bytes = encode_jpeg(resize_shorter_side(im, o.max_side), o.quality);
        p.ext = "jpg";
        p.reencoded = true;
      }
    }
  } catch (const Error& e) {
    if (!o.skip_bad) p.error = e.what();
    p.skipped = true;
  }
  return p;
}

}  // namespace

PackResult pack_image_folder(const std::string& src, const std::string& out, const PackOptions& o,
                             const std::function<void(const PackResult&)>& progress) {
  CMHA_CHECK(o.shard_samples >= 1, "cmha pack: --shard-samples must be at least 1");
  CMHA_CHECK(o.max_side >= 0 && o.quality >= 1 && o.quality <= 100,
             "cmha pack: --max-side must not be negative and --quality must be from 1 to 100");
  const ImageFolderDataset folder(src, ColorMode::rgb);
  fs::create_directories(out);
  CMHA_CHECK(!fs::exists(fs::path(out) / kShardSetFile),
             "'" + (fs::path(out) / kShardSetFile).string() + "' exists: pack into an empty folder");
  // One shuffle of the whole split, so each shard holds every class in proportion.
  const int64_t N = folder.size();
  std::vector<int64_t> order(static_cast<size_t>(N));
  std::iota(order.begin(), order.end(), 0);
  SampleRandom rng(o.seed, 0, 0, 0);
  for (int64_t i = N - 1; i > 0; --i) std::swap(order[i], order[rng.integer(0, i + 1)]);

  PackResult result;
  result.set.classes = folder.classes();
  result.set.max_side = o.max_side;
  result.set.quality = o.max_side > 0 ? o.quality : 0;
  result.set.source = fs::absolute(src).string();
  int64_t key = 0;
  for (int64_t begin = 0; begin < N; begin += o.shard_samples) {
    const int64_t end = std::min(N, begin + o.shard_samples);
    std::vector<Packed> packed(static_cast<size_t>(end - begin));
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t k = begin; k < end; ++k) packed[k - begin] = pack_one(folder.describe(order[k]), o);
    char name[32];
    std::snprintf(name, sizeof name, "shard-%06zu.tar", result.set.shards.size());
    const std::string writer_path = (fs::path(out) / name).string();
    ShardWriter writer(writer_path);
    ShardInfo info{name, 0, 0};
    for (int64_t k = begin; k < end; ++k) {
      const Packed& p = packed[k - begin];
      CMHA_CHECK(p.error.empty(), p.error + " (cmha pack --skip-bad leaves such images out)");
      if (p.skipped) {
        ++result.skipped;
        continue;
      }
      char member[24];
      std::snprintf(member, sizeof member, "%06lld", static_cast<long long>(key++));
      writer.add(member, p.ext, p.bytes, folder.label(order[k]));
      result.reencoded += p.reencoded;
      ++info.samples;
    }
    info.tar_bytes = writer.finish();
    result.bytes += info.tar_bytes;
    result.set.samples += info.samples;
    if (info.samples > 0) {
      result.set.shards.push_back(info);
    } else {  // every image of it left out: its name goes to the next shard
      fs::remove(writer_path);
      fs::remove(shard_index_path(writer_path));
    }
    if (progress) progress(result);
  }
  CMHA_CHECK(result.set.samples > 0, "cmha pack: no image of '" + src + "' could be packed");
  write_shard_set(out, result.set);
  return result;
}

}  // namespace cmha::data
