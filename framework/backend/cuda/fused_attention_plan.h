#pragma once
// Whether one attention place can run as cuDNN's fused SDPA ("flash
// attention") or must take cmha's unfused path (matmul, mask, softmax,
// dropout, matmul), decided on the CPU, without a GPU, from the place's
// shape and the target GPU's SM version.
//
// The decision builds the cudnn-frontend SDPA graph (third_party/cudnn-frontend,
// v1.19.1) for the forward pass and, when training, the backward pass, and
// runs the frontend's own checks (Graph::validate) with the SM version set on
// the graph (Graph::set_sm_version), so that no device is queried. validate()
// needs libcudnn loaded (it asks cudnnGetVersion which checks apply) but no
// GPU and no cudnnHandle. It is the frontend's support surface, not the
// backend's engine list: a graph that validates can still find no engine
// when it is built on the GPU (cudnnHandle, heuristics), so the op that runs
// it must keep the unfused path as its fallback.
//
// Mapping of cmha's attention types to cuDNN's SDPA (Q [B,Hq,Tq,Dqk],
// K [B,Hk,Tk,Dqk], V [B,Hv,Tk,Dv], Hq % Hk == Hq % Hv == 0):
//   concat         Hq = Hk = Hv = H, Dqk = key_dim/H, Dv = value_dim/H, scale as the layer's
//   grouped        Hq = H, Hk = Hv = kv_heads (native GQA), Dqk = key_dim/H, Dv = value_dim/H
//   collaborative  multi-query: ONE key head [keys ‖ content bias] of width D̃k + H, every
//                  query head h = [scale·(q ⊙ m_h) ‖ scale·e_h] of the same width, Hv = H
//                  value heads, attention scale 1. The width is padded with zero columns
//                  (on both sides: the scores do not change) to the multiple of 8 cuDNN needs.
//   talking_heads  never fused: it mixes the logits (and the weights) across heads,
//                  which no fused kernel does.
#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace cmha::cuda {

enum class AttentionKind { concat, grouped, collaborative, talking_heads };

// "concat", "grouped", "collaborative" or "talking_heads" (the recipe's
// attention.type); anything else is a cmha::Error.
AttentionKind attention_kind(const std::string& type);

// What the layer's configuration says (nn::AttentionConfig after the layer
// resolved key_dim/value_dim 0 to d_model).
struct AttentionLayout {
  AttentionKind kind = AttentionKind::concat;
  int64_t heads = 8;
  int64_t kv_heads = 1;   // grouped only
  int64_t key_dim = 0;    // total query/key width D_k (D̃k for collaborative)
  int64_t value_dim = 0;  // total value width
  float scale = 1.0f;     // the layer's score scale (Attention::scale())
};

// One SDPA problem in cuDNN's terms.
struct SdpaShape {
  int64_t batch = 1, heads_q = 1, heads_k = 1, heads_v = 1;
  int64_t tq = 1, tk = 1;
  int64_t qk_dim = 0;        // per-head query/key width cuDNN sees (after any padding)
  int64_t qk_dim_used = 0;   // the width that carries data (collaborative: D̃k + H)
  int64_t v_dim = 0;
  float scale = 1.0f;        // applied by cuDNN to Q·Kᵀ
};

// The SDPA shape of a layout (talking_heads has none: a cmha::Error).
SdpaShape sdpa_shape(const AttentionLayout& layout, int64_t batch, int64_t tq, int64_t tk);

struct FusedAttentionRequest {
  AttentionLayout layout;
  int64_t batch = 1, tq = 1, tk = 1;
  DType dtype = DType::bf16;  // bf16 or f16; f32 has no fused path
  bool causal = false;        // top-left causal (query t sees keys 0..t: training, no cache)
  bool key_padding = false;   // padding at the end of each key row (cuDNN's padding mask)
  float dropout = 0.0f;       // on the attention weights (cuDNN's Philox stream, not cmha's)
  bool training = false;      // also plan the backward pass
  bool deterministic = true;  // backward in a fixed order (cmha's kernels are order-defined)
  int sm = 90;                // target SM version: 80, 90, 100, ...
};

enum class AttentionPath { fused, unfused };

struct FusedAttentionDecision {
  AttentionPath path = AttentionPath::unfused;
  std::string reason;  // one sentence
  SdpaShape shape;     // what was planned (zeros for talking_heads)
};

FusedAttentionDecision plan_fused_attention(const FusedAttentionRequest& request);
// The same checks for an SDPA shape given directly (what the fused op sees at
// run time: its operands' heads and head sizes); request.layout and its
// batch/tq/tk are not read.
FusedAttentionDecision plan_sdpa(const FusedAttentionRequest& request, const SdpaShape& shape);

// "" when libcudnn loaded (the frontend's checks can run), else why not.
std::string cudnn_unavailable_reason();
// The loaded libcudnn's version (cudnnGetVersion: 91900 for 9.19.0); 0 when none.
int64_t cudnn_version();

}  // namespace cmha::cuda
