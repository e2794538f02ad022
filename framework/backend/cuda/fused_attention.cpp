// Fused attention on CUDA through cuDNN's SDPA (backend/cuda/fused_attention.h).
//
// The graphs are the planner's (fused_attention_plan.cpp) with the operands'
// real strides and fixed uids, built on the device: validate, operation graph
// on the device's handle, heuristic A's execution plans, support check, plan
// build (Graph::build). One cache entry per key holds the forward graph and,
// when training, the backward graph; an entry that failed to build keeps its
// reason, so an unsupported shape is tried once and the layers fall back to
// their unfused path. Execution binds the tensors' addresses by uid (the
// variant pack) and a workspace of the plan's size from cmha's stream-ordered
// pool, on the device's compute stream.
#include "backend/cuda/fused_attention.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cudnn_frontend_api.h"
#include "backend/cuda/fused_attention_plan.h"
#include "backend/lru_cache.h"
#include "tensor/cuda_runtime.h"
#include "tensor/error.h"

namespace cmha::cuda {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kSeqQ, kSeqKv, kSeed, kOffset, kDO, kDQ, kDK, kDV };

// The strides cuDNN is given: a size-1 dim's stride is free in cmha (unsqueeze,
// a batch of one) but 0 there confuses cuDNN's layout inference, so such a
// stride becomes the product of the inner sizes (as PyTorch's cuDNN SDPA does).
std::vector<int64_t> sdpa_strides(const Tensor& t) {
  std::vector<int64_t> s(t.strides().begin(), t.strides().end());
  for (size_t d = 0; d < s.size(); ++d)
    if (t.shape()[d] == 1 && s[d] == 0) {
      int64_t inner = 1;
      for (size_t e = d + 1; e < s.size(); ++e) inner *= t.shape()[e];
      s[d] = inner;
    }
  return s;
}

// Equal strides on every dim of more than one element (a size-1 dim's stride
// never moves an address).
bool same_strides(const Shape& shape, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1 && a[d] != b[d]) return false;
  return true;
}
bool same_strides(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && same_strides(a.shape(), sdpa_strides(a), sdpa_strides(b));
}

// The output layout the entries promise: [B, Tq, H, Dv] contiguous seen as [B, H, Tq, Dv].
std::vector<int64_t> out_strides(int64_t h, int64_t tq, int64_t dv) { return {tq * h * dv, dv, h * dv, 1}; }

// Everything that shapes a graph.
struct GraphKey {
  std::array<int64_t, 28> v{};
  bool operator==(const GraphKey& o) const { return v == o.v; }
};
struct GraphKeyHash {
  size_t operator()(const GraphKey& k) const noexcept {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t x : k.v) h = (h ^ static_cast<uint64_t>(x)) * 0x100000001b3ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

int64_t float_bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

GraphKey key_of(const backend::FusedAttentionArgs& a) {
  GraphKey k;
  size_t i = 0;
  auto put = [&](int64_t x) { k.v[i++] = x; };
  put(a.q.device().index);
  put(static_cast<int64_t>(a.q.dtype()));
  put(a.training);
  put(a.causal);
  put(a.key_padding.defined());
  put(float_bits(a.scale));
  put(float_bits(a.dropout));
  put(a.q.size(0));  // B
  put(a.q.size(1));  // Hq
  put(a.k.size(1));  // Hk
  put(a.v.size(1));  // Hv
  put(a.q.size(2));  // Tq
  put(a.k.size(2));  // Tk
  put(a.q.size(3));  // Dqk
  put(a.v.size(3));  // Dv
  for (const Tensor* t : {&a.q, &a.k, &a.v})
    for (int64_t s : sdpa_strides(*t)) put(s);
  put(static_cast<int64_t>(i));  // 28: the key's own length, a check that every field went in
  return k;
}

// The shape in the planner's terms.
SdpaShape shape_of(const backend::FusedAttentionArgs& a) {
  SdpaShape s;
  s.batch = a.q.size(0);
  s.heads_q = a.q.size(1);
  s.heads_k = a.k.size(1);
  s.heads_v = a.v.size(1);
  s.tq = a.q.size(2);
  s.tk = a.k.size(2);
  s.qk_dim = s.qk_dim_used = a.q.size(3);
  s.v_dim = a.v.size(3);
  s.scale = a.scale;
  return s;
}

TensorPtr input(fe::graph::Graph& g, const char* name, Uid uid, const Tensor& t) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(std::vector<int64_t>(t.shape().begin(), t.shape().end()))
                      .set_stride(sdpa_strides(t)));
}

