// CUDA kernels: optim (entries of backend/optim.h): the optimiser steps, the
// weight average and the gradient-clipping reductions over a list of tensors.
//
// The steps are the CPU's arithmetic operation for operation. The CPU build
// (g++, C++20, -O3 -march=native, no -ffp-contract flag) contracts a·b + c
// into fused multiply-adds, as g++ does by default in C++; its objects fuse
// exactly where the __fmaf_rn calls below do (checked against the CPU kernels
// by tests/unit/cpu_fused_arithmetic_test.cpp), and every other operation is
// an __fmul_rn / __fadd_rn / __fdiv_rn / __fsqrt_rn that nvcc never fuses or
// approximates. The steps therefore match the CPU bit for bit.
//
// sum_squares keeps the CPU's chunks of 2^16 elements and adds the chunk sums
// in list order on the host, as the CPU does, but sums inside a chunk in a
// GPU order (256 threads, then a tree): the same bits on every run, within
// rounding of the double (about 1e-16 relative per chunk) of the CPU's.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernel_table.h"

namespace cmha::cuda {
namespace {

// ---- the per-parameter steps ----

// False when a step's gate (backend/optim.h: the bits of the gradients' norm,
// null for none) is not finite: the step changes nothing.
__device__ bool gate_open(const int64_t* gate) { return gate == nullptr || isfinite(__longlong_as_double(*gate)); }

const int64_t* gate_data(const Tensor& gate, const Tensor& param, const char* op) {
  if (!gate.defined()) return nullptr;
  CMHA_CHECK(gate.device() == param.device() && gate.dtype() == DType::i64 && gate.numel() == 1,
             std::string(op) + ": the gate " + gate.describe() + " must be i64 [1] on " + param.device().str());
  return static_cast<const int64_t*>(gate.raw_data());
}

// torch.optim's _single_tensor_adam(w) per element, fused as the CPU build:
//   g' = fma(l2, p, g);  p' = p·shrink;  m ← fma(m, β1, (1-β1)·g');  v ← fma(v, β2, ((1-β2)·g')·g')
//   p ← p' + (neg_step_size·m) / (√v / bias2_sqrt + eps)
// and param_bf16 ← bf16(p) when it is not null (the bf16 working copy).
__global__ void adam_step_kernel(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                                 uint16_t* param_bf16, int64_t n, backend::AdamStep s, const int64_t* gate) {
  if (!gate_open(gate)) return;
  CMHA_GRID_STRIDE(k, n) {
    const float p = param[k];
    const float g = s.l2 != 0.0f ? __fmaf_rn(s.l2, p, grad[k]) : grad[k];
    const float p_shrunk = s.shrink != 1.0f ? __fmul_rn(p, s.shrink) : p;
    const float m = __fmaf_rn(exp_avg[k], s.beta1, __fmul_rn(s.one_minus_beta1, g));
    const float v = __fmaf_rn(exp_avg_sq[k], s.beta2, __fmul_rn(__fmul_rn(s.one_minus_beta2, g), g));
    exp_avg[k] = m;
    exp_avg_sq[k] = v;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bias2_sqrt), s.eps);
    const float updated = __fadd_rn(p_shrunk, __fdiv_rn(__fmul_rn(s.neg_step_size, m), denom));
    param[k] = updated;
    if (param_bf16 != nullptr) param_bf16[k] = float_to_bf16_bits(updated);
  }
}

// torch.optim's _single_tensor_sgd per element, fused as the CPU build:
//   d = fma(wd, p, g);  b ← first ? d : fma(b, μ, (1-dampening)·d);  d ← nesterov ? fma(μ, b, d) : b
//   p ← fma(neg_lr, d, p)
// buffer null: no momentum.
__global__ void sgd_step_kernel(float* param, const float* grad, float* buffer, int64_t n, backend::SgdStep s,
                                const int64_t* gate) {
  if (!gate_open(gate)) return;
  CMHA_GRID_STRIDE(k, n) {
    const float p = param[k];
    float d = s.weight_decay != 0.0f ? __fmaf_rn(s.weight_decay, p, grad[k]) : grad[k];
    if (buffer != nullptr) {
      const float b = s.first ? d : __fmaf_rn(buffer[k], s.momentum, __fmul_rn(s.one_minus_dampening, d));
      buffer[k] = b;
      d = s.nesterov ? __fmaf_rn(s.momentum, b, d) : b;
    }
    param[k] = __fmaf_rn(s.neg_lr, d, p);
  }
}

