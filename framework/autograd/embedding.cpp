// Embedding lookup: rows of a [V, D] table picked by integer ids.
#include <cstring>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace cmha {

namespace {

// grad_w[V, D] = Σ over positions p with ids[p] == v of grad_out[p, :].
// Positions are bucketed by id with a stable counting sort, so each row of
// grad_w is owned by one thread (no races) and summed in position order
// whatever the thread count (deterministic).
Tensor embedding_backward(const Tensor& grad_out, const Tensor& ids, int64_t V, int64_t D) {
  Tensor g = grad_out.contiguous();  // [N, D] once flattened
  const float* pg = g.data<float>();
  const int64_t* pid = ids.data<int64_t>();
  const int64_t N = ids.numel();

  std::vector<int64_t> start(V + 1, 0), order(N);
  for (int64_t i = 0; i < N; ++i) ++start[pid[i] + 1];
  for (int64_t v = 0; v < V; ++v) start[v + 1] += start[v];
  {
    std::vector<int64_t> cursor(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < N; ++i) order[cursor[pid[i]]++] = i;
  }

  Tensor grad_w = Tensor::zeros({V, D});
  float* pw = grad_w.data<float>();
  // Dynamic chunks: a few ids (padding, common tokens) can own most positions.
#pragma omp parallel for schedule(dynamic, 64) if (N * D >= 32768)
  for (int64_t v = 0; v < V; ++v) {
    float* row = pw + v * D;
    for (int64_t k = start[v]; k < start[v + 1]; ++k) {
      const float* src = pg + order[k] * D;
#pragma omp simd
      for (int64_t c = 0; c < D; ++c) row[c] += src[c];
    }
  }
  return grad_w;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  weight.check_dtype(DType::f32, "embedding");
  weight.check_cpu("embedding");
  ids.check_cpu("embedding");
  CMHA_CHECK(weight.dim() == 2, "embedding: weight must be [V, D], got " + weight.describe());
  CMHA_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::i64,
             "embedding: ids must be i32 or i64, got " + ids.describe());
  const int64_t V = weight.shape()[0], D = weight.shape()[1];

  // One i64 contiguous copy serves the range check, the lookup and backward.
  Tensor id = ids.to(DType::i64).contiguous();
  if (id.same(ids)) id = ids.clone();  // the caller may reuse its ids buffer before backward
  const int64_t* pid = id.data<int64_t>();
  const int64_t N = id.numel();
  for (int64_t i = 0; i < N; ++i)
    CMHA_CHECK(pid[i] >= 0 && pid[i] < V, "embedding: id " + std::to_string(pid[i]) + " at position " +
                                              position_str(i, ids.shape()) + " is out of range for a vocabulary of " +
                                              std::to_string(V) + " (weight " + weight.describe() + ")");

  Tensor w = weight.detach().contiguous();
  const float* pw = w.data<float>();
  Shape out_shape = ids.shape();  // [...] -> [..., D]
  out_shape.push_back(D);
  Tensor out = Tensor::empty(out_shape);
  float* po = out.data<float>();
#pragma omp parallel for schedule(static) if (N * D >= 32768)
  for (int64_t i = 0; i < N; ++i) std::memcpy(po + i * D, pw + pid[i] * D, static_cast<size_t>(D) * sizeof(float));

  if (autograd::needs_grad({weight}))
    autograd::record(out, "embedding", {weight}, [id, V, D](const Tensor& g) {
      return std::vector<Tensor>{embedding_backward(g, id, V, D)};
    });
  return out;
}

}  // namespace cmha
