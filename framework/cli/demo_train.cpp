// The built-in demo behind `cmha train` until recipes exist: an MLP
// 784-256-10 (ReLU) trained on Fashion-MNIST with AdamW, end to end through
// the library's own pieces (IDX reader, Philox init, autograd, AdamW).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "cli/commands.h"
#include "data/idx.h"
#include "optim/adam.h"
#include "tensor/rng.h"

namespace cmha::cli {
namespace {

constexpr int64_t kHidden = 256;
constexpr int64_t kClasses = 10;
constexpr int64_t kBatch = 128;
constexpr int kLogEvery = 100;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// "<dir>/<stem>.gz" or "<dir>/<stem>"; a clear error when neither exists.
std::string locate(const std::string& dir, const std::string& stem) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (dir == DemoOptions{}.data_dir)
      throw Error("Fashion-MNIST is not installed in '" + dir +
                  "' (install it with 'apt-get install dataset-fashion-mnist', or pass --data-dir DIR)");
    throw Error("data directory '" + dir +
                "' does not exist (the demo needs Fashion-MNIST: 'apt-get install dataset-fashion-mnist' or --data-dir DIR)");
  }
  for (const char* suffix : {".gz", ""}) {
    const std::string path = (fs::path(dir) / (stem + suffix)).string();
    if (fs::exists(path, ec)) return path;
  }
  throw Error("data directory '" + dir + "' has no " + stem + ".gz or " + stem +
              " (the demo needs the four Fashion-MNIST files of 'apt-get install dataset-fashion-mnist')");
}

data::LabelledImages load_split(const std::string& dir, const char* split) {
  const std::string s = split;
  auto out = data::load_idx_split(locate(dir, s + "-images-idx3-ubyte"), locate(dir, s + "-labels-idx1-ubyte"));
  const int64_t* y = out.labels.data<int64_t>();
  for (int64_t i = 0; i < out.labels.numel(); ++i)
    CMHA_CHECK(y[i] < kClasses, "label " + std::to_string(y[i]) + " of " + s + " image " + std::to_string(i) + " in '" +
                                    dir + "' is not a class of Fashion-MNIST (0 to 9)");
  CMHA_CHECK(out.labels.numel() > 0, "the " + s + " split in '" + dir + "' holds no images");
  return out;
}

// Xavier (Glorot) uniform: U(±√(6/(fan_in+fan_out))), drawn with Philox.
Tensor xavier_uniform(int64_t out, int64_t in, Generator& gen, const char* name) {
  Tensor w = Tensor::empty({out, in});
  const float bound = std::sqrt(6.0f / static_cast<float>(in + out));
  uniform_(w, gen, -bound, bound);
  w.set_requires_grad(true).set_name(name);
  return w;
}

Tensor zero_bias(int64_t n, const char* name) {
  Tensor b = Tensor::zeros({n});
  b.set_requires_grad(true).set_name(name);
  return b;
}

struct Mlp {
  Tensor w1, b1, w2, b2;
  Tensor forward(const Tensor& x) const { return linear(relu(linear(x, w1, b1)), w2, b2); }  // [B, in] -> [B, 10]
};

// A Fisher–Yates permutation from the counter-based generator.
std::vector<int64_t> shuffled(int64_t n, Generator& gen) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  const uint64_t base = gen.reserve(static_cast<uint64_t>(n));
  const auto key = gen.key();
  for (int64_t i = n - 1; i > 0; --i) {
    const uint32_t r = philox_block(base + static_cast<uint64_t>(i) / 4, key)[i % 4];
    std::swap(idx[i], idx[static_cast<int64_t>(r % static_cast<uint32_t>(i + 1))]);
  }
  return idx;
}

// Rows idx[begin, end) of the flattened images and their labels.
std::pair<Tensor, Tensor> batch(const data::LabelledImages& d, const std::vector<int64_t>& idx, int64_t begin,
                                int64_t end) {
  const int64_t width = d.images.numel() / d.images.size(0);
  Tensor x = Tensor::empty({end - begin, width});
  Tensor y = Tensor::empty({end - begin}, DType::i64);
  const float* src = d.images.data<float>();
  const int64_t* labels = d.labels.data<int64_t>();
  float* xd = x.data<float>();
  int64_t* yd = y.data<int64_t>();
  for (int64_t r = 0; r < end - begin; ++r) {
    std::memcpy(xd + r * width, src + idx[begin + r] * width, sizeof(float) * width);
    yd[r] = labels[idx[begin + r]];
  }
  return {x, y};
}

