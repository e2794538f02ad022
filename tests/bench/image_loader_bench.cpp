// Images per second of the image loader alone with DeiT's training
// transforms at 224 px (RandomResizedCrop bicubic, flip, RandAugment
// rand-m9-mstd0.5-inc1, random erasing 0.25, mixup 0.8 / CutMix 1.0), with 1
// and 2 worker threads, against what a training step consumes: the forward
// and backward of DeiT-Ti and DeiT-B3 (3 blocks of DeiT-B) on a batch, with
// OpenMP on every core.
//
// u8 batches against f32 (issue 30): the loader delivers u8 pixels and the
// step normalises, erases and mixes them on its device (image.prepare). Each
// iteration of BM_LoaderU8VsF32 runs one epoch delivering u8 batches and one
// delivering the f32 batches of before (the same loader, plus the CPU's
// image.prepare on each batch in the consuming thread: the work the workers
// did before the move), and reports images per second of CPU time of each
// (this process, every thread: per core) and their ratio, plus the bytes of
// one batch either way.
//
// Data: 64 synthetic JPEGs (quality 90) of 500×375, ImageNet's most common
// size, with smooth gradients and noise so that they compress like photos;
// written once to a temp folder as an ImageFolder of 4 classes.
// Parts, per image, in the calling thread: JPEG decode; the train transforms
// on a decoded image.
//
// Photos against torchvision (when CMHA_BENCH_PHOTOS names a folder made by
// tests/bench/make_photo_set.py: ImageNet-like 500×375 JPEGs cut from the
// photos Debian ships): DeiT's train transforms (as above) and the eval
// transform (resize 256 bicubic, centre crop 224), 1 and 2 workers, on
// CMHA_BENCH_PHOTO_LIMIT files (default 640, every k-th of the sorted list),
// each iteration running cmha's loader and then torchvision 0.14 + PIL
// (tests/bench/torchvision_loader.py, a DataLoader with as many one-thread
// worker processes) on the same files; images/s per worker and per second
// of CPU time (on a loaded machine the fairer "per core"), and the ratios.
//
// Run: build-bench/tests/bench/image_loader_bench [--benchmark_repetitions=N]
//      /usr/bin/python3 tests/bench/make_photo_set.py build-bench/photos 2000
//      CMHA_BENCH_PHOTOS=build-bench/photos build-bench/tests/bench/image_loader_bench --benchmark_filter=Photos
// The summary prints images/s: the loader must be faster than the step.
#include "bench_main.h"
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

#include "autograd/ops.h"
#include "data/image_loader.h"
#include "data/image_prepare.h"
#include "nn/vit.h"
#include "tensor/rng.h"

using namespace cmha;
using namespace cmha::data;

namespace {

constexpr int kImages = 64, kBatch = 32;
std::map<std::string, std::vector<double>> g_images_per_s;  // side -> per-iteration rates
std::map<std::string, std::vector<double>> g_ratios;        // side -> per-iteration cmha / reference
std::vector<std::string> g_notes;                             // lines the summary prints as they are

Image synthetic_photo(int seed) {
  Image im(375, 500, 3);
  uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (int64_t y = 0; y < im.height; ++y)
    for (int64_t x = 0; x < im.width; ++x) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      const int noise = static_cast<int>(s % 32);
      uint8_t* p = im.at(y, x);
      p[0] = static_cast<uint8_t>((x * 255 / 500 + seed * 40 + noise) % 256);
      p[1] = static_cast<uint8_t>((y * 255 / 375 + noise) % 256);
      p[2] = static_cast<uint8_t>(((x + y) * 255 / 875 + 2 * noise) % 256);
    }
  return im;
}

const std::string& dataset_root() {
  static const std::string root = [] {
    const auto dir = std::filesystem::temp_directory_path() / ("cmha_image_bench_" + std::to_string(::getpid()));
    for (int i = 0; i < kImages; ++i) {
      const auto cls = dir / ("class" + std::to_string(i % 4));
      std::filesystem::create_directories(cls);
      write_file((cls / (std::to_string(i) + ".jpg")).string(), encode_jpeg(synthetic_photo(i), 90));
    }
    return dir.string();
  }();
  return root;
}

ImageLoaderOptions deit_train_options(int workers) {
  ImageLoaderOptions o;
  o.batch_size = kBatch;
  o.workers = workers;
  o.drop_last = true;
  o.transform.image_size = 224;
  o.transform.rand_augment = true;
  o.transform.rand_augment_config = parse_rand_augment("rand-m9-mstd0.5-inc1");
  o.transform.random_erasing = 0.25f;
  o.mixup.mixup_alpha = 0.8f;
  o.mixup.cutmix_alpha = 1.0f;
  return o;
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void BM_Loader(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  omp_set_num_threads(1);
  auto ds = std::make_shared<ImageFolderDataset>(dataset_root(), ColorMode::rgb);
  ImageLoader loader(ds, deit_train_options(workers), 1);
  int64_t epoch = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    loader.start_epoch(epoch++);
    ImageBatch b;
    int64_t n = 0;
    while (loader.next(b)) n += b.images.size(0);
    const double s = seconds_since(t0);
    state.SetIterationTime(s);
    g_images_per_s["loader, " + std::to_string(workers) + " worker(s)"].push_back(n / s);
  }
  state.SetItemsProcessed(state.iterations() * kImages);
}

