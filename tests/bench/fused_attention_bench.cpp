// Fused (cuDNN SDPA) against cmha's unfused attention on a GPU, for
// tests/gpu/check.sh. Not a Google Benchmark program (the GPU bundle has no
// such library): built with the tests (tests/CMakeLists.txt).
//
// Part 1: one self-attention layer, forward + backward under bf16 autocast
// (as train.bf16 runs it), per attention type (concat, grouped with
// kv_heads = H/4, collaborative) at each D_k of the recipes, at the WMT shape
// (128 sentences × 30 tokens, d 512, 8 heads: recipes/wmt14_en_de) and the
// DeiT-B3 shape (128 images × 197 tokens, d 768, 12 heads:
// recipes/deit_b3_imagenet); the median of --iters steps after 3 warm-ups,
// fused and unfused (nn::set_fused_attention_enabled). The layer includes
// its projections, the same on both paths.
// Part 2: decoding sentences/s of greedy and beam search (beam 4) on a small
// random transformer (d 256, 3+3 layers, collaborative), the GPU in f32 and
// the CPU, on the same batch.
//
//   fused_attention_bench [--iters N] [--decode-sentences N] [--skip-decode]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "eval/beam_search.h"
#include "nn/attention/attention.h"
#include "nn/transformer.h"
#include "tensor/cuda_runtime.h"
#include "tensor/device.h"

using namespace cmha;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Shape {
  const char* name;
  int64_t batch, tokens, d_model, heads;
  std::vector<int64_t> key_dims;
};

struct Timing {
  double ms = 0;
  std::string path;  // "fused" | "unfused" and the reason when not fused
};

// Median ms of forward + backward of one layer.
Timing time_layer(const std::string& type, const Shape& s, int64_t key_dim, bool fused, int iters) {
  nn::set_fused_attention_enabled(fused);
  nn::AttentionConfig c;
  c.type = type;
  c.heads = s.heads;
  c.key_dim = key_dim;
  c.kv_heads = std::max<int64_t>(1, s.heads / 4);
  if (type == "collaborative") c.mixing_init = "normal";
  Generator g(1);
  auto layer = nn::make_attention(c, s.d_model, g);
  layer->set_place("bench");
  layer->set_generator(std::make_shared<Generator>(2));
  layer->to(Device::cuda(0));
  Generator data(3);
  Tensor x = Tensor::empty({s.batch, s.tokens, s.d_model});
  normal_(x, data);
  x = x.to(Device::cuda(0)).set_requires_grad(true);
  nn::reset_attention_paths();
  std::vector<double> ms;
  for (int i = 0; i < iters + 3; ++i) {
    const double t0 = now_ms();
    {
      autograd::AutocastGuard autocast(true);
      Tensor y = layer->forward(x, x, nn::AttentionMask{});
      sum(y).backward();
    }
    cuda_synchronize(0, "fused_attention_bench");
    if (i >= 3) ms.push_back(now_ms() - t0);
  }
  Timing t;
  t.ms = median(ms);
  const std::vector<nn::AttentionPathRecord> paths = nn::attention_paths();
  if (!paths.empty())
    t.path = paths[0].unfused_calls == 0 ? "fused" : "unfused (" + paths[0].unfused_reason + ")";
  return t;
}

void attention_table(int iters) {
  const Shape shapes[] = {{"WMT", 128, 30, 512, 8, {64, 128, 256, 512}},
                          {"DeiT-B3", 128, 197, 768, 12, {96, 192, 384, 768}}};
  std::printf("\nattention layer forward+backward, bf16 autocast, median of %d (ms)\n", iters);
  std::printf("%-8s %-14s %5s %10s %10s %8s  %s\n", "shape", "type", "D_k", "fused", "unfused", "speedup", "path");
  for (const Shape& s : shapes)
    for (const char* type : {"concat", "grouped", "collaborative"})
      for (int64_t dk : s.key_dims) {
        if (std::string(type) != "collaborative" && dk % s.heads != 0) continue;
        const Timing f = time_layer(type, s, dk, true, iters);
        const Timing u = time_layer(type, s, dk, false, iters);
        std::printf("%-8s %-14s %5lld %10.3f %10.3f %7.2fx  %s\n", s.name, type, static_cast<long long>(dk), f.ms,
                    u.ms, f.ms > 0 ? u.ms / f.ms : 0.0, f.path.c_str());
        std::fflush(stdout);
      }
  nn::set_fused_attention_enabled(true);
}

// Sentences/s of one search on `device`.
double decode_rate(const nn::Transformer& model, const Tensor& src, const Tensor& pad, int64_t beam) {
  eval::SearchOptions o;
  o.beam = beam;
  o.max_len_a = 1.0;
  o.max_len_b = 5;  // random weights rarely say EOS: the lengths are the cap on both devices
  (void)eval::generate(model, src, pad, o);  // warm-up (plans, pools)
  const double t0 = now_ms();
  (void)eval::generate(model, src, pad, o);
  const double s = (now_ms() - t0) / 1000.0;
  return static_cast<double>(src.size(0)) / s;
}

void decoding_table(int64_t sentences) {
  nn::TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 8000;
  c.d_model = 256;
  c.ffn_dim = 1024;
  c.encoder_layers = c.decoder_layers = 3;
  for (nn::AttentionConfig* a : {&c.encoder_attention, &c.decoder_attention, &c.cross_attention}) {
    a->type = "collaborative";
    a->heads = 4;
    a->key_dim = 128;
  }
  Generator g(5);
  nn::Transformer cpu_model(c, g);
  Generator g2(5);
  nn::Transformer gpu_model(c, g2);
  cpu_model.eval();
  gpu_model.eval();
  gpu_model.to(Device::cuda(0));
  const int64_t S = 24;
  std::vector<int64_t> ids(static_cast<size_t>(sentences * S));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = 3 + static_cast<int64_t>((i * 2654435761u) % 7990);
  Tensor src = Tensor::from_vector_i64(ids, {sentences, S});
  Tensor pad = Tensor::zeros({sentences, S}, DType::b8);
  std::printf("\ndecoding, %lld sentences of %lld tokens, d 256, 3+3 layers, f32 (sentences/s)\n",
              static_cast<long long>(sentences), static_cast<long long>(S));
  std::printf("%-8s %12s %12s %8s\n", "search", "GPU", "CPU", "GPU/CPU");
  for (int64_t beam : {int64_t{1}, int64_t{4}}) {
    const double gpu = decode_rate(gpu_model, src.to(Device::cuda(0)), pad.to(Device::cuda(0)), beam);
    const double cpu = decode_rate(cpu_model, src, pad, beam);
    std::printf("%-8s %12.1f %12.1f %7.1fx\n", beam == 1 ? "greedy" : "beam 4", gpu, cpu, cpu > 0 ? gpu / cpu : 0.0);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 10;
  int64_t sentences = 128;
  bool decode = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--decode-sentences") && i + 1 < argc) sentences = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--skip-decode")) decode = false;
    else {
      std::fprintf(stderr, "usage: fused_attention_bench [--iters N] [--decode-sentences N] [--skip-decode]\n");
      return 2;
    }
  }
  if (cuda_device_count() == 0 || cuda_emulated()) {
    std::printf("fused_attention_bench: no GPU here; nothing to time\n");
    return 0;
  }
  try {
    attention_table(iters);
    if (decode) decoding_table(sentences);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fused_attention_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