TensorPtr scalar_input(fe::graph::Graph& g, const char* name, Uid uid, int64_t n, fe::DataType_t type) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({n, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(type));
}

std::shared_ptr<fe::graph::Graph> new_graph(const backend::FusedAttentionArgs& a) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(a.q.dtype() == DType::f16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

// Scale, causal mask, key lengths and dropout: the same on both passes.
template <typename Attributes>
void set_masks(fe::graph::Graph& g, Attributes& attr, const backend::FusedAttentionArgs& a) {
  attr.set_attn_scale(a.scale);
  if (a.causal) attr.set_causal_mask(true);  // top-left diagonal, right bound 0: key j <= query t
  if (a.key_padding.defined())
    attr.set_padding_mask(true)
        .set_seq_len_q(scalar_input(g, "seq_len_q", kSeqQ, a.q.size(0), fe::DataType_t::INT32))
        .set_seq_len_kv(scalar_input(g, "seq_len_kv", kSeqKv, a.q.size(0), fe::DataType_t::INT32));
  if (a.dropout > 0)
    attr.set_dropout(a.dropout, scalar_input(g, "seed", kSeed, 1, fe::DataType_t::INT64),
                     scalar_input(g, "offset", kOffset, 1, fe::DataType_t::INT64));
}

std::shared_ptr<fe::graph::Graph> forward_graph(const backend::FusedAttentionArgs& a) {
  auto g = new_graph(a);
  auto q = input(*g, "Q", kQ, a.q), k = input(*g, "K", kK, a.k), v = input(*g, "V", kV, a.v);
  auto attr = fe::graph::SDPA_attributes().set_name("cmha_fused_attention").set_generate_stats(a.training);
  set_masks(*g, attr, a);
  auto [o, stats] = g->sdpa(q, k, v, attr);
  const int64_t B = a.q.size(0), H = a.q.size(1), Tq = a.q.size(2), Dv = a.v.size(3);
  o->set_output(true).set_uid(kO).set_dim({B, H, Tq, Dv}).set_stride(out_strides(H, Tq, Dv));
  if (a.training)
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({B, H, Tq, 1})
        .set_stride({H * Tq, Tq, 1, 1});
  return g;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const backend::FusedAttentionArgs& a) {
  auto g = new_graph(a);
  const int64_t B = a.q.size(0), H = a.q.size(1), Tq = a.q.size(2), Dv = a.v.size(3);
  auto q = input(*g, "Q", kQ, a.q), k = input(*g, "K", kK, a.k), v = input(*g, "V", kV, a.v);
  auto o = g->tensor(
      fe::graph::Tensor_attributes().set_name("O").set_uid(kO).set_dim({B, H, Tq, Dv}).set_stride(out_strides(H, Tq, Dv)));
  auto d_o = g->tensor(
      fe::graph::Tensor_attributes().set_name("dO").set_uid(kDO).set_dim({B, H, Tq, Dv}).set_stride(out_strides(H, Tq, Dv)));
  auto stats = g->tensor(fe::graph::Tensor_attributes()
                             .set_name("Stats")
                             .set_uid(kStats)
                             .set_dim({B, H, Tq, 1})
                             .set_stride({H * Tq, Tq, 1, 1})
                             .set_data_type(fe::DataType_t::FLOAT));
  // Deterministic: dK and dV sum the query heads that share a key head
  // (grouped, collaborative) in a fixed order, as cmha's kernels do.
  auto attr = fe::graph::SDPA_backward_attributes().set_name("cmha_fused_attention_backward").set_deterministic_algorithm(true);
  set_masks(*g, attr, a);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, d_o, stats, attr);
  dq->set_output(true).set_uid(kDQ).set_dim(std::vector<int64_t>(a.q.shape().begin(), a.q.shape().end())).set_stride(sdpa_strides(a.q));
  dk->set_output(true).set_uid(kDK).set_dim(std::vector<int64_t>(a.k.shape().begin(), a.k.shape().end())).set_stride(sdpa_strides(a.k));
  dv->set_output(true).set_uid(kDV).set_dim(std::vector<int64_t>(a.v.shape().begin(), a.v.shape().end())).set_stride(sdpa_strides(a.v));
  return g;
}

// One cudnnHandle per device, bound to the device's compute stream before each
// call; the mutex keeps one host thread at a time on a handle and its plans
// (cuDNN's execution plans are not promised thread-safe).
struct DeviceHandle {
  std::mutex mutex;
  cudnnHandle_t handle = nullptr;
};

void use_device(int index) {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != index)
    cuda_check(cudaSetDevice(index), "cudaSetDevice", "fused attention on cuda:" + std::to_string(index));
}