// shadow ← fma(shadow, decay, one_minus_decay·param), as the CPU build.
__global__ void ema_update_kernel(float* shadow, const float* param, int64_t n, float decay, float one_minus_decay,
                                  const int64_t* gate) {
  if (!gate_open(gate)) return;
  CMHA_GRID_STRIDE(k, n) shadow[k] = __fmaf_rn(shadow[k], decay, __fmul_rn(one_minus_decay, param[k]));
}

__global__ void swap_kernel(float* a, float* b, int64_t n) {
  CMHA_GRID_STRIDE(k, n) {
    const float t = a[k];
    a[k] = b[k];
    b[k] = t;
  }
}

void check_same_size(const char* op, const Tensor& a, const Tensor& b) {
  CMHA_CHECK(a.numel() == b.numel() && a.device() == b.device(),
             std::string(op) + ": " + a.describe() + " and " + b.describe() + " differ in size or device");
}

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& param_bf16, const backend::AdamStep& s, const Tensor& gate) {
  for (const Tensor* t : {&grad, &exp_avg, &exp_avg_sq}) check_same_size("adam_step", param, *t);
  float* p = device_data<float>(param, "adam_step");
  const float* g = device_data<float>(grad, "adam_step");
  float* m = device_data<float>(exp_avg, "adam_step");
  float* v = device_data<float>(exp_avg_sq, "adam_step");
  uint16_t* pb = nullptr;
  if (param_bf16.defined()) {
    check_same_size("adam_step", param, param_bf16);
    pb = reinterpret_cast<uint16_t*>(device_data<bf16>(param_bf16, "adam_step"));
  }
  const int64_t n = param.numel();
  if (n == 0) return;
  adam_step_kernel<<<blocks_for(n), kThreads, 0, launch_stream(param)>>>(p, g, m, v, pb, n, s,
                                                                        gate_data(gate, param, "adam_step"));
  check_launch("adam_step_kernel");
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const backend::SgdStep& s,
              const Tensor& gate) {
  check_same_size("sgd_step", param, grad);
  if (momentum_buffer.defined()) check_same_size("sgd_step", param, momentum_buffer);
  float* p = device_data<float>(param, "sgd_step");
  const float* g = device_data<float>(grad, "sgd_step");
  float* b = momentum_buffer.defined() ? device_data<float>(momentum_buffer, "sgd_step") : nullptr;
  const int64_t n = param.numel();
  if (n == 0) return;
  sgd_step_kernel<<<blocks_for(n), kThreads, 0, launch_stream(param)>>>(p, g, b, n, s,
                                                                       gate_data(gate, param, "sgd_step"));
  check_launch("sgd_step_kernel");
}

void ema_update(const Tensor& shadow, const Tensor& param, float decay, float one_minus_decay, const Tensor& gate) {
  check_same_size("ema_update", shadow, param);
  float* s = device_data<float>(shadow, "ema_update");
  const float* p = device_data<float>(param, "ema_update");
  const int64_t n = param.numel();
  if (n == 0) return;
  ema_update_kernel<<<blocks_for(n), kThreads, 0, launch_stream(shadow)>>>(s, p, n, decay, one_minus_decay,
                                                                          gate_data(gate, param, "ema_update"));
  check_launch("ema_update_kernel");
}

void swap(const Tensor& a, const Tensor& b) {
  check_same_size("swap", a, b);
  float* pa = device_data<float>(a, "swap");
  float* pb = device_data<float>(b, "swap");
  const int64_t n = a.numel();
  if (n == 0) return;
  swap_kernel<<<blocks_for(n), kThreads, 0, launch_stream(a)>>>(pa, pb, n);
  check_launch("swap_kernel");
}

// ---- gradient clipping: one launch over every tensor of the list ----

// The CPU's unit of the fixed summation order (backend/cpu/optim.cpp): each
// tensor splits into chunks of at most kChunk elements, in list order, and
// one thread block owns one chunk.
constexpr int64_t kChunk = int64_t{1} << 16;

