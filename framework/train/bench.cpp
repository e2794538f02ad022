#include "train/bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "autograd/deferred_checks.h"
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/matmul.h"
#include "backend/profile.h"
#include "nn/attention/attention.h"
#include "nn/transformer.h"
#include "nn/vit.h"
#include "optim/optimizer.h"
#include "run/device.h"
#include "run/model_config.h"
#include "tensor/emulated_stream.h"
#include "tensor/storage.h"
#include "train/gradient_buckets.h"
#include "train/task_factory.h"

namespace cmha::train {

namespace {

// Token ids drawn uniformly from [first, vocab) with the counter-based generator.
Tensor random_tokens(Generator& gen, int64_t rows, int64_t cols, int64_t first, int64_t vocab) {
  Tensor u = Tensor::empty({rows, cols});
  uniform_(u, gen, 0.0f, 1.0f);
  Tensor ids = Tensor::empty({rows, cols}, DType::i64);
  const float* pu = u.data<float>();
  int64_t* pi = ids.data<int64_t>();
  for (int64_t i = 0; i < rows * cols; ++i)
    pi[i] = std::min(vocab - 1, first + static_cast<int64_t>(pu[i] * static_cast<float>(vocab - first)));
  return ids;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

BenchModel transformer_bench_model(const run::Recipe& recipe, Generator& init_gen, Generator& data_gen, Device device) {
  const nn::TransformerConfig cfg = run::transformer_config(recipe);
  auto model = std::make_unique<nn::Transformer>(cfg, init_gen);
  const int64_t B = recipe.integer("bench.batch_size"), S = recipe.integer("bench.src_len"),
                T = recipe.integer("bench.tgt_len");
  CMHA_CHECK(T >= 2, "bench.tgt_len must be at least 2 (decoder input and labels are shifted by one)");
  // Shapes: src [B, S]; target [B, T] -> decoder input [B, T-1], labels [B·(T-1)]
  Tensor src = random_tokens(data_gen, B, S, 4, cfg.src_vocab);
  Tensor tgt = random_tokens(data_gen, B, T, 4, cfg.tgt_vocab);
  Tensor tgt_in = tgt.slice(1, 0, T - 1).contiguous().to(device);
  Tensor labels = tgt.slice(1, 1, T).contiguous().view({-1}).to(device);
  Tensor src_pad = Tensor::zeros({B, S}, DType::b8).to(device);
  src = src.to(device);
  const float smoothing = static_cast<float>(recipe.real("train.label_smoothing"));
  nn::Transformer* m = model.get();
  BenchModel b;
  b.attention = cfg.encoder_attention.type;
  b.units_per_rank = B * (T - 1);
  b.loss = [=] {
    Tensor states = m->forward_states(src, src_pad, tgt_in);  // [B, T-1, D], projected inside the loss as in training
    // The mean over the B·(T-1) labels (none is padding), as a sum times a host
    // number: a mean's divisor would be counted on the device and read (a host wait).
    const Tensor sum = linear_cross_entropy(states.view({-1, cfg.d_model}), m->output_weight, labels, smoothing,
                                            -100, Reduction::sum).loss;
    return mul_scalar(sum, 1.0f / static_cast<float>(B * (T - 1)));
  };
  b.module = std::move(model);
  return b;
}

// A vision transformer on random images (normal pixels) and labels:
// bench.batch_size images of model.image_size² per step.
BenchModel vit_bench_model(const run::Recipe& recipe, Generator& init_gen, Generator& data_gen, Device device) {
  const nn::VitConfig cfg = run::vit_config(recipe);
  auto model = std::make_unique<nn::VisionTransformer>(cfg, init_gen);
  const int64_t B = recipe.integer("bench.batch_size");
  Tensor images = Tensor::empty({B, cfg.channels, cfg.image_size, cfg.image_size});  // [B, C, S, S]
  normal_(images, data_gen);
  Tensor labels = random_tokens(data_gen, 1, B, 0, cfg.num_classes).view({B});
  images = images.to(device);
  labels = labels.to(device);
  const float smoothing = static_cast<float>(recipe.real("train.label_smoothing"));
  nn::VisionTransformer* m = model.get();
  BenchModel b;
  b.attention = cfg.attention.type;
  b.units_per_rank = B;
  b.unit = "images";
  b.loss = [=] {  // logits [B, classes]; the mean as a sum times a host number, as above
    return mul_scalar(cross_entropy(m->forward(images), labels, smoothing, -100, Reduction::sum),
                      1.0f / static_cast<float>(B));
  };
  b.module = std::move(model);
  return b;
}

namespace {

// The GEMM work of one step (2·M·N·K per matmul, forward and backward), from
// the kernel profile's count of one step.
double gemm_flops_of(const std::vector<backend::ProfileRow>& rows) {
  double f = 0;
  for (const backend::ProfileRow& r : rows) f += r.flops;
  return f;
}

}  // namespace

BenchResult run_training_benchmark(const run::Recipe& recipe, int steps, int warmup, int threads,
                                   distributed::Communicator& comm, bool profile) {
  CMHA_CHECK(steps > 0, "cmha bench: --steps must be positive");
  if (threads > 0) omp_set_num_threads(threads);
  const uint64_t seed = static_cast<uint64_t>(recipe.integer("train.seed"));
  Generator init_gen(seed);
  Generator data_gen(seed + 2 + static_cast<uint64_t>(comm.rank()));  // each rank its own batch
  const Device device = run::recipe_device(recipe);
  run::check_device_communicator(device, comm.size(), comm.backend());  // before any work on the device
  BenchModel bench = model_kind(recipe.string("model.kind")).make_bench(recipe, init_gen, data_gen, device);
  nn::Module& model = *bench.module;
  model.set_generator(std::make_shared<Generator>(seed + 1));
  model.train();
  // Initialised on the CPU (the same numbers on every device), then moved;
  // the inputs were made on the device already.
  model.to(device);

  std::vector<optim::OptimParam> params;
  for (const Tensor& p : model.parameters()) params.push_back({p, true});
  const std::unique_ptr<optim::Optimizer> optimizer =
      optim::make_optimizer(run::optimizer_options(recipe), std::move(params));
  run::broadcast_from_rank0(comm, model.parameters());
  BucketOptions bucket_options;
  bucket_options.bucket_bytes = static_cast<int64_t>(recipe.real("train.dist_bucket_mb") * (1 << 20));
  bucket_options.overlap = recipe.boolean("train.dist_overlap");
  bucket_options.bf16 = recipe.string("train.dist_grad_dtype") == "bf16";
  GradientBuckets buckets(model.parameters(), comm, bucket_options);

  BenchResult r;
  r.attention = bench.attention;
  r.device = run::describe_device(device);
  r.unit = bench.unit;
  r.parameters = model.num_parameters();
  r.threads = omp_get_max_threads();
  r.ranks = comm.size();
  r.target_tokens = bench.units_per_rank * comm.size();
  std::vector<double> exchange_ms;
  const bool bf16 = recipe.boolean("train.bf16");
  backend::set_f32_matmul_tf32(recipe.boolean("train.tf32"));
  double timed_seconds = 0;
  run::DeviceMemory at_warmup_end;
  std::map<std::string, uint64_t> syncs_at_warmup_end;  // the emulated GPU's host waits by cause
  nn::reset_attention_paths();  // this run's places only
  for (int i = 0; i < warmup + steps; ++i) {
    if (i == warmup) at_warmup_end = run::device_memory(device);
    if (i == warmup) syncs_at_warmup_end = emulated_host_syncs_by_cause();
    // Step 0 counts the GEMM work (the profile's FLOP count); timed steps run
    // unprofiled unless asked.
    const bool count_flops = i == 0, profiled = profile && i >= warmup;
    if (count_flops || (profile && i == warmup)) backend::reset_profile();
    backend::set_profiling(count_flops || profiled);
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t syncs_before = emulated_host_syncs();
    autograd::DeferredChecks device_checks;  // the ids' and targets' range checks, after the step (as the trainer)
    std::optional<autograd::DeferredChecks::Scope> deferred(std::in_place, device_checks);
    autograd::AutocastGuard autocast(bf16);
    optimizer->zero_grad();
    Tensor loss = bench.loss();
    buckets.arm();
    loss.backward();
    const double exposed_before = buckets.exposed_seconds();
    {
      backend::ProfilePhase phase("exchange");
      buckets.finish(1.0f / static_cast<float>(comm.size()));  // every rank has as many units: the mean of means
    }
    {
      backend::ProfilePhase phase("optimizer");
      optimizer->step();
    }
    const int64_t syncs = static_cast<int64_t>(emulated_host_syncs() - syncs_before);
    deferred.reset();
    // Reading the loss waits for the device's queue: on a GPU the step ends there.
    const float l = loss.item();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    device_checks.run();
    if (count_flops) r.gemm_flops_per_step = gemm_flops_of(backend::profile_rows()) * comm.size();
    if (i == 0) r.first_loss = l;
    r.last_loss = l;
    if (i >= warmup) {
      if (cuda_emulated_async() && !device.is_cpu()) r.host_syncs_per_step = std::max(r.host_syncs_per_step, syncs);
      timed_seconds += ms / 1000.0;
      r.step_ms.push_back(ms);
      exchange_ms.push_back(1000.0 * (buckets.exposed_seconds() - exposed_before));
    }
  }
  backend::set_profiling(false);
  if (r.host_syncs_per_step >= 0) {
    // What made the host wait in the timed steps (the loss read at each step's end included).
    for (const auto& [cause, n] : emulated_host_syncs_by_cause()) {
      const auto before = syncs_at_warmup_end.find(cause);
      const uint64_t d = n - (before == syncs_at_warmup_end.end() ? 0 : before->second);
      if (d == 0) continue;
      char per_step[32];
      std::snprintf(per_step, sizeof per_step, "%.1f", static_cast<double>(d) / std::max(steps, 1));
      r.host_sync_causes += (r.host_sync_causes.empty() ? "" : ", ") + cause + " " + per_step;
    }
  }
  for (const nn::AttentionPathRecord& p : nn::attention_paths())
    r.attention_paths.push_back({p.place, p.unfused_calls == 0 ? "fused" : p.fused_calls == 0 ? "unfused" : "mixed"});
  r.attention_paths_report = nn::attention_paths_report();
  if (profile) r.profile = backend::profile_table(backend::profile_rows(), timed_seconds, steps);
  r.peak_rss_mb = process_peak_rss_mb();
  r.peak_tensor_mb = peak_cpu_tensor_mb();
  const run::DeviceMemory at_end = run::device_memory(device);
  if (at_end.known) {
    r.gpu_peak_reserved_mb = at_end.peak_reserved_mb;
    r.gpu_pool_growths_timed = static_cast<int64_t>(at_end.pool_growths - at_warmup_end.pool_growths);
  }
  r.step_ms_median = median(r.step_ms);
  r.exchange_ms_median = comm.size() > 1 ? median(exchange_ms) : 0.0;
  r.tokens_per_s = static_cast<double>(r.target_tokens) / (r.step_ms_median / 1000.0);
  return r;
}

std::string BenchResult::json(const std::string& recipe_name) const {
  nlohmann::json j = {{"framework", "cmha"},         {"recipe", recipe_name},
                      {"attention", attention},      {"parameters", parameters},
                      {"device", device},
                      {"gpu_peak_reserved_mb", gpu_peak_reserved_mb},
                      {"gpu_pool_growths_timed", gpu_pool_growths_timed},
                      {"host_syncs_per_step", host_syncs_per_step},
                      {"threads", threads},          {"ranks", ranks},
                      {"target_tokens", target_tokens}, {"exchange_ms_median", exchange_ms_median},
                      {"steps", step_ms.size()},     {"step_ms_median", step_ms_median},
                      {"unit", unit},                {"units_per_s", tokens_per_s},
                      {unit == "images" ? "images_per_s" : "tokens_per_s", tokens_per_s},
                      {"gemm_tflop_per_step", gemm_flops_per_step / 1e12}, {"first_loss", first_loss},
                      {"last_loss", last_loss},      {"peak_rss_mb", peak_rss_mb},
                      {"peak_tensor_mb", peak_tensor_mb}};
  nlohmann::json paths = nlohmann::json::object();  // place -> fused | unfused | mixed
  for (const auto& [place, path] : attention_paths) paths[place] = path;
  j["attention_paths"] = paths;
  return j.dump();
}

}  // namespace cmha::train
