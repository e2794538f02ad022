// CUDA kernels: loss (entries of backend/loss.h), the cross-entropies fused
// with log-softmax and label smoothing (the formulas: backend/cpu/loss.cpp).
//
// The forwards and the soft-target backward reduce along rows of C classes:
// a group per row (a warp up to kWarpRowMax classes, a block of kThreads
// beyond: a vocabulary of 40k is ~160 classes a thread), f32 sums as the
// CPU's. No probability is ever stored: a row keeps max and log_sum, and
// the backwards recompute p_c = exp((z_c - max) - log_sum).
// The hard-target backward is elementwise given those: a thread per logit.
// count_targets and reduce_rows run one block each (the order of
// reduce_rows' f64 sum is fixed by the row count alone); the count stays in
// device memory until the host reads it.
#include <climits>
#include <cmath>

#include "backend/cuda/kernel_table.h"
#include "backend/cuda/row_reduce.cuh"

namespace cmha::cuda {

namespace {

constexpr int kOneBlock = 1024;  // threads of the single-block kernels

// ---- count_targets ----

// result = {count, bad_row, bad_value}: first the first bad row (the minimum
// over the threads' bad rows: integer atomics, exact in any order), then the
// non-ignored rows before it.
__global__ void __launch_bounds__(kOneBlock) count_targets_kernel(const int64_t* target, int64_t n, int64_t classes, int64_t ignore_index,
                                     int64_t* result) {
  __shared__ long long first_bad;
  __shared__ unsigned long long count;
  if (threadIdx.x == 0) {
    first_bad = LLONG_MAX;
    count = 0;
  }
  __syncthreads();
  long long mine = LLONG_MAX;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t t = target[i];
    if (t != ignore_index && (t < 0 || t >= classes)) {
      mine = i;
      break;  // this thread's later rows come after it
    }
  }
  if (mine != LLONG_MAX) atomicMin(&first_bad, mine);
  __syncthreads();
  const int64_t stop = first_bad == LLONG_MAX ? n : static_cast<int64_t>(first_bad);
  unsigned long long counted = 0;
  for (int64_t i = threadIdx.x; i < stop; i += blockDim.x) counted += target[i] != ignore_index;
  atomicAdd(&count, counted);
  __syncthreads();
  if (threadIdx.x == 0) {
    result[0] = static_cast<int64_t>(count);
    result[1] = stop < n ? stop : -1;
    result[2] = stop < n ? target[stop] : 0;
  }
}

// Into found, on the device: no host wait until it is read.
void count_targets(const Tensor& target, int64_t classes, int64_t ignore_index, const Tensor& found) {
  CMHA_CHECK(found.dtype() == DType::i64 && found.numel() == 3 && found.device() == target.device(),
             "loss.count_targets: found " + found.describe() + " must be i64 [3] on " + target.device().str());
  count_targets_kernel<<<1, kOneBlock, 0, launch_stream(target)>>>(static_cast<const int64_t*>(target.raw_data()),
                                                                   target.numel(), classes, ignore_index,
                                                                   static_cast<int64_t*>(found.raw_data()));
  check_launch("loss.count_targets");
}

// *correct = the rows with target != ignore_index and pred == target (an
// integer sum: exact in any order).
__global__ void __launch_bounds__(kOneBlock) count_correct_kernel(const int64_t* pred, const int64_t* target, int64_t n, int64_t ignore_index,
                                     unsigned long long* correct) {
  __shared__ unsigned long long count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  unsigned long long mine = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mine += target[i] != ignore_index && pred[i] == target[i];
  atomicAdd(&count, mine);
  __syncthreads();
  if (threadIdx.x == 0) *correct = count;
}

void count_correct(const Tensor& pred, const Tensor& target, int64_t ignore_index, const Tensor& correct) {
  CMHA_CHECK(pred.dtype() == DType::i64 && target.dtype() == DType::i64 && pred.numel() == target.numel() &&
                 correct.dtype() == DType::i64 && correct.numel() == 1 && pred.device() == target.device() &&
                 correct.device() == target.device(),
             "loss.count_correct: pred " + pred.describe() + ", target " + target.describe() + " and correct " +
                 correct.describe() + " must be i64 (correct one element) on one device, pred and target of one size");
  count_correct_kernel<<<1, kOneBlock, 0, launch_stream(target)>>>(
      static_cast<const int64_t*>(pred.raw_data()), static_cast<const int64_t*>(target.raw_data()), target.numel(),
      ignore_index, static_cast<unsigned long long*>(correct.raw_data()));
  check_launch("loss.count_correct");
}

// ---- hard-target cross-entropy ----

// Per row: max, log Σ exp(z - max) and
//   loss = (1-ε)·(log_sum - (z_t - m)) + ε·(log_sum - mean_c (z_c - m));
// 0 in all three on ignored rows.
template <int kGroup>
__global__ void __launch_bounds__(kRowBlock<kGroup>) cross_entropy_forward_kernel(const float* z, const int64_t* target, float* row_loss, float* max_out,
                                             float* log_sum_out, int64_t rows, int64_t classes, float eps,
                                             int64_t ignore_index) {
  using Group = RowGroup<kGroup>;
  __shared__ float scratch[32];
  const float inv_c = 1.0f / static_cast<float>(classes);
  CMHA_ROWS(i, rows, Group) {
    const int64_t t = target[i];
    // A target out of range (its check deferred: autograd/deferred_checks.h) counts as ignored.
    if (t == ignore_index || t < 0 || t >= classes) {  // the whole group sees the same t
      if (Group::lane() == 0) {
        row_loss[i] = 0.0f;
        max_out[i] = 0.0f;
        log_sum_out[i] = 0.0f;
      }
      continue;
    }
    const float* zr = z + i * classes;
    float m = -INFINITY;
    for (int64_t c = Group::lane(); c < classes; c += kGroup) m = fmaxf(m, zr[c]);
    m = Group::max(m, scratch);
    float sum_exp = 0.0f, sum_shifted = 0.0f;  // Σ exp(z - m), Σ (z - m)
    for (int64_t c = Group::lane(); c < classes; c += kGroup) {
      sum_exp += expf(zr[c] - m);
      sum_shifted += zr[c] - m;
    }
    sum_exp = Group::sum(sum_exp, scratch);
    sum_shifted = Group::sum(sum_shifted, scratch);
    if (Group::lane() == 0) {
      const float log_sum = logf(sum_exp);
      max_out[i] = m;
      log_sum_out[i] = log_sum;
      row_loss[i] = (1.0f - eps) * (log_sum - (zr[t] - m)) + eps * (log_sum - sum_shifted * inv_c);
    }
  }
}

void cross_entropy_forward(const Tensor& z, const Tensor& target, const Tensor& row_loss, const Tensor& max,
                           const Tensor& log_sum, float eps, int64_t ignore_index) {
  const int64_t rows = target.numel(), classes = z.shape().back();
  if (rows == 0) return;
  const cudaStream_t stream = launch_stream(z);
  with_row_group(classes, [&](auto group) {
    constexpr int G = decltype(group)::value;
    cross_entropy_forward_kernel<G><<<row_blocks<G>(rows), row_threads<G>(), 0, stream>>>(
        static_cast<const float*>(z.raw_data()), static_cast<const int64_t*>(target.raw_data()),
        static_cast<float*>(row_loss.raw_data()), static_cast<float*>(max.raw_data()),
        static_cast<float*>(log_sum.raw_data()), rows, classes, eps, ignore_index);
    check_launch("loss.cross_entropy_forward");
  });
}

// dz[i, c] = (p_c - ε/C)·scale_i, minus (1-ε)·scale_i at c == t (two roundings,
// as the CPU's); 0 on ignored rows.
__global__ void cross_entropy_backward_kernel(const float* z, const int64_t* target, const float* max_in,
                                              const float* log_sum_in, const float* g, float* dz, int64_t rows,
                                              int64_t classes, float eps, int64_t ignore_index, bool per_row,
                                              float denom) {
  const float smooth = eps / static_cast<float>(classes);
  CMHA_GRID_STRIDE(e, rows * classes) {
    const int64_t i = e / classes, c = e - i * classes;
    const int64_t t = target[i];
    if (t == ignore_index || t < 0 || t >= classes) {  // out of range: as in the forward pass
      dz[e] = 0.0f;
      continue;
    }
    const float scale = (per_row ? g[i] : g[0]) / denom;
    float v = (expf((z[e] - max_in[i]) - log_sum_in[i]) - smooth) * scale;
    if (c == t) v -= (1.0f - eps) * scale;
    dz[e] = v;
  }
}

void cross_entropy_backward(const Tensor& z, const Tensor& target, const Tensor& max, const Tensor& log_sum,
                            const Tensor& g, const Tensor& dz, float eps, int64_t ignore_index, bool per_row,
                            float denom) {
  const int64_t rows = target.numel(), classes = z.shape().back();
  if (rows * classes == 0) return;
  cross_entropy_backward_kernel<<<blocks_for(rows * classes), kThreads, 0, launch_stream(dz)>>>(
      static_cast<const float*>(z.raw_data()), static_cast<const int64_t*>(target.raw_data()),
      static_cast<const float*>(max.raw_data()), static_cast<const float*>(log_sum.raw_data()),
      static_cast<const float*>(g.raw_data()), static_cast<float*>(dz.raw_data()), rows, classes, eps, ignore_index,
      per_row, denom);
  check_launch("loss.cross_entropy_backward");
}

// ---- soft-target cross-entropy ----

// Per row, with q' = (1-ε)·q + ε/C: loss = Σ_c q'_c·(log_sum - (z_c - m)).
template <int kGroup>
__global__ void __launch_bounds__(kRowBlock<kGroup>) soft_cross_entropy_forward_kernel(const float* z, const float* q, float* row_loss, float* max_out,
                                                  float* log_sum_out, int64_t rows, int64_t classes, float eps) {
  using Group = RowGroup<kGroup>;
  __shared__ float scratch[32];
  const float smooth = eps / static_cast<float>(classes);
  CMHA_ROWS(i, rows, Group) {
    const float* zr = z + i * classes;
    const float* qr = q + i * classes;
    float m = -INFINITY;
    for (int64_t c = Group::lane(); c < classes; c += kGroup) m = fmaxf(m, zr[c]);
    m = Group::max(m, scratch);
    float sum_exp = 0.0f;
    for (int64_t c = Group::lane(); c < classes; c += kGroup) sum_exp += expf(zr[c] - m);
    sum_exp = Group::sum(sum_exp, scratch);
    const float log_sum = logf(sum_exp);
    // lse - z_c = log_sum - (z_c - m): no f32 sum of a large max and a small log.
    float loss = 0.0f;
    for (int64_t c = Group::lane(); c < classes; c += kGroup)
      loss += ((1.0f - eps) * qr[c] + smooth) * (log_sum - (zr[c] - m));
    loss = Group::sum(loss, scratch);
    if (Group::lane() == 0) {
      max_out[i] = m;
      log_sum_out[i] = log_sum;
      row_loss[i] = loss;
    }
  }
}

void soft_cross_entropy_forward(const Tensor& z, const Tensor& q, const Tensor& row_loss, const Tensor& max,
                                const Tensor& log_sum, float eps) {
  const int64_t rows = row_loss.numel(), classes = z.shape().back();
  if (rows == 0) return;
  const cudaStream_t stream = launch_stream(z);
  with_row_group(classes, [&](auto group) {
    constexpr int G = decltype(group)::value;
    soft_cross_entropy_forward_kernel<G><<<row_blocks<G>(rows), row_threads<G>(), 0, stream>>>(
        static_cast<const float*>(z.raw_data()), static_cast<const float*>(q.raw_data()),
        static_cast<float*>(row_loss.raw_data()), static_cast<float*>(max.raw_data()),
        static_cast<float*>(log_sum.raw_data()), rows, classes, eps);
    check_launch("loss.soft_cross_entropy_forward");
  });
}

// With S = Σ_c q'_c and log p_c = (z_c - m) - log_sum:
//   dz = (S·p_c - q'_c)·scale,  dq = -(1-ε)·log p_c·scale.
template <int kGroup>
__global__ void __launch_bounds__(kRowBlock<kGroup>) soft_cross_entropy_backward_kernel(const float* z, const float* q, const float* max_in,
                                                   const float* log_sum_in, const float* g, float* dz, float* dq,
                                                   int64_t rows, int64_t classes, float eps, bool per_row,
                                                   float denom) {
  using Group = RowGroup<kGroup>;
  __shared__ float scratch[32];
  const float smooth = eps / static_cast<float>(classes);
  CMHA_ROWS(i, rows, Group) {
    const float scale = (per_row ? g[i] : g[0]) / denom;
    const float* zr = z + i * classes;
    const float* qr = q + i * classes;
    const float m = max_in[i], log_sum = log_sum_in[i];
    float total_q = 0.0f;
    for (int64_t c = Group::lane(); c < classes; c += kGroup) total_q += (1.0f - eps) * qr[c] + smooth;
    total_q = Group::sum(total_q, scratch);
    for (int64_t c = Group::lane(); c < classes; c += kGroup) {
      const float shifted = (zr[c] - m) - log_sum;  // log p_c
      dz[i * classes + c] = (total_q * expf(shifted) - ((1.0f - eps) * qr[c] + smooth)) * scale;
      dq[i * classes + c] = -(1.0f - eps) * shifted * scale;
    }
  }
}

void soft_cross_entropy_backward(const Tensor& z, const Tensor& q, const Tensor& max, const Tensor& log_sum,
                                 const Tensor& g, const Tensor& dz, const Tensor& dq, float eps, bool per_row,
                                 float denom) {
  const int64_t rows = max.numel(), classes = z.shape().back();
  if (rows * classes == 0) return;
  const cudaStream_t stream = launch_stream(dz);
  with_row_group(classes, [&](auto group) {
    constexpr int G = decltype(group)::value;
    soft_cross_entropy_backward_kernel<G><<<row_blocks<G>(rows), row_threads<G>(), 0, stream>>>(
        static_cast<const float*>(z.raw_data()), static_cast<const float*>(q.raw_data()),
        static_cast<const float*>(max.raw_data()), static_cast<const float*>(log_sum.raw_data()),
        static_cast<const float*>(g.raw_data()), static_cast<float*>(dz.raw_data()),
        static_cast<float*>(dq.raw_data()), rows, classes, eps, per_row, denom);
    check_launch("loss.soft_cross_entropy_backward");
  });
}

// ---- reduce_rows ----

// out[0] = f32(Σ row_loss / divisor) (0 when divisor is 0): thread k sums rows
// k, k + 1024, ... in order, then block_sum's fixed tree: an order set by the
// row count alone.
__global__ void __launch_bounds__(kOneBlock) reduce_rows_kernel(const float* row_loss, int64_t n, double divisor, float* out) {
  __shared__ double scratch[32];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += row_loss[i];
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) out[0] = static_cast<float>(divisor != 0.0 ? acc / divisor : 0.0);
}

void reduce_rows(const Tensor& row_loss, const Tensor& out, double divisor) {
  reduce_rows_kernel<<<1, kOneBlock, 0, launch_stream(out)>>>(static_cast<const float*>(row_loss.raw_data()),
                                                              row_loss.numel(), divisor,
                                                              static_cast<float*>(out.raw_data()));
  check_launch("loss.reduce_rows");
}

}  // namespace

backend::LossKernels loss_kernels() {
  backend::LossKernels k;
  k.count_targets = count_targets;
  k.count_correct = count_correct;
  k.cross_entropy_forward = cross_entropy_forward;
  k.cross_entropy_backward = cross_entropy_backward;
  k.soft_cross_entropy_forward = soft_cross_entropy_forward;
  k.soft_cross_entropy_backward = soft_cross_entropy_backward;
  k.reduce_rows = reduce_rows;
  return k;
}

}  // namespace cmha::cuda