double cpu_seconds();

// One epoch of `loader` (u8 batches; with_prepare: made f32 on the CPU too);
// images per CPU-second.
double epoch_per_cpu_s(ImageLoader& loader, int64_t epoch, bool with_prepare) {
  const double c0 = cpu_seconds();
  loader.start_epoch(epoch);
  ImageBatch b;
  int64_t n = 0;
  while (loader.next(b)) {
    if (with_prepare) benchmark::DoNotOptimize(model_input(b, Device::cpu()).raw_data());  // [B, 3, 224, 224] f32
    n += b.images.size(0);
  }
  return n / (cpu_seconds() - c0);
}

// Resident memory of the process, bytes (/proc/self/statm's second field).
int64_t resident_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

// Issue 30's "loader memory bounded: RSS flat over 10 000 batches": the DeiT
// train transforms with 2 workers over CMHA_BENCH_RSS_BATCHES (default
// 10 000) batches, epoch after epoch of the synthetic set, each batch
// consumed as the step would (image.prepare on it, then dropped). Smaller
// batches and output than training's (8 images of 112 px, 1/8 of the time
// a batch) exercise the same code: the buffer pool, the workers' decode and
// transform buffers, the prefetch queue. RSS is sampled every 500 batches;
// the summary prints it after 500 (warm) and at the end, and the growth.
void BM_LoaderRss(benchmark::State& state) {
  const char* env = std::getenv("CMHA_BENCH_RSS_BATCHES");
  const int64_t batches = env ? std::atoll(env) : 10000;
  omp_set_num_threads(1);
  auto ds = std::make_shared<ImageFolderDataset>(dataset_root(), ColorMode::rgb);
  ImageLoaderOptions o = deit_train_options(2);
  o.batch_size = 8;
  o.transform.image_size = 112;
  ImageLoader loader(ds, o, 1);
  std::vector<std::pair<int64_t, int64_t>> samples;  // (batches delivered, RSS)
  for (auto _ : state) {
    const auto t0 = Clock::now();
    int64_t n = 0, epoch = 0;
    while (n < batches) {
      loader.start_epoch(epoch++);
      ImageBatch b;
      while (n < batches && loader.next(b)) {
        Tensor x = prepare_images(b.images, b.erase, b.prepare);  // the step's first op, on the CPU
        benchmark::DoNotOptimize(x.raw_data());
        if (++n % 500 == 0) samples.push_back({n, resident_bytes()});
      }
    }
    state.SetIterationTime(seconds_since(t0));
  }
  if (samples.size() >= 2) {
    const double mb = 1.0 / (1 << 20);
    int64_t lo = samples.front().second, hi = lo;
    for (const auto& [k, r] : samples) lo = std::min(lo, r), hi = std::max(hi, r);
    char line[256];
    std::snprintf(line, sizeof line,
                  "RSS over %lld batches of 8 (2 workers): %.1f MB after %lld, %.1f MB at the end; min %.1f, max %.1f, "
                  "growth after the first sample %+.1f MB",
                  static_cast<long long>(batches), samples.front().second * mb,
                  static_cast<long long>(samples.front().first), samples.back().second * mb, lo * mb, hi * mb,
                  (samples.back().second - samples.front().second) * mb);
    g_notes.push_back(line);
  }
}

void BM_LoaderU8VsF32(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  omp_set_num_threads(1);
  auto ds = std::make_shared<ImageFolderDataset>(dataset_root(), ColorMode::rgb);
  ImageLoader loader(ds, deit_train_options(workers), 1);
  const std::string side = "loader, " + std::to_string(workers) + " worker(s), per CPU-s: ";
  int64_t epoch = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const double u8 = epoch_per_cpu_s(loader, epoch, false), f32 = epoch_per_cpu_s(loader, epoch, true);
    ++epoch;
    state.SetIterationTime(seconds_since(t0));
    g_images_per_s[side + "u8 batches"].push_back(u8);
    g_images_per_s[side + "f32 batches (before)"].push_back(f32);
    g_ratios[side + "u8 / f32"].push_back(u8 / f32);
  }
  // The bytes of one batch (and of the erase rows that travel with the u8 one).
  const double u8_bytes = kBatch * 3.0 * 224 * 224 + kBatch * 8.0 * backend::kEraseFields, f32_bytes = kBatch * 4.0 * 3 * 224 * 224;
  static bool printed = false;  // once, not per worker count
  if (!printed)
    std::printf("bytes per batch of %d: u8 %.0f (pixels and erase rows), f32 %.0f: %.2fx fewer\n", kBatch, u8_bytes,
                f32_bytes, f32_bytes / u8_bytes);
  printed = true;
  state.SetItemsProcessed(state.iterations() * 2 * kImages);
}