DeviceHandle& device_handle(int index) {
  static std::mutex mutex;
  static auto* handles = new std::map<int, std::unique_ptr<DeviceHandle>>;  // never destroyed: outlives static teardown
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<DeviceHandle>& h = (*handles)[index];
  if (!h) {
    auto fresh = std::make_unique<DeviceHandle>();
    use_device(index);
    const cudnnStatus_t st = fe::detail::create_handle(&fresh->handle);
    if (st != CUDNN_STATUS_SUCCESS)
      throw Error("fused attention on cuda:" + std::to_string(index) + ": cudnnCreate failed: " +
                  fe::detail::get_error_string(st));
    h = std::move(fresh);
  }
  return *h;
}

// Binds the handle to the device's stream; the caller holds h.mutex.
void bind_stream(DeviceHandle& h, int index) {
  use_device(index);
  const cudnnStatus_t st = fe::detail::set_stream(h.handle, static_cast<cudaStream_t>(cuda_stream(index)));
  if (st != CUDNN_STATUS_SUCCESS)
    throw Error("fused attention on cuda:" + std::to_string(index) + ": cudnnSetStream failed: " +
                fe::detail::get_error_string(st));
}

struct Graphs {
  bool ok = false;
  std::string reason;  // why fused, or why not
  std::shared_ptr<fe::graph::Graph> forward, backward;
  int64_t forward_workspace = 0, backward_workspace = 0;
};

// 256 shapes per process: translation batches change shape with every batch;
// each entry holds two built plans.
constexpr size_t kMaxGraphs = 256;

backend::LruCache<GraphKey, Graphs, GraphKeyHash>& graph_cache() {
  static auto* cache = new backend::LruCache<GraphKey, Graphs, GraphKeyHash>(kMaxGraphs);
  return *cache;
}

// "<what> found no cuDNN engine on sm_90: <message>".
std::string build_failure(const char* what, int sm, const std::string& message) {
  return std::string("cuDNN could not build the ") + what + " on sm_" + std::to_string(sm) + ": " + message;
}

std::shared_ptr<Graphs> build_graphs(const backend::FusedAttentionArgs& a) {
  auto out = std::make_shared<Graphs>();
  const int index = a.q.device().index;
  const CudaDeviceInfo info = cuda_device_info(index);
  FusedAttentionRequest r;
  r.batch = a.q.size(0);
  r.tq = a.q.size(2);
  r.tk = a.k.size(2);
  r.dtype = a.q.dtype();
  r.causal = a.causal;
  r.key_padding = a.key_padding.defined();
  r.dropout = a.dropout;
  r.training = a.training;
  r.deterministic = true;
  r.sm = info.major * 10 + info.minor;
  const FusedAttentionDecision plan = plan_sdpa(r, shape_of(a));
  out->reason = plan.reason;
  if (plan.path != AttentionPath::fused) return out;
  DeviceHandle& h = device_handle(index);
  std::lock_guard<std::mutex> lock(h.mutex);
  bind_stream(h, index);
  try {
    auto fwd = forward_graph(a);
    if (fe::error_t e = fwd->build(h.handle, {fe::HeurMode_t::A}); !e.is_good()) {
      out->reason = build_failure(a.training ? "forward pass (with stats)" : "forward pass", r.sm, e.get_message());
      return out;
    }
    if (fe::error_t e = fwd->get_workspace_size(out->forward_workspace); !e.is_good()) {
      out->reason = build_failure("forward pass's workspace", r.sm, e.get_message());
      return out;
    }
    if (a.training) {
      auto bwd = backward_graph(a);
      if (fe::error_t e = bwd->build(h.handle, {fe::HeurMode_t::A}); !e.is_good()) {
        out->reason = build_failure("deterministic backward pass", r.sm, e.get_message());
        return out;
      }
      if (fe::error_t e = bwd->get_workspace_size(out->backward_workspace); !e.is_good()) {
        out->reason = build_failure("backward pass's workspace", r.sm, e.get_message());
        return out;
      }
      out->backward = std::move(bwd);
    }
    out->forward = std::move(fwd);
  } catch (const std::exception& e) {  // the frontend throws for some graphs it cannot form
    out->reason = build_failure("fused attention graphs", r.sm, e.what());
    return out;
  }
  out->ok = true;
  out->reason = "cuDNN " + std::to_string(cudnn_version()) + " SDPA built on sm_" + std::to_string(r.sm) + " (heads " +
                std::to_string(a.q.size(1)) + "/" + std::to_string(a.k.size(1)) + "/" + std::to_string(a.v.size(1)) +
                ", qk head size " + std::to_string(a.q.size(3)) + ", v head size " + std::to_string(a.v.size(3)) + ")";
  return out;
}