int64_t count_correct(const Mlp& model, const data::LabelledImages& d) {
  autograd::NoGradGuard no_grad;
  const int64_t n = d.images.size(0);
  const Tensor flat = d.images.reshape({n, -1});
  const int64_t* labels = d.labels.data<int64_t>();
  int64_t correct = 0;
  for (int64_t start = 0; start < n; start += 1000) {
    const int64_t len = std::min<int64_t>(1000, n - start);
    const Tensor pred = argmax(model.forward(flat.narrow(0, start, len)), 1).contiguous();
    const int64_t* p = pred.data<int64_t>();
    for (int64_t i = 0; i < len; ++i) correct += p[i] == labels[start + i];
  }
  return correct;
}

}  // namespace

int run_demo(const DemoOptions& o) {
  const auto t0 = Clock::now();
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const data::LabelledImages train = load_split(o.data_dir, "train");
  const data::LabelledImages test = load_split(o.data_dir, "t10k");
  std::printf("cmha train: no recipe given, so running the built-in demo (YAML recipes are not supported yet)\n");
  const int64_t n = train.images.size(0);
  const int64_t width = train.images.numel() / n;
  CMHA_CHECK(test.images.numel() / test.images.size(0) == width,
             "the train and t10k images in '" + o.data_dir + "' differ in size: " + shape_str(train.images.shape()) +
                 " and " + shape_str(test.images.shape()));
  std::printf("data: %lld training and %lld test images of %lldx%lld from %s (%.1f s)\n",
              static_cast<long long>(n), static_cast<long long>(test.images.size(0)),
              static_cast<long long>(train.images.size(1)), static_cast<long long>(train.images.size(2)),
              o.data_dir.c_str(), seconds_since(t0));

  Generator gen(o.seed);
  Mlp model{xavier_uniform(kHidden, width, gen, "fc1.weight"), zero_bias(kHidden, "fc1.bias"),
            xavier_uniform(kClasses, kHidden, gen, "fc2.weight"), zero_bias(kClasses, "fc2.bias")};
  // Biases are excluded from weight decay, as is usual.
  optim::AdamW opt({{model.w1, true}, {model.b1, false}, {model.w2, true}, {model.b2, false}},
                   optim::AdamW::with_decay(1e-2));
  const int64_t steps = (n + kBatch - 1) / kBatch;
  std::printf("model: MLP %lld-%lld-%lld (ReLU), %lld parameters, Xavier-uniform init, seed %llu\n",
              static_cast<long long>(width), static_cast<long long>(kHidden), static_cast<long long>(kClasses),
              static_cast<long long>(model.w1.numel() + model.b1.numel() + model.w2.numel() + model.b2.numel()),
              o.seed);
  std::printf("training: AdamW lr %g weight decay %g, batch %lld, %d epoch%s of %lld steps, %d threads\n",
              opt.lr(), opt.options().weight_decay, static_cast<long long>(kBatch), o.epochs,
              o.epochs == 1 ? "" : "s", static_cast<long long>(steps), omp_get_max_threads());
  std::fflush(stdout);

  double accuracy = 0.0;
  int64_t global_step = 0;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    const std::vector<int64_t> order = shuffled(n, gen);
    double loss_sum = 0.0;
    int loss_count = 0;
    for (int64_t s = 0; s < steps; ++s) {
      if (interrupted()) throw Interrupted{};
      auto [x, y] = batch(train, order, s * kBatch, std::min(n, (s + 1) * kBatch));
      const Tensor loss = cross_entropy(model.forward(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      const float value = loss.item();
      CMHA_CHECK(std::isfinite(value), "the training loss became " + std::to_string(value) + " at step " +
                                           std::to_string(global_step + 1) + "; stopping");
      loss_sum += value;
      ++loss_count;
      ++global_step;
      if ((s + 1) % kLogEvery == 0 || s + 1 == steps) {
        std::printf("epoch %d  step %4lld/%lld  loss %.4f  (%.1f s)\n", epoch, static_cast<long long>(s + 1),
                    static_cast<long long>(steps), loss_sum / loss_count, seconds_since(t0));
        std::fflush(stdout);
        loss_sum = 0.0;
        loss_count = 0;
      }
    }
    const int64_t correct = count_correct(model, test);
    accuracy = 100.0 * static_cast<double>(correct) / static_cast<double>(test.images.size(0));
    std::printf("epoch %d  test accuracy %.2f%% (%lld/%lld)  (%.1f s)\n", epoch, accuracy,
                static_cast<long long>(correct), static_cast<long long>(test.images.size(0)), seconds_since(t0));
    std::fflush(stdout);
  }
  std::printf("done: test accuracy %.2f%% after %d epoch%s, %.1f s in total\n", accuracy, o.epochs,
              o.epochs == 1 ? "" : "s", seconds_since(t0));
  return 0;
}

}  // namespace cmha::cli