struct Chunk {
  float* data;
  int64_t n;
};
static_assert(sizeof(Chunk) == 2 * sizeof(int64_t), "a Chunk is two i64 words of the table");

// The chunk table of a list of tensors, on their one device: the chunks as
// two i64 words each, then `flags` words set to 0 for a kernel to write.
// Copied to the device in one transfer per call.
struct ChunkTable {
  Device device;
  int64_t chunks = 0;
  Tensor words;  // i64 [2·chunks + flags] on `device`; undefined when there are no chunks

  const Chunk* chunk_data() const { return static_cast<const Chunk*>(words.raw_data()); }
  int64_t* flags() const { return static_cast<int64_t*>(words.raw_data()) + 2 * chunks; }
};

ChunkTable chunk_table(const std::vector<Tensor>& xs, const char* op, int64_t flags) {
  ChunkTable table;
  std::vector<Chunk> chunks;
  for (const Tensor& x : xs) {
    float* data = device_data<float>(x, op);
    if (chunks.empty()) table.device = x.device();
    CMHA_CHECK(x.device() == table.device, std::string(op) + ": the tensors are on " + table.device.str() + " and " +
                                               x.device().str());
    const int64_t n = x.numel();
    for (int64_t b = 0; b < n; b += kChunk) chunks.push_back({data + b, std::min(kChunk, n - b)});
  }
  table.chunks = static_cast<int64_t>(chunks.size());
  if (chunks.empty()) return table;
  std::vector<int64_t> host(static_cast<size_t>(2 * table.chunks + flags), 0);
  std::memcpy(host.data(), chunks.data(), chunks.size() * sizeof(Chunk));
  table.words = Tensor::empty({2 * table.chunks + flags}, DType::i64, table.device);
  cuda_copy_to_device(table.words.raw_data(), host.data(), host.size() * sizeof(int64_t), table.device.index);
  return table;
}

// sums[c] = Σ x² over chunk c in double: each thread adds its elements
// (stride blockDim.x) with fused multiply-adds, then block_sum adds the
// threads' sums in an order fixed by blockDim.x.
__global__ void __launch_bounds__(kThreads) sum_squares_kernel(const Chunk* chunks, double* sums) {
  __shared__ double scratch[32];
  const Chunk c = chunks[blockIdx.x];
  double acc = 0.0;
  for (int64_t k = threadIdx.x; k < c.n; k += blockDim.x) {
    const double v = c.data[k];
    acc = fma(v, v, acc);
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) sums[blockIdx.x] = acc;
}

// *bad ← 1 when some element of some chunk is ±inf or NaN (an integer OR:
// the result does not depend on the order).
__global__ void __launch_bounds__(kThreads) all_finite_kernel(const Chunk* chunks, unsigned int* bad) {
  const Chunk c = chunks[blockIdx.x];
  int found = 0;
  for (int64_t k = threadIdx.x; k < c.n; k += blockDim.x) found |= isfinite(c.data[k]) ? 0 : 1;
  if (__syncthreads_or(found) && threadIdx.x == 0) atomicOr(bad, 1u);
}

__global__ void __launch_bounds__(kThreads) scale_kernel(const Chunk* chunks, float factor) {
  const Chunk c = chunks[blockIdx.x];
  for (int64_t k = threadIdx.x; k < c.n; k += blockDim.x) c.data[k] = __fmul_rn(c.data[k], factor);
}

// norm = √(Σ sums[c]) with the chunk sums added in list order (one thread,
// as the host adds them), written as a double into *norm.
__global__ void norm_of_sums_kernel(const double* sums, int64_t chunks, double* norm) {
  double sum = 0.0;
  for (int64_t c = 0; c < chunks; ++c) sum += sums[c];
  *norm = sqrt(sum);
}

// clip_grad_norm's scaling: every x ← x·float(max_norm/(norm + 1e-6)) when
// the norm is finite and that coefficient below 1 (the host's arithmetic, in double).
__global__ void __launch_bounds__(kThreads) clip_kernel(const Chunk* chunks, const double* norm, double max_norm) {
  const double n = *norm;
  if (!isfinite(n)) return;
  const double coef = max_norm / (n + 1e-6);
  if (!(coef < 1.0)) return;
  const float factor = static_cast<float>(coef);
  const Chunk c = chunks[blockIdx.x];
  for (int64_t k = threadIdx.x; k < c.n; k += blockDim.x) c.data[k] = __fmul_rn(c.data[k], factor);
}