void BM_Decode(benchmark::State& state) {
  const std::vector<uint8_t> jpg = encode_jpeg(synthetic_photo(3), 90);
  for (auto _ : state) {
    const auto t0 = Clock::now();
    Image im = decode_image(jpg.data(), jpg.size(), ColorMode::rgb, "bench.jpg");
    benchmark::DoNotOptimize(im.pixels.data());
    g_images_per_s["part: JPEG decode 500x375"].push_back(1 / seconds_since(t0));
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_TrainTransform(benchmark::State& state) {
  const Image im = synthetic_photo(3);
  const ImageTransformOptions t = deit_train_options(0).transform;
  std::vector<uint8_t> out(3 * 224 * 224);
  uint64_t stream = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    SampleRandom rng(1, 0, stream++);
    transform_sample(im, t, true, rng, out.data());
    g_images_per_s["part: train transforms"].push_back(1 / seconds_since(t0));
  }
  state.SetItemsProcessed(state.iterations());
}

// Forward + backward of a ViT on a batch of 224-px images (no optimiser step).
void BM_VitStep(benchmark::State& state, int64_t d_model, int64_t depth, int64_t heads, const std::string& name) {
  const int batch = static_cast<int>(state.range(0));
  omp_set_num_threads(omp_get_num_procs());
  nn::VitConfig cfg;
  cfg.d_model = d_model, cfg.depth = depth, cfg.ffn_dim = 4 * d_model, cfg.attention.heads = heads;
  Generator gen(1);
  nn::VisionTransformer model(cfg, gen);
  model.set_generator(std::make_shared<Generator>(2));  // drop path
  model.train();
  Tensor x = Tensor::zeros({batch, 3, 224, 224});
  uniform_(x, gen, -2, 2);
  std::vector<int64_t> y(batch);
  for (int i = 0; i < batch; ++i) y[i] = i % 1000;
  const Tensor labels = Tensor::from_vector_i64(y, {batch});
  for (auto _ : state) {
    const auto t0 = Clock::now();
    Tensor loss = cross_entropy(model.forward(x), labels, 0.1f);
    loss.backward();
    for (auto& p : model.parameters()) p.zero_grad();
    const double s = seconds_since(t0);
    state.SetIterationTime(s);
    g_images_per_s["trainer: " + name + " fwd+bwd, batch " + std::to_string(batch)].push_back(batch / s);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

// Every k-th sample of a dataset (the same files torchvision_loader.py --stride takes).
class StridedSubset : public ImageDataset {
 public:
  StridedSubset(std::shared_ptr<const ImageDataset> all, int64_t stride) : all_(std::move(all)), stride_(stride) {}
  int64_t size() const override { return (all_->size() + stride_ - 1) / stride_; }
  int64_t num_classes() const override { return all_->num_classes(); }
  int64_t label(int64_t i) const override { return all_->label(i * stride_); }
  Image load(int64_t i) const override { return all_->load(i * stride_); }
  ImageSource open(int64_t i) const override { return all_->open(i * stride_); }
  std::string describe(int64_t i) const override { return all_->describe(i * stride_); }

 private:
  std::shared_ptr<const ImageDataset> all_;
  int64_t stride_;
};

const char* photos_dir() { return std::getenv("CMHA_BENCH_PHOTOS"); }

double cpu_seconds() {  // this process, every thread
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Rates {
  double per_s = -1, per_cpu_s = -1;  // images per second of wall time, per second of CPU time
};

// A number after `"key": ` in a JSON line, or -1.
double json_number(const std::string& line, const std::string& key) {
  const auto at = line.find("\"" + key + "\": ");
  return at == std::string::npos ? -1 : std::atof(line.c_str() + at + key.size() + 4);
}

// torchvision's rates on the same files (-1 when the reference did not run).
Rates torchvision_rates(const std::string& mode, int workers, int64_t stride) {
  const std::string cmd = "env OMP_NUM_THREADS=1 /usr/bin/python3 " + std::string(CMHA_SOURCE_DIR) +
                          "/tests/bench/torchvision_loader.py " + photos_dir() + " --mode " + mode + " --workers " +
                          std::to_string(workers) + " --stride " + std::to_string(stride) + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {};
  char line[512] = {0};
  std::string last;
  while (std::fgets(line, sizeof line, p)) last = line;
  if (pclose(p) != 0) return {};
  return {json_number(last, "images_per_s"), json_number(last, "images_per_cpu_s")};
}

void BM_Photos(benchmark::State& state, bool training) {
  const int workers = static_cast<int>(state.range(0));
  if (!photos_dir()) {
    state.SkipWithError("CMHA_BENCH_PHOTOS is not set (tests/bench/make_photo_set.py makes the folder)");
    return;
  }
  omp_set_num_threads(1);
  auto all = std::make_shared<ImageFolderDataset>(photos_dir(), ColorMode::rgb);
  const char* limit_env = std::getenv("CMHA_BENCH_PHOTO_LIMIT");
  const int64_t limit = limit_env ? std::atoll(limit_env) : 640;
  const int64_t stride = std::max<int64_t>(1, all->size() / std::max<int64_t>(limit, 1));
  auto ds = std::make_shared<StridedSubset>(all, stride);
  ImageLoaderOptions o = deit_train_options(workers);
  o.training = training;
  if (!training) o.drop_last = false;
  ImageLoader loader(ds, o, 1);
  const std::string mode = training ? "train" : "eval";
  const std::string side = "photos " + mode + ", " + std::to_string(workers) + " worker(s), ";
  int64_t epoch = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const double c0 = cpu_seconds();
    loader.start_epoch(epoch++);
    ImageBatch b;
    int64_t n = 0;
    while (loader.next(b)) n += b.images.size(0);
    const double s = seconds_since(t0), c = cpu_seconds() - c0;
    state.SetIterationTime(s);
    g_images_per_s[side + "per worker: cmha"].push_back(n / s / workers);
    g_images_per_s[side + "per CPU-s: cmha"].push_back(n / c);
    const Rates ref = torchvision_rates(mode, workers, stride);
    if (ref.per_s > 0 && ref.per_cpu_s > 0) {
      g_images_per_s[side + "per worker: torchvision"].push_back(ref.per_s / workers);
      g_images_per_s[side + "per CPU-s: torchvision"].push_back(ref.per_cpu_s);
      g_ratios[side + "per worker, cmha / torchvision"].push_back(n / s / ref.per_s);
      g_ratios[side + "per CPU-s, cmha / torchvision"].push_back(n / c / ref.per_cpu_s);
    }
  }
  state.SetItemsProcessed(state.iterations() * ds->size());
}

void register_all() {
  for (int w : {1, 2}) {
    benchmark::RegisterBenchmark("BM_Photos/train", BM_Photos, true)->Arg(w)->ArgName("workers")->UseManualTime()->Iterations(1);
    benchmark::RegisterBenchmark("BM_Photos/eval", BM_Photos, false)->Arg(w)->ArgName("workers")->UseManualTime()->Iterations(1);
  }
  benchmark::RegisterBenchmark("BM_Decode", BM_Decode)->MinTime(1.0);
  benchmark::RegisterBenchmark("BM_TrainTransform", BM_TrainTransform)->MinTime(1.0);
  for (int w : {0, 1, 2})
    benchmark::RegisterBenchmark("BM_Loader", BM_Loader)->Arg(w)->ArgName("workers")->UseManualTime()->Iterations(2);
  for (int w : {0, 1, 2})
    benchmark::RegisterBenchmark("BM_LoaderU8VsF32", BM_LoaderU8VsF32)->Arg(w)->ArgName("workers")->UseManualTime()->Iterations(3);
  benchmark::RegisterBenchmark("BM_LoaderRss", BM_LoaderRss)->UseManualTime()->Iterations(1);
  benchmark::RegisterBenchmark("BM_VitStep/deit_tiny", BM_VitStep, 192, 12, 3, "DeiT-Ti")
      ->Arg(16)->ArgName("batch")->UseManualTime()->Iterations(2);
  benchmark::RegisterBenchmark("BM_VitStep/deit_b3", BM_VitStep, 768, 3, 12, "DeiT-B3")
      ->Arg(16)->ArgName("batch")->UseManualTime()->Iterations(2);
}

void print_summary() {
  std::printf("\nimages per second (median over every timed iteration; %d-core machine):\n", omp_get_num_procs());
  for (auto& [side, rates] : g_images_per_s) {
    std::sort(rates.begin(), rates.end());
    std::printf("  %-52s %9.1f\n", side.c_str(), rates[rates.size() / 2]);
  }
  for (auto& [side, ratios] : g_ratios) {
    std::sort(ratios.begin(), ratios.end());
    std::printf("  %-60s %6.2fx\n", side.c_str(), ratios[ratios.size() / 2]);
  }
  for (const std::string& note : g_notes) std::printf("  %s\n", note.c_str());
  std::filesystem::remove_all(dataset_root());
}

}  // namespace

int main(int argc, char** argv) { return cmha::bench::run_main(argc, argv, register_all, print_summary); }
