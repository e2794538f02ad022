#pragma once
// Full training steps on random tokens (forward, label-smoothed
// cross-entropy, backward, the recipe's optimiser step) timed one by one:
// `cmha bench`.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/communicator.h"
#include "nn/module.h"
#include "run/recipe.h"
#include "tensor/rng.h"

namespace cmha::train {

// What one benchmark step runs: the model, its inputs on the device and the
// loss of one batch.
struct BenchModel {
  std::unique_ptr<nn::Module> module;
  std::function<Tensor()> loss;
  int64_t units_per_rank = 0;  // target tokens or images per step
  const char* unit = "tokens";
  std::string attention;
};

// The transformer on bench.batch_size × bench.src_len / bench.tgt_len random
// tokens, and the vision transformer on bench.batch_size random images with
// random labels, built on the CPU with `init_gen`, inputs drawn from
// `data_gen` on `device` (train/task_factory.h picks one by model.kind).
BenchModel transformer_bench_model(const run::Recipe& recipe, Generator& init_gen, Generator& data_gen, Device device);
BenchModel vit_bench_model(const run::Recipe& recipe, Generator& init_gen, Generator& data_gen, Device device);

struct BenchResult {
  std::string attention;        // encoder self-attention type
  std::string device;           // train.device, described (run/device.h)
  int64_t parameters = 0;
  int threads = 0;               // per rank
  int ranks = 1;                // data-parallel processes, each with the whole bench batch
  std::string unit = "tokens";   // "tokens" (target tokens, the transformer) or "images" (the ViT)
  int64_t target_tokens = 0;    // units per step (labels), all ranks together
  double gemm_flops_per_step = 0;  // the GEMMs' 2·M·N·K, forward and backward, all ranks (for MFU)
  std::vector<double> step_ms;  // every timed step
  double step_ms_median = 0;
  double tokens_per_s = 0;      // units (target tokens or images) / median step time
  double exchange_ms_median = 0;  // gradient exchange left after the backward pass (0 alone)
  float first_loss = 0, last_loss = 0;
  double peak_rss_mb = 0;       // the process's peak resident memory (getrusage) at the end
  double peak_tensor_mb = 0;    // the most CPU tensor memory held at once (peak_cpu_tensor_mb)
  // On a GPU: the pool's peak, and how often the timed steps (after warm-up)
  // took new memory from the driver (0 when the pool serves every step).
  double gpu_peak_reserved_mb = 0;
  int64_t gpu_pool_growths_timed = -1;  // -1: not a GPU
  // On the asynchronous emulated GPU (tensor/emulated_stream.h): the most
  // times one timed step made the host wait for the device before its loss
  // was read (the read at the end, train.log_every's in training, not
  // counted); -1 elsewhere (a real GPU cannot count them).
  int64_t host_syncs_per_step = -1;
  std::string host_sync_causes;  // "loss.count_targets 1, copy to host 2" per timed step (same device only)
  std::string profile;          // with profile: the kernel table of the timed steps (backend/profile.h)
  // Each attention place's path (place, "fused" | "unfused" | "mixed"), and
  // the report that says why (nn::attention_paths_report).
  std::vector<std::pair<std::string, std::string>> attention_paths;
  std::string attention_paths_report;
  std::string json(const std::string& recipe_name) const;
};

// Runs `warmup` untimed then `steps` timed steps of the recipe's model: the
// transformer with bench.batch_size × bench.src_len source and ×
// bench.tgt_len target tokens, or the vision transformer with
// bench.batch_size images of model.image_size² (random pixels and labels),
// on train.device, on every rank of `comm`, gradients exchanged as `cmha train` does
// (train.dist_bucket_mb, train.dist_overlap); the result is rank 0's timing.
// With `profile`, every kernel of the timed steps is timed too (the steps are
// then slightly slower: a clock read per kernel call). The first step (a
// warm-up when there is one) counts the GEMM work for MFU.
BenchResult run_training_benchmark(const run::Recipe& recipe, int steps, int warmup, int threads,
                                   distributed::Communicator& comm, bool profile = false);

}  // namespace cmha::train