void clip_grad_norm(const std::vector<Tensor>& xs, double max_norm, const Tensor& norm_bits) {
  CMHA_CHECK(norm_bits.dtype() == DType::i64 && norm_bits.numel() == 1 && !norm_bits.device().is_cpu(),
             "clip_grad_norm: the norm " + norm_bits.describe() + " must be i64 [1] on the device");
  const ChunkTable table = chunk_table(xs, "clip_grad_norm", /*flags=*/0);
  auto* norm = static_cast<double*>(norm_bits.raw_data());
  const cudaStream_t stream = launch_stream(norm_bits);
  // The chunk sums, one double each in i64 words (cmha has no f64 dtype); none: a zero norm.
  const Tensor sums = Tensor::empty({std::max<int64_t>(table.chunks, 1)}, DType::i64, norm_bits.device());
  if (table.chunks > 0) {
    sum_squares_kernel<<<static_cast<unsigned>(table.chunks), kThreads, 0, stream>>>(
        table.chunk_data(), static_cast<double*>(sums.raw_data()));
    check_launch("sum_squares_kernel");
  }
  norm_of_sums_kernel<<<1, 1, 0, stream>>>(static_cast<const double*>(sums.raw_data()), table.chunks, norm);
  check_launch("norm_of_sums_kernel");
  if (table.chunks == 0 || !(max_norm > 0.0)) return;
  clip_kernel<<<static_cast<unsigned>(table.chunks), kThreads, 0, stream>>>(table.chunk_data(), norm, max_norm);
  check_launch("clip_kernel");
}

double sum_squares(const std::vector<Tensor>& xs) {
  const ChunkTable table = chunk_table(xs, "sum_squares", /*flags=*/0);
  if (table.chunks == 0) return 0.0;
  // One double per chunk, in i64 words (cmha has no f64 dtype).
  const Tensor sums = Tensor::empty({table.chunks}, DType::i64, table.device);
  sum_squares_kernel<<<static_cast<unsigned>(table.chunks), kThreads, 0, launch_stream(table.device)>>>(
      table.chunk_data(), static_cast<double*>(sums.raw_data()));
  check_launch("sum_squares_kernel");
  std::vector<double> host(static_cast<size_t>(table.chunks));
  cuda_copy_to_host(host.data(), sums.raw_data(), host.size() * sizeof(double), table.device.index);
  double sum = 0.0;
  for (double s : host) sum += s;  // list order, as the CPU: the same bits on every run
  return sum;
}

bool all_finite(const std::vector<Tensor>& xs) {
  const ChunkTable table = chunk_table(xs, "all_finite", /*flags=*/1);
  if (table.chunks == 0) return true;
  all_finite_kernel<<<static_cast<unsigned>(table.chunks), kThreads, 0, launch_stream(table.device)>>>(
      table.chunk_data(), reinterpret_cast<unsigned int*>(table.flags()));
  check_launch("all_finite_kernel");
  int64_t bad = 0;
  cuda_copy_to_host(&bad, table.flags(), sizeof(bad), table.device.index);
  return bad == 0;
}

void scale(const std::vector<Tensor>& xs, float c) {
  const ChunkTable table = chunk_table(xs, "scale", /*flags=*/0);
  if (table.chunks == 0) return;
  scale_kernel<<<static_cast<unsigned>(table.chunks), kThreads, 0, launch_stream(table.device)>>>(table.chunk_data(),
                                                                                                c);
  check_launch("scale_kernel");
}

}  // namespace

backend::OptimKernels optim_kernels() {
  return {
      .adam_step = adam_step,
      .sgd_step = sgd_step,
      .ema_update = ema_update,
      .swap = swap,
      .sum_squares = sum_squares,
      .all_finite = all_finite,
      .scale = scale,
      .clip_grad_norm = clip_grad_norm,
  };
}

}  // namespace cmha::cuda
