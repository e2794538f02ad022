// CUDA kernels: embedding (entries of backend/embedding.h).
//
// The backward is the CPU's algorithm on the GPU (backend/cpu/embedding.cpp):
// positions bucketed by id with a stable sort (CUB's radix sort of the ids,
// carrying the positions), then each row of grad_w owned by one thread per
// column, adding its positions in position order. The same f32 additions in
// the same order: the CPU's bits, whatever the launch geometry.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <bit>
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernel_table.h"

namespace cmha::cuda {

namespace {

// out[p, c] = weight[ids[p], c] over N·D elements; 0 for an id outside [0, V)
// (its check deferred: autograd/deferred_checks.h), never a read outside the table.
__global__ void embedding_forward_kernel(const float* weight, const int64_t* ids, float* out, int64_t n, int64_t D,
                                         int64_t V) {
  CMHA_GRID_STRIDE(i, n) {
    const int64_t p = i / D, c = i - p * D;
    const int64_t id = ids[p];
    out[i] = id >= 0 && id < V ? weight[id * D + c] : 0.0f;
  }
}

void forward(const Tensor& weight, const Tensor& ids, const Tensor& out) {
  ids.check_dtype(DType::i64, "embedding");
  const int64_t D = weight.shape()[1], n = ids.numel() * D;
  if (n == 0) return;
  embedding_forward_kernel<<<blocks_for(n), kThreads, 0, launch_stream(out)>>>(
      static_cast<const float*>(weight.raw_data()), static_cast<const int64_t*>(ids.raw_data()),
      static_cast<float*>(out.raw_data()), n, D, weight.shape()[0]);
  check_launch("embedding.forward");
}

__global__ void positions_kernel(int64_t* positions, int64_t n) { CMHA_GRID_STRIDE(i, n) positions[i] = i; }

// The first k in [0, n) with sorted[k] >= v (n when none).
__device__ __forceinline__ int64_t lower_bound(const uint64_t* sorted, int64_t n, uint64_t v) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// grad_w[v, c] += Σ_k grad_out[order[k], c] over the k with sorted_ids[k] == v,
// in k order (= position order: the sort is stable). Blocks stride over the
// rows v (x) and over column chunks (y); a thread owns one (v, c) at a time.
__global__ void embedding_backward_kernel(const float* grad_out, const uint64_t* sorted_ids, const int64_t* order,
                                          float* grad_w, int64_t N, int64_t V, int64_t D) {
  for (int64_t v = blockIdx.x; v < V; v += gridDim.x) {
    const int64_t begin = lower_bound(sorted_ids, N, static_cast<uint64_t>(v));
    const int64_t end = lower_bound(sorted_ids, N, static_cast<uint64_t>(v) + 1);
    if (begin == end) continue;  // no position has this id
    for (int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; c < D;
         c += static_cast<int64_t>(gridDim.y) * blockDim.x) {
      float acc = grad_w[v * D + c];
#pragma unroll 4
      for (int64_t k = begin; k < end; ++k) acc += grad_out[order[k] * D + c];
      grad_w[v * D + c] = acc;
    }
  }
}

void check_cub(cudaError_t status, const char* what) {
  cuda_check(status, what, "embedding backward: cannot sort the ids");
}

void backward(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_w) {
  ids.check_dtype(DType::i64, "embedding backward");
  const int64_t V = grad_w.shape()[0], D = grad_w.shape()[1], N = ids.numel();
  if (N == 0 || D == 0 || V == 0) return;  // V = 0 leaves no valid id, so N = 0
  const Device dev = grad_w.device();
  const cudaStream_t stream = launch_stream(grad_w);

  // Stable sort of (id, position) pairs by id: positions bucketed by id, in
  // position order within a bucket. Only the low bits of the keys are sorted:
  // every id is in [0, V) once the op's check has run (an id out of range,
  // its check deferred, may add its row to another id's; it never reaches
  // memory outside grad_w, and the deferred check then stops the run).
  const Tensor positions = Tensor::empty({N}, DType::i64, dev);
  const Tensor order = Tensor::empty({N}, DType::i64, dev);
  const Tensor sorted_ids = Tensor::empty({N}, DType::i64, dev);
  positions_kernel<<<blocks_for(N), kThreads, 0, stream>>>(static_cast<int64_t*>(positions.raw_data()), N);
  check_launch("embedding.backward");
  const int end_bit = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(V - 1))));
  const auto* keys_in = static_cast<const uint64_t*>(ids.raw_data());
  auto* keys_out = static_cast<uint64_t*>(sorted_ids.raw_data());
  const auto* values_in = static_cast<const int64_t*>(positions.raw_data());
  auto* values_out = static_cast<int64_t*>(order.raw_data());
  size_t temp_bytes = 0;
  check_cub(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in, keys_out, values_in, values_out, N, 0,
                                            end_bit, stream),
            "cub::DeviceRadixSort::SortPairs");
  const Tensor temp = Tensor::empty({std::max<int64_t>(static_cast<int64_t>(temp_bytes), 1)}, DType::b8, dev);
  check_cub(cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, keys_in, keys_out, values_in, values_out, N,
                                            0, end_bit, stream),
            "cub::DeviceRadixSort::SortPairs");

  // 128 columns per block: D = 512 gives 4 blocks per row, so a row that owns
  // most positions (padding, a common token) is still split 4 ways.
  constexpr int kRowThreads = 128;
  const int64_t column_blocks = (D + kRowThreads - 1) / kRowThreads;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(V, 1 << 20)),
                  static_cast<unsigned>(std::min<int64_t>(column_blocks, 65535)));
  embedding_backward_kernel<<<grid, kRowThreads, 0, stream>>>(static_cast<const float*>(grad_out.raw_data()), keys_out,
                                                              values_out, static_cast<float*>(grad_w.raw_data()), N,
                                                              V, D);
  check_launch("embedding.backward");
}

}  // namespace

backend::EmbeddingKernels embedding_kernels() {
  backend::EmbeddingKernels k;
  k.forward = forward;
  k.backward = backward;
  return k;
}

}  // namespace cmha::cuda
