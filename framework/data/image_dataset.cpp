#include "data/image_dataset.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "data/idx.h"
#include "tensor/error.h"

namespace cmha::data {

namespace fs = std::filesystem;

namespace {
bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}
}  // namespace

ImageFolderDataset::ImageFolderDataset(const std::string& root, ColorMode mode, int64_t num_classes, int64_t max_pixels)
    : mode_(mode), max_pixels_(max_pixels) {
  std::error_code ec;
  CMHA_CHECK(fs::is_directory(root, ec), root + ": no such image folder (expected <root>/<class>/<image>)");
  for (const auto& entry : fs::directory_iterator(root))
    if (entry.is_directory()) classes_.push_back(entry.path().filename().string());
  std::sort(classes_.begin(), classes_.end());
  CMHA_CHECK(!classes_.empty(), root + ": no class folders (expected <root>/<class>/<image>)");
  CMHA_CHECK(num_classes <= 0 || static_cast<int64_t>(classes_.size()) <= num_classes,
             root + ": " + std::to_string(classes_.size()) + " class folders, more than the " +
                 std::to_string(num_classes) + " classes expected (labels would be out of range)");
  for (size_t k = 0; k < classes_.size(); ++k) {
    const fs::path dir = fs::path(root) / classes_[k];
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file() && is_image_file(entry.path())) files.push_back(entry.path().string());
    CMHA_CHECK(!files.empty(), dir.string() + ": empty class folder (no .jpg, .jpeg or .png files)");
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      files_.push_back(std::move(f));
      labels_.push_back(static_cast<int64_t>(k));
    }
  }
}

Image ImageFolderDataset::load(int64_t i) const { return read_image_file(files_[i], mode_, max_pixels_); }

ImageSource ImageFolderDataset::open(int64_t i) const {
  return ImageSource(read_file_bytes(files_[i], "image file"), mode_, files_[i], max_pixels_);
}

IdxImageDataset::IdxImageDataset(const std::string& images_path, const std::string& labels_path, ColorMode mode,
                                 int64_t num_classes)
    : images_path_(images_path), num_classes_(num_classes), mode_(mode) {
  IdxBytes images = read_idx_u8(images_path, 3);
  IdxBytes labels = read_idx_u8(labels_path, 1);
  CMHA_CHECK(images.dims[0] == labels.dims[0], images_path + " holds " + std::to_string(images.dims[0]) +
                                                   " images but " + labels_path + " holds " +
                                                   std::to_string(labels.dims[0]) + " labels");
  rows_ = images.dims[1], cols_ = images.dims[2];
  pixels_ = std::move(images.values);
  labels_.assign(labels.values.begin(), labels.values.end());
  for (size_t i = 0; i < labels_.size(); ++i)
    CMHA_CHECK(labels_[i] < num_classes, labels_path + ": label " + std::to_string(labels_[i]) + " of sample " +
                                             std::to_string(i) + " is outside the " + std::to_string(num_classes) +
                                             " classes");
}

Image IdxImageDataset::load(int64_t i) const {
  const int64_t C = channel_count(mode_);
  Image im(rows_, cols_, C);
  const uint8_t* src = pixels_.data() + i * rows_ * cols_;
  for (int64_t p = 0; p < rows_ * cols_; ++p)
    for (int64_t c = 0; c < C; ++c) im.pixels[p * C + c] = src[p];
  return im;
}

std::string IdxImageDataset::describe(int64_t i) const { return images_path_ + " image " + std::to_string(i); }

ImageSubset::ImageSubset(std::shared_ptr<const ImageDataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  for (const int64_t i : indices_)
    CMHA_CHECK(i >= 0 && i < base_->size(), "image subset: index " + std::to_string(i) + " is outside the " +
                                                std::to_string(base_->size()) + " images");
}

HoldoutSplit holdout_split(int64_t n, int64_t count, uint64_t seed) {
  CMHA_CHECK(count > 0 && count < n, "data.holdout " + std::to_string(count) + " must leave training images: the "
                                         "training split has " + std::to_string(n));
  uint64_t state = seed;
  const auto next = [&state] {  // SplitMix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  // The first `count` places of a Fisher-Yates shuffle (the draw's modulo bias is below 2^-40 for n < 2^24).
  for (int64_t i = 0; i < count; ++i) {
    const auto j = i + static_cast<int64_t>(next() % static_cast<uint64_t>(n - i));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  HoldoutSplit out;
  out.held_out.assign(order.begin(), order.begin() + count);
  std::sort(out.held_out.begin(), out.held_out.end());
  std::vector<char> held(static_cast<size_t>(n), 0);
  for (const int64_t i : out.held_out) held[static_cast<size_t>(i)] = 1;
  for (int64_t i = 0; i < n; ++i)
    if (!held[static_cast<size_t>(i)]) out.kept.push_back(i);
  return out;
}

}  // namespace cmha::data
