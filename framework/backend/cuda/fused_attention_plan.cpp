#include "backend/cuda/fused_attention_plan.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <vector>

#include "backend/cuda/cudnn_frontend_api.h"
#include "tensor/error.h"

namespace cmha::cuda {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// cmha's split_heads layout: [B, T, H·d] viewed as [B, H, T, d], strides (T·H·d, d, H·d, 1).
TensorPtr heads_tensor(fe::graph::Graph& g, const char* name, int64_t b, int64_t h, int64_t t, int64_t d) {
  return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_dim({b, h, t, d}).set_stride({t * h * d, d, h * d, 1}));
}

void set_heads_layout(const TensorPtr& x, int64_t b, int64_t h, int64_t t, int64_t d) {
  x->set_output(true).set_dim({b, h, t, d}).set_stride({t * h * d, d, h * d, 1});
}

TensorPtr scalar_tensor(fe::graph::Graph& g, const char* name, int64_t b, fe::DataType_t type) {
  return g.tensor(
      fe::graph::Tensor_attributes().set_name(name).set_dim({b, 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(type));
}

std::shared_ptr<fe::graph::Graph> new_graph(const FusedAttentionRequest& r) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(r.dtype == DType::f16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT)
      // Before any node is added: each node copies the graph's context when it
      // is created, and with a version set no check asks the device
      // (detail::Context::populate_sm_version_from_device returns at once).
      .set_sm_version(r.sm);
  return g;
}

// The masks and dropout shared by the forward and backward attributes.
template <typename Attributes>
void set_masks(fe::graph::Graph& g, Attributes& a, const FusedAttentionRequest& r, const SdpaShape& s) {
  a.set_attn_scale(s.scale);
  if (r.causal) a.set_causal_mask(true);  // top-left: diagonal band right bound 0
  if (r.key_padding)                       // every query row kept (seq_len_q = Tq); keys cut at seq_len_kv
    a.set_padding_mask(true)
        .set_seq_len_q(scalar_tensor(g, "seq_len_q", s.batch, fe::DataType_t::INT32))
        .set_seq_len_kv(scalar_tensor(g, "seq_len_kv", s.batch, fe::DataType_t::INT32));
  if (r.dropout > 0)
    a.set_dropout(r.dropout, scalar_tensor(g, "seed", 1, fe::DataType_t::INT64),
                  scalar_tensor(g, "offset", 1, fe::DataType_t::INT64));
}

fe::error_t validate_forward(const FusedAttentionRequest& r, const SdpaShape& s) {
  auto g = new_graph(r);
  auto q = heads_tensor(*g, "Q", s.batch, s.heads_q, s.tq, s.qk_dim);
  auto k = heads_tensor(*g, "K", s.batch, s.heads_k, s.tk, s.qk_dim);
  auto v = heads_tensor(*g, "V", s.batch, s.heads_v, s.tk, s.v_dim);
  auto a = fe::graph::SDPA_attributes().set_name("cmha_attention_forward").set_generate_stats(r.training);
  set_masks(*g, a, r, s);
  auto [o, stats] = g->sdpa(q, k, v, a);
  set_heads_layout(o, s.batch, s.heads_q, s.tq, s.v_dim);
  if (stats) stats->set_output(true).set_data_type(fe::DataType_t::FLOAT);
  return g->validate();
}

fe::error_t validate_backward(const FusedAttentionRequest& r, const SdpaShape& s) {
  auto g = new_graph(r);
  auto q = heads_tensor(*g, "Q", s.batch, s.heads_q, s.tq, s.qk_dim);
  auto k = heads_tensor(*g, "K", s.batch, s.heads_k, s.tk, s.qk_dim);
  auto v = heads_tensor(*g, "V", s.batch, s.heads_v, s.tk, s.v_dim);
  auto o = heads_tensor(*g, "O", s.batch, s.heads_q, s.tq, s.v_dim);
  auto d_o = heads_tensor(*g, "dO", s.batch, s.heads_q, s.tq, s.v_dim);
  auto stats = g->tensor(fe::graph::Tensor_attributes()
                             .set_name("Stats")
                             .set_dim({s.batch, s.heads_q, s.tq, 1})
                             .set_stride({s.heads_q * s.tq, s.tq, 1, 1})
                             .set_data_type(fe::DataType_t::FLOAT));
  auto a = fe::graph::SDPA_backward_attributes()
               .set_name("cmha_attention_backward")
               .set_deterministic_algorithm(r.deterministic);
  set_masks(*g, a, r, s);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, d_o, stats, a);
  set_heads_layout(dq, s.batch, s.heads_q, s.tq, s.qk_dim);
  set_heads_layout(dk, s.batch, s.heads_k, s.tk, s.qk_dim);
  set_heads_layout(dv, s.batch, s.heads_v, s.tk, s.v_dim);
  return g->validate();
}

std::string describe(const SdpaShape& s) {
  return "heads " + std::to_string(s.heads_q) + "/" + std::to_string(s.heads_k) + "/" + std::to_string(s.heads_v) +
         ", qk head size " + std::to_string(s.qk_dim) + ", v head size " + std::to_string(s.v_dim);
}

// The frontend's check as one sentence: "<what> on sm_90 (<shape>): <its message>".
FusedAttentionDecision unfused(const std::string& what, const FusedAttentionRequest& r, const SdpaShape& s,
                               const std::string& message) {
  return {AttentionPath::unfused,
          what + " on sm_" + std::to_string(r.sm) + " (" + describe(s) + ") is not supported: " + message, s};
}

}  // namespace

