#pragma once
// Labelled image datasets behind one interface, read by the image loader's
// worker threads: an ImageFolder tree as ImageNet is laid out
// (<root>/<class>/<image>.jpg|jpeg|png, classes = the sorted folder names,
// labels their indices) and the IDX files of MNIST / Fashion-MNIST (packed
// shards: data/shard_dataset.h).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/image.h"
#include "data/image_source.h"

namespace cmha::data {

class ImageDataset {
 public:
  virtual ~ImageDataset() = default;
  virtual int64_t size() const = 0;
  virtual int64_t num_classes() const = 0;
  virtual int64_t label(int64_t i) const = 0;
  // Decodes sample i (thread-safe); a bad image is a cmha::Error naming it.
  virtual Image load(int64_t i) const = 0;
  // Sample i for the transforms, which decode only the region they keep
  // (a JPEG's header is read here, its pixels later); by default load(i).
  virtual ImageSource open(int64_t i) const { return ImageSource(load(i)); }
  // What names sample i in messages: its file, or "<idx file> image i".
  virtual std::string describe(int64_t i) const = 0;
  // The `count` dataset indices that rank `rank` of `world` visits in training
  // epoch `epoch`, in order, for a dataset that orders its own epochs (packed
  // shards, read in sequence: data/shard_dataset.h); `repeats` is repeated
  // augmentation's. Empty (the default): the loader permutes the whole dataset.
  virtual std::vector<int64_t> epoch_order(uint64_t /*seed*/, int64_t /*epoch*/, int /*rank*/, int /*world*/,
                                           int64_t /*count*/, int /*repeats*/) const {
    return {};
  }
};

// <root>/<class>/<file>: every class folder must hold at least one image
// (an empty one is an error naming it); files with other extensions are
// ignored. `num_classes` > 0 checks that there are no more classes than that.
// An image of more than `max_pixels` pixels is an error naming it (load).
class ImageFolderDataset : public ImageDataset {
 public:
  ImageFolderDataset(const std::string& root, ColorMode mode, int64_t num_classes = 0,
                     int64_t max_pixels = kDefaultMaxImagePixels);
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  int64_t num_classes() const override { return static_cast<int64_t>(classes_.size()); }
  int64_t label(int64_t i) const override { return labels_[i]; }
  Image load(int64_t i) const override;
  ImageSource open(int64_t i) const override;
  std::string describe(int64_t i) const override { return files_[i]; }
  const std::vector<std::string>& classes() const { return classes_; }

 private:
  std::vector<std::string> classes_;  // sorted folder names
  std::vector<std::string> files_;    // sorted within each class
  std::vector<int64_t> labels_;
  ColorMode mode_;
  int64_t max_pixels_;
};

// An IDX image file [N, rows, cols] (bytes) and its label file [N]; a label
// outside [0, num_classes) is an error naming the label file and the index.
// Images are grey; ColorMode::rgb replicates the channel.
class IdxImageDataset : public ImageDataset {
 public:
  IdxImageDataset(const std::string& images_path, const std::string& labels_path, ColorMode mode,
                  int64_t num_classes);
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  int64_t num_classes() const override { return num_classes_; }
  int64_t label(int64_t i) const override { return labels_[i]; }
  Image load(int64_t i) const override;
  std::string describe(int64_t i) const override;

 private:
  std::string images_path_;
  int64_t rows_ = 0, cols_ = 0, num_classes_;
  std::vector<uint8_t> pixels_;
  std::vector<int64_t> labels_;
  ColorMode mode_;
};

// The samples `indices` of another dataset, in that order (a held-out
// validation split, or the training images left after it).
class ImageSubset : public ImageDataset {
 public:
  ImageSubset(std::shared_ptr<const ImageDataset> base, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  int64_t num_classes() const override { return base_->num_classes(); }
  int64_t label(int64_t i) const override { return base_->label(indices_[i]); }
  Image load(int64_t i) const override { return base_->load(indices_[i]); }
  ImageSource open(int64_t i) const override { return base_->open(indices_[i]); }
  std::string describe(int64_t i) const override { return base_->describe(indices_[i]); }

 private:
  std::shared_ptr<const ImageDataset> base_;
  std::vector<int64_t> indices_;
};

// `count` of the indices 0..n-1 drawn without replacement by `seed` (a
// Fisher-Yates shuffle on SplitMix64, the same on every platform), and the
// others; both ascending. 0 < count < n, else an error.
struct HoldoutSplit {
  std::vector<int64_t> kept, held_out;
};
HoldoutSplit holdout_split(int64_t n, int64_t count, uint64_t seed);

}  // namespace cmha::data