std::shared_ptr<Graphs> graphs_for(const backend::FusedAttentionArgs& a) {
  return graph_cache().get_or_make(key_of(a), [&] { return build_graphs(a); });
}

void check_operands(const backend::FusedAttentionArgs& a, const char* op) {
  CMHA_CHECK(a.q.dim() == 4 && a.k.dim() == 4 && a.v.dim() == 4,
             std::string(op) + ": q, k, v must be [B, H, T, d], got " + a.q.describe() + ", " + a.k.describe() + ", " +
                 a.v.describe());
  const Device dev = common_device(op, {a.q, a.k, a.v, a.key_padding});
  CMHA_CHECK(!dev.is_cpu(), std::string(op) + ": the operands are on the CPU");
  CMHA_CHECK(a.q.dtype() == a.k.dtype() && a.q.dtype() == a.v.dtype() &&
                 (a.q.dtype() == DType::bf16 || a.q.dtype() == DType::f16),
             std::string(op) + ": q, k, v must all be bf16 or all f16, got " + a.q.describe() + ", " + a.k.describe() +
                 ", " + a.v.describe());
  for (const Tensor* t : {&a.q, &a.k, &a.v}) {
    CMHA_CHECK(t->strides()[3] == 1 || t->size(3) == 1, std::string(op) + ": " + t->describe() + " needs its last stride 1");
    CMHA_CHECK(reinterpret_cast<uintptr_t>(t->raw_data()) % 16 == 0,
               std::string(op) + ": " + t->describe() + " is not 16-byte aligned");
  }
  CMHA_CHECK(a.k.size(0) == a.q.size(0) && a.v.size(0) == a.q.size(0) && a.k.size(2) == a.v.size(2) &&
                 a.k.size(3) == a.q.size(3) && a.k.size(1) > 0 && a.v.size(1) > 0 && a.q.size(1) % a.k.size(1) == 0 &&
                 a.q.size(1) % a.v.size(1) == 0,
             std::string(op) + ": q " + a.q.describe() + ", k " + a.k.describe() + ", v " + a.v.describe() +
                 " are not one attention problem");
  if (a.key_padding.defined())
    CMHA_CHECK(a.key_padding.dtype() == DType::b8 && a.key_padding.dim() == 2 && a.key_padding.size(0) == a.q.size(0) &&
                   a.key_padding.size(1) == a.k.size(2),
               std::string(op) + ": key padding " + a.key_padding.describe() + " must be b8 [B, Tk]");
}

// The tensors every execution binds besides the operands: lengths, dropout's seed and offset.
struct ExtraInputs {
  Tensor seq_q, seq_kv, seed, offset;
};

ExtraInputs extra_inputs(const backend::FusedAttentionArgs& a, uint64_t seed, uint64_t offset) {
  ExtraInputs x;
  const Device dev = a.q.device();
  if (a.key_padding.defined()) {
    const int64_t B = a.q.size(0);
    x.seq_q = Tensor::empty({B, 1, 1, 1}, DType::i32, dev);
    x.seq_kv = Tensor::empty({B, 1, 1, 1}, DType::i32, dev);
    Tensor pad = a.key_padding.is_contiguous() ? a.key_padding : a.key_padding.contiguous();
    fused_attention_lengths(pad, x.seq_q, x.seq_kv, a.q.size(2));
  }
  if (a.dropout > 0) {
    x.seed = Tensor::from_vector_i64({static_cast<int64_t>(seed)}, {1, 1, 1, 1}).to(dev);
    x.offset = Tensor::from_vector_i64({static_cast<int64_t>(offset)}, {1, 1, 1, 1}).to(dev);
  }
  return x;
}

void bind_extra(std::unordered_map<int64_t, void*>& pack, const ExtraInputs& x) {
  if (x.seq_q.defined()) {
    pack[kSeqQ] = x.seq_q.raw_data();
    pack[kSeqKv] = x.seq_kv.raw_data();
  }
  if (x.seed.defined()) {
    pack[kSeed] = x.seed.raw_data();
    pack[kOffset] = x.offset.raw_data();
  }
}