AttentionKind attention_kind(const std::string& type) {
  if (type == "concat") return AttentionKind::concat;
  if (type == "grouped") return AttentionKind::grouped;
  if (type == "collaborative") return AttentionKind::collaborative;
  if (type == "talking_heads") return AttentionKind::talking_heads;
  throw Error("fused attention plan: unknown attention type '" + type +
              "'; expected concat, grouped, collaborative or talking_heads");
}

SdpaShape sdpa_shape(const AttentionLayout& l, int64_t batch, int64_t tq, int64_t tk) {
  const int64_t H = l.heads;
  CMHA_CHECK(H > 0 && l.key_dim > 0 && l.value_dim > 0 && l.value_dim % H == 0,
             "fused attention plan: heads " + std::to_string(H) + ", key_dim " + std::to_string(l.key_dim) +
                 ", value_dim " + std::to_string(l.value_dim) + " do not make heads");
  SdpaShape s;
  s.batch = batch;
  s.tq = tq;
  s.tk = tk;
  s.heads_q = H;
  s.v_dim = l.value_dim / H;
  switch (l.kind) {
    case AttentionKind::concat:
    case AttentionKind::grouped: {
      CMHA_CHECK(l.key_dim % H == 0, "fused attention plan: key_dim " + std::to_string(l.key_dim) +
                                         " is not divisible by heads " + std::to_string(H));
      const int64_t kv = l.kind == AttentionKind::grouped ? l.kv_heads : H;
      CMHA_CHECK(kv > 0 && H % kv == 0, "fused attention plan: kv_heads " + std::to_string(kv) +
                                            " does not divide heads " + std::to_string(H));
      s.heads_k = s.heads_v = kv;
      s.qk_dim = s.qk_dim_used = l.key_dim / H;
      s.scale = l.scale;
      break;
    }
    case AttentionKind::collaborative:
      // scores_h = scale·(q m_h kᵀ + c_h·y) = [scale·q⊙m_h ‖ scale·e_h] · [k ‖ c·y]ᵀ
      s.heads_k = 1;
      s.heads_v = H;
      s.qk_dim_used = l.key_dim + H;
      s.qk_dim = round_up(s.qk_dim_used, 8);
      s.scale = 1.0f;  // folded into the queries
      break;
    case AttentionKind::talking_heads:
      throw Error("fused attention plan: talking_heads has no SDPA shape (it mixes logits across heads)");
  }
  return s;
}

std::string cudnn_unavailable_reason() {
  const CudnnLibrary& lib = cudnn_library();
  if (lib.loaded) return "";
  return "cuDNN could not be loaded (tried " + lib.file + ": " + lib.reason + ")";
}

int64_t cudnn_version() {
  if (!cudnn_library().loaded) return 0;
  return static_cast<int64_t>(fe::detail::get_backend_version());
}

FusedAttentionDecision plan_fused_attention(const FusedAttentionRequest& r) {
  if (r.layout.kind == AttentionKind::talking_heads)
    return {AttentionPath::unfused, "talking-heads attention mixes the logits across heads, which no fused kernel does",
            {}};
  return plan_sdpa(r, sdpa_shape(r.layout, r.batch, r.tq, r.tk));
}

FusedAttentionDecision plan_sdpa(const FusedAttentionRequest& r, const SdpaShape& s) {
  if (r.dtype != DType::bf16 && r.dtype != DType::f16)
    return {AttentionPath::unfused,
            std::string("fused attention takes bf16 or f16 inputs, not ") + dtype_name(r.dtype), s};
  if (const std::string why = cudnn_unavailable_reason(); !why.empty())
    return {AttentionPath::unfused, why, s};
  try {
    if (fe::error_t e = validate_forward(r, s); !e.is_good())
      return unfused(r.training ? "the forward pass (with stats)" : "the forward pass", r, s, e.get_message());
    // The frontend checks the forward head size only for backends up to 9.9
    // (sdpa_support_surface.h: "head_dim should be less than or equal to 128/256
    // for backend version 9.9 or below") and leaves newer ones to the engines.
    // cuDNN's SDPA support matrix (docs.nvidia.com/deeplearning/cudnn/frontend/
    // latest/operations/Attention.html, backend 9.18.1) gives d <= 256 for the
    // fp16/bf16 forward ("prefill") on Ampere, Hopper and Blackwell.
    if (s.qk_dim > 256 || s.v_dim > 256)
      return unfused("the forward pass", r, s,
                     "head size " + std::to_string(std::max(s.qk_dim, s.v_dim)) +
                         " exceeds 256, the forward limit of cuDNN's SDPA support matrix");
    if (r.training) {
      if (fe::error_t e = validate_backward(r, s); !e.is_good())
        return unfused(r.deterministic ? "the deterministic backward pass" : "the backward pass", r, s,
                       e.get_message());
    }
  } catch (const std::exception& e) {  // the frontend throws for some graphs it cannot form
    return unfused(r.training ? "training attention" : "attention", r, s, e.what());
  }
  return {AttentionPath::fused,
          std::string("cuDNN ") + std::to_string(cudnn_version()) + " frontend validates the forward" +
              (r.training ? " and backward" : "") + " pass on sm_" + std::to_string(r.sm) + " (" + describe(s) + ")",
          s};
}

}  // namespace cmha::cuda
