// CPU kernels: embedding (entries of backend/embedding.h).
#include <cstring>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/parallel.h"

namespace cmha::cpu {

namespace {

void forward(const Tensor& weight, const Tensor& ids, const Tensor& out) {
  const int64_t D = weight.shape()[1];
  const int64_t N = ids.numel();
  const float* pw = weight.data<float>("embedding");
  const int64_t* pid = ids.data<int64_t>("embedding");
  float* po = out.data<float>("embedding");
  const int64_t V = weight.shape()[0];
  // An id out of range (its check deferred: autograd/deferred_checks.h) gives a zero row.
#pragma omp parallel for schedule(static) if (N * D >= kParallelMin)
  for (int64_t i = 0; i < N; ++i) {
    if (pid[i] >= 0 && pid[i] < V)
      std::memcpy(po + i * D, pw + pid[i] * D, static_cast<size_t>(D) * sizeof(float));
    else
      std::memset(po + i * D, 0, static_cast<size_t>(D) * sizeof(float));
  }
}

// Positions are bucketed by id with a stable counting sort, so each row of
// grad_w is owned by one thread (no races) and summed in position order
// whatever the thread count (deterministic).
void backward(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_w) {
  const int64_t V = grad_w.shape()[0], D = grad_w.shape()[1];
  const float* pg = grad_out.data<float>("embedding backward");
  const int64_t* pid = ids.data<int64_t>("embedding backward");
  const int64_t N = ids.numel();

  // Ids out of range (their check deferred) add nothing.
  auto valid = [&](int64_t i) { return pid[i] >= 0 && pid[i] < V; };
  std::vector<int64_t> start(V + 1, 0), order(N);
  for (int64_t i = 0; i < N; ++i)
    if (valid(i)) ++start[pid[i] + 1];
  for (int64_t v = 0; v < V; ++v) start[v + 1] += start[v];
  {
    std::vector<int64_t> cursor(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < N; ++i)
      if (valid(i)) order[cursor[pid[i]]++] = i;
  }

  float* pw = grad_w.data<float>("embedding backward");
  // Dynamic chunks: a few ids (padding, common tokens) can own most positions.
#pragma omp parallel for schedule(dynamic, 64) if (N * D >= kParallelMin)
  for (int64_t v = 0; v < V; ++v) {
    float* row = pw + v * D;
    for (int64_t k = start[v]; k < start[v + 1]; ++k) {
      const float* src = pg + order[k] * D;
#pragma omp simd
      for (int64_t c = 0; c < D; ++c) row[c] += src[c];
    }
  }
}

}  // namespace

backend::EmbeddingKernels embedding_kernels() {
  backend::EmbeddingKernels k;
  k.forward = forward;
  k.backward = backward;
  return k;
}

}  // namespace cmha::cpu
