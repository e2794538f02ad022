#include "support/tiny_images.h"

#include <utility>
#include <vector>

#include "data/idx.h"
#include "support/source_paths.h"

namespace cmha::test {

void write_tiny_fashion_mnist(const std::string& dir, int64_t train, int64_t test) {
  for (auto [split, n] : {std::pair<std::string, int64_t>{"train", train}, {"t10k", test}}) {
    std::vector<uint8_t> pixels(static_cast<size_t>(n * 28 * 28)), labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      labels[i] = static_cast<uint8_t>(i % 10);
      for (int64_t r = 0; r < 28; ++r)
        for (int64_t c = 0; c < 28; ++c)
          pixels[(i * 28 + r) * 28 + c] = static_cast<uint8_t>(r / 3 == labels[i] ? 200 + (i + c) % 50 : (i * c) % 40);
    }
    data::write_idx_u8(dir + "/" + split + "-images-idx3-ubyte.gz", {n, 28, 28}, pixels, true);
    data::write_idx_u8(dir + "/" + split + "-labels-idx1-ubyte.gz", {n}, labels, true);
  }
}

std::string tiny_vit_overrides(const std::string& data, const std::string& run_dir) {
  return "data.train_images=" + data + "/train-images-idx3-ubyte.gz data.train_labels=" + data +
         "/train-labels-idx1-ubyte.gz data.valid_images=" + data + "/t10k-images-idx3-ubyte.gz data.valid_labels=" +
         data + "/t10k-labels-idx1-ubyte.gz "
         // The tiny data has one held-out split: validation and test alike (the shipped recipe holds out 5 000
         // training images instead).
         "data.holdout=0 data.test_images=" + data + "/t10k-images-idx3-ubyte.gz data.test_labels=" + data +
         "/t10k-labels-idx1-ubyte.gz data.valid_is_test=true data.batch_size=16 model.d_model=16 model.depth=1 model.ffn_dim=32 "
         "model.attention.heads=2 model.attention.key_dim=8 lr.warmup=2 lr.warmup_epochs=0 train.log_every=1 train.save_dir=" + run_dir;
}

std::string tiny_run(const std::string& data, const std::string& run_dir) {
  return std::string(CMHA_SOURCE_DIR) + "/recipes/local/fashion_mnist_vit.yaml " + tiny_vit_overrides(data, run_dir);
}

}  // namespace cmha::test
