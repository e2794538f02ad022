#include "nn/attention/attention.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <numeric>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "backend/kernels.h"
#include "tensor/device.h"

namespace cmha::nn {

namespace {

std::mutex& paths_mutex() {
  static std::mutex m;
  return m;
}
std::vector<AttentionPathRecord>& path_records() {
  static std::vector<AttentionPathRecord> records;
  return records;
}

void record_path(const std::string& place, const char* type, bool fused, const std::string& reason) {
  std::lock_guard<std::mutex> lock(paths_mutex());
  auto& records = path_records();
  auto it = std::find_if(records.begin(), records.end(),
                         [&](const AttentionPathRecord& r) { return r.place == place && r.type == type; });
  if (it == records.end()) {
    AttentionPathRecord fresh;
    fresh.place = place;
    fresh.type = type;
    records.push_back(fresh);
    it = records.end() - 1;
  }
  int64_t& calls = fused ? it->fused_calls : it->unfused_calls;
  std::string& first = fused ? it->fused_reason : it->unfused_reason;
  if (calls++ == 0) first = reason;
}

// x cast to `dtype` with its memory layout kept (a [B, T, H, d] tensor seen
// as [B, H, T, d] stays so): cast the stored order, then view it back.
Tensor cast_keep_layout(const Tensor& x, DType dtype) {
  std::vector<int64_t> order(static_cast<size_t>(x.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x.strides()[a] > x.strides()[b]; });
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return x.permute(order).to(dtype).permute(inverse);
}

// Zero columns up to a multiple of 8 in the last dim (cuDNN's head sizes):
// on both q and k they do not change q·kᵀ.
Tensor pad_head_size(const Tensor& x, int64_t width) {
  if (x.size(3) == width) return x;
  Shape pad = x.shape();
  pad[3] = width - x.size(3);
  return concat({x, Tensor::zeros(pad, x.dtype(), x.device())}, 3);
}

}  // namespace

namespace {
std::atomic<bool>& fused_switch() {
  static std::atomic<bool> on = [] {
    const char* v = std::getenv("CMHA_FUSED_ATTENTION");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}
}  // namespace

bool fused_attention_enabled() { return fused_switch().load(); }
void set_fused_attention_enabled(bool on) { fused_switch().store(on); }

std::vector<AttentionPathRecord> attention_paths() {
  std::lock_guard<std::mutex> lock(paths_mutex());
  return path_records();
}

void reset_attention_paths() {
  std::lock_guard<std::mutex> lock(paths_mutex());
  path_records().clear();
}

std::string attention_paths_report() {
  const std::vector<AttentionPathRecord> records = attention_paths();
  if (records.empty()) return "";
  std::string out = "attention paths:\n";
  for (const AttentionPathRecord& r : records) {
    out += "  " + r.place + " (" + r.type + "): ";
    if (r.unfused_calls == 0)
      out += "fused: " + r.fused_reason;
    else if (r.fused_calls == 0)
      out += "unfused: " + r.unfused_reason;
    else
      out += "fused " + std::to_string(r.fused_calls) + " calls (" + r.fused_reason + "), unfused " +
             std::to_string(r.unfused_calls) + " calls (" + r.unfused_reason + ")";
    out += "\n";
  }
  return out;
}

Attention::Attention(const AttentionConfig& cfg, int64_t d_model) : cfg_(cfg) {
  if (cfg_.key_dim == 0) cfg_.key_dim = d_model;
  if (cfg_.value_dim == 0) cfg_.value_dim = d_model;
  CMHA_CHECK(cfg_.heads > 0, "attention.heads must be positive, got " + std::to_string(cfg_.heads));
  CMHA_CHECK(cfg_.value_dim % cfg_.heads == 0, "attention.value_dim (" + std::to_string(cfg_.value_dim) +
                                                   ") must be divisible by attention.heads (" +
                                                   std::to_string(cfg_.heads) + ")");
  CMHA_CHECK(cfg_.dropout >= 0.0f && cfg_.dropout < 1.0f,
             "attention.dropout must be in [0, 1), got " + std::to_string(cfg_.dropout));
  attn_drop_ = register_module("attn_drop", std::make_shared<Dropout>(cfg_.dropout));
}

Tensor Attention::merge_heads(const Tensor& heads) const {
  // [B, H, Tq, dv] -> [B, Tq, H, dv] -> [B, Tq, H·dv] -> [B, Tq, D]
  Tensor x = heads.permute({0, 2, 1, 3});
  x = x.reshape({x.size(0), x.size(1), cfg_.value_dim});
  return out_proj->forward(x);
}

Tensor Attention::fused_heads(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                              const AttentionMask& mask, int64_t key_offset) const {
  const Device dev = q.device();
  const int64_t Tk = k.size(2);
  // Every check that needs no cast comes first: the CPU and the emulated
  // device return here, before anything is computed.
  std::string reason;
  bool causal = mask.causal;
  if (dev.is_cpu()) {
    reason = "CPU: cmha's unfused path";
  } else if (cuda_emulated()) {
    reason = "emulated CUDA device (the CPU's kernels): cmha's unfused path";
  } else if (!fused_attention_enabled()) {
    reason = "fused attention is off (CMHA_FUSED_ATTENTION=0): cmha's unfused path";
  } else if (q.dtype() == DType::f32 && !autograd::autocast_bf16()) {
    reason = "f32 operands (train.bf16 off): fused attention takes bf16 or f16";
  } else if (q.numel() == 0 || k.numel() == 0 || v.numel() == 0) {
    reason = "an empty batch: cmha's unfused path";
  } else if (causal && key_offset > 0 && key_offset < Tk - 1) {
    // cmha hides key j from query i when j > i + key_offset; cuDNN's top-left
    // mask has no offset, and its bottom-right one aligns to each row's length.
    reason = "a causal mask over a decoding cache with several new queries: cmha's unfused path";
  }
  if (!reason.empty()) {
    record_path(place_, type(), false, reason);
    return Tensor();
  }
  if (causal && key_offset > 0) causal = false;  // key_offset >= Tk - 1: every key is visible to every query
  Tensor qf = q, kf = k, vf = v;
  if (q.dtype() == DType::f32) {  // bf16 autocast: the attention core runs in bf16, f32 accumulation
    qf = cast_keep_layout(q, DType::bf16);
    kf = cast_keep_layout(k, DType::bf16);
    vf = cast_keep_layout(v, DType::bf16);
  }
  const int64_t width = (q.size(3) + 7) / 8 * 8;
  qf = pad_head_size(qf, width);
  kf = pad_head_size(kf, width);
  FusedAttentionOptions o;
  o.scale = scale;
  o.causal = causal;
  o.key_padding = mask.key_padding;
  o.dropout = attn_drop_->is_training() ? attn_drop_->p : 0.0f;
  if (o.dropout > 0) o.generator = &attn_drop_->generator("attention dropout");
  const bool fused = fused_attention_supported(qf, kf, vf, o, reason);
  record_path(place_, type(), fused, reason);
  if (!fused) return Tensor();
  Tensor heads = fused_attention(qf, kf, vf, o);  // [B, Hq, Tq, Dv]
  return q.dtype() == heads.dtype() ? heads : cast_keep_layout(heads, q.dtype());
}

void Attention::note_unfused(const std::string& reason) const { record_path(place_, type(), false, reason); }

Tensor split_heads(const Tensor& x, int64_t heads) {
  // [B, T, H·d] -> [B, T, H, d] -> [B, H, T, d]
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).permute({0, 2, 1, 3});
}

std::vector<Tensor> project_stacked(const Tensor& x, const std::vector<Projection>& projections) {
  std::vector<Tensor> weights, biases;
  std::vector<int64_t> widths;
  bool any_bias = false;
  for (const Projection& p : projections) {
    weights.push_back(p.weight);
    widths.push_back(p.weight.size(0));
    any_bias = any_bias || p.bias.defined();
  }
  if (any_bias)
    for (const Projection& p : projections)  // a map without bias adds zeros
      biases.push_back(p.bias.defined() ? p.bias : Tensor::zeros({p.weight.size(0)}, DType::f32, p.weight.device()));
  Tensor out = linear(x, concat(weights, 0), any_bias ? concat(biases, 0) : Tensor());  // [..., Σ n_i]
  return split(out, widths, -1);
}

Tensor attention_weights(Tensor scores, const AttentionMask& mask, int64_t key_offset, const Dropout& drop,
                         DType probs_dtype, const HeadMixing& mixing) {
  const int64_t B = scores.size(0), H = scores.size(1), Tq = scores.size(2), Tk = scores.size(3);
  if (mixing.logits.defined())  // [H, H] @ [B, H, Tq·Tk] -> [B, H, Tq·Tk]
    scores = matmul(mixing.logits, scores.reshape({B, H, Tq * Tk}), scores.dtype()).view({B, H, Tq, Tk});
  const float neg_inf = -std::numeric_limits<float>::infinity();
  if (mask.key_padding.defined()) {
    CMHA_CHECK(mask.key_padding.dim() == 2 && mask.key_padding.size(0) == B && mask.key_padding.size(1) == Tk,
               "attention: key padding mask " + mask.key_padding.describe() + " does not match batch " +
                   std::to_string(B) + " × keys " + std::to_string(Tk));
    scores = masked_fill(scores, mask.key_padding.view({B, 1, 1, Tk}), neg_inf);
  }
  if (mask.causal) {
    // key j is hidden from query i when j > i + key_offset
    Tensor future = Tensor::empty({Tq, Tk}, DType::b8, scores.device());
    CMHA_KERNEL(future.device(), mask.causal)(future, key_offset);
    scores = masked_fill(scores, future, neg_inf);
  }
  Tensor probs = softmax(scores, -1, probs_dtype);
  if (mixing.weights.defined())
    probs = matmul(mixing.weights, probs.reshape({B, H, Tq * Tk})).view({B, H, Tq, Tk});
  return drop.forward(probs);
}

int64_t cached_keys_values(AttentionCache* cache, Tensor& key, Tensor& value,
                           const std::function<void(Tensor&, Tensor&)>& project, int64_t key_time_dim,
                           int64_t value_time_dim) {
  if (!cache) {
    project(key, value);
    return 0;
  }
  if (cache->static_kv) {
    if (!cache->key.defined()) {
      project(cache->key, cache->value);
      cache->length = cache->key.size(key_time_dim);
    }
    key = cache->key;
    value = cache->value;
    return 0;
  }
  const int64_t before = cache->length;
  project(key, value);
  if (cache->key.defined()) {
    key = concat({cache->key, key}, key_time_dim);
    value = concat({cache->value, value}, value_time_dim);
  }
  cache->key = key;
  cache->value = value;
  cache->length = key.size(key_time_dim);
  return before;
}

}  // namespace cmha::nn