void execute(const fe::graph::Graph& g, std::unordered_map<int64_t, void*>& pack, int64_t workspace_bytes,
             Device dev, const char* op) {
  // Freed (stream-ordered) when this returns, after the work queued on the stream.
  Tensor workspace = Tensor::empty({workspace_bytes}, DType::b8, dev);
  DeviceHandle& h = device_handle(dev.index);
  std::lock_guard<std::mutex> lock(h.mutex);
  bind_stream(h, dev.index);
  fe::error_t e = g.execute(h.handle, pack, workspace_bytes > 0 ? workspace.raw_data() : nullptr);
  if (!e.is_good()) throw Error(std::string(op) + ": cuDNN SDPA failed to run: " + e.get_message());
}

}  // namespace

bool fused_attention_prepare(const backend::FusedAttentionArgs& a, std::string& reason) {
  check_operands(a, "attention.fused_prepare");
  std::shared_ptr<Graphs> g = graphs_for(a);
  reason = g->reason;
  return g->ok;
}

void fused_attention_forward(const backend::FusedAttentionArgs& a, const Tensor& out, const Tensor& stats,
                             uint64_t seed, uint64_t offset) {
  constexpr const char* kOp = "attention.fused_forward";
  check_operands(a, kOp);
  std::shared_ptr<Graphs> g = graphs_for(a);
  CMHA_CHECK(g->ok && g->forward, std::string(kOp) + ": no fused graph for this problem (" + g->reason + ")");
  const int64_t B = a.q.size(0), H = a.q.size(1), Tq = a.q.size(2), Dv = a.v.size(3);
  CMHA_CHECK(out.dtype() == a.q.dtype() && out.shape() == Shape({B, H, Tq, Dv}) &&
                 same_strides(out.shape(), sdpa_strides(out), out_strides(H, Tq, Dv)),
             std::string(kOp) + ": out " + out.describe() + " must be the [B, Tq, H, Dv] layout seen as [B, H, Tq, Dv]");
  if (a.training)
    CMHA_CHECK(stats.defined() && stats.dtype() == DType::f32 && stats.shape() == Shape({B, H, Tq, 1}) &&
                   stats.is_contiguous(),
               std::string(kOp) + ": stats must be contiguous f32 [B, H, Tq, 1]");
  if (out.numel() == 0) return;
  const ExtraInputs x = extra_inputs(a, seed, offset);
  std::unordered_map<int64_t, void*> pack = {
      {kQ, a.q.raw_data()}, {kK, a.k.raw_data()}, {kV, a.v.raw_data()}, {kO, out.raw_data()}};
  if (a.training) pack[kStats] = stats.raw_data();
  bind_extra(pack, x);
  execute(*g->forward, pack, g->forward_workspace, a.q.device(), kOp);
  out.bump_version();
}

void fused_attention_backward(const backend::FusedAttentionArgs& a, const Tensor& out, const Tensor& stats,
                              const Tensor& d_out, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              uint64_t seed, uint64_t offset) {
  constexpr const char* kOp = "attention.fused_backward";
  check_operands(a, kOp);
  std::shared_ptr<Graphs> g = graphs_for(a);
  CMHA_CHECK(g->ok && g->backward, std::string(kOp) + ": no fused backward graph for this problem (" + g->reason + ")");
  CMHA_CHECK(d_out.dtype() == out.dtype() && same_strides(d_out, out),
             std::string(kOp) + ": d_out " + d_out.describe() + " must have out's dtype, shape and strides");
  const std::pair<const Tensor*, const Tensor*> grads[] = {{&dq, &a.q}, {&dk, &a.k}, {&dv, &a.v}};
  for (const auto& [grad, of] : grads)
    CMHA_CHECK(grad->dtype() == of->dtype() && same_strides(*grad, *of),
               std::string(kOp) + ": gradient " + grad->describe() + " must have the dtype, shape and strides of " +
                   of->describe());
  if (dq.numel() == 0 && dk.numel() == 0 && dv.numel() == 0) return;
  const ExtraInputs x = extra_inputs(a, seed, offset);
  std::unordered_map<int64_t, void*> pack = {{kQ, a.q.raw_data()},   {kK, a.k.raw_data()},   {kV, a.v.raw_data()},
                                             {kO, out.raw_data()},   {kDO, d_out.raw_data()}, {kStats, stats.raw_data()},
                                             {kDQ, dq.raw_data()},   {kDK, dk.raw_data()},   {kDV, dv.raw_data()}};
  bind_extra(pack, x);
  execute(*g->backward, pack, g->backward_workspace, a.q.device(), kOp);
  for (const Tensor* t : {&dq, &dk, &dv}) t->bump_version();
}

FusedAttentionCacheStats fused_attention_cache_stats() { return {graph_cache().size(), graph_cache().created()}; }

}  // namespace cmha::cuda
