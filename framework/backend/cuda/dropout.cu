// CUDA kernels: dropout (entries of backend/dropout.h), the keep mask drawn
// from the shared Philox4x32-10 (tensor/philox.h) with exactly the CPU's
// counter layout, so a (key, base, n) gives the same mask bit for bit on
// every device.
//
// One thread per counter: counter base + w (w < 64·(n/256)) is counter j = w % 64
// of group q = w / 64, and its four words decide elements 256q + 64l + j,
// l = 0..3 (each of the four stores of a warp covers 32 consecutive bytes of
// the mask and 128 of x and y). The tail counters w >= 64·(n/256) follow
// directly: counter base + w decides the (up to) four consecutive tail
// elements 256·(n/256) + 4·(w - 64·(n/256)) + l.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernel_table.h"
#include "tensor/philox.h"

namespace cmha::cuda {
namespace {

constexpr int64_t kGroup = 256;     // elements per group of 64 counters
constexpr int64_t kCounters = 64;   // counters per group

// y = x · (mask · scale): the CPU's two multiplies (no add, so nothing to fuse).
// x, y f32 or bf16 each (f32 arithmetic).
template <typename X, typename Y>
__device__ __forceinline__ void keep_or_drop(const X* x, Y* y, uint8_t* mask, int64_t i, uint32_t word,
                                             uint32_t threshold, float scale) {
  const uint8_t keep = (word >> 8) >= threshold ? 1 : 0;
  mask[i] = keep;
  st(y[i], __fmul_rn(ld(x[i]), __fmul_rn(static_cast<float>(keep), scale)));
}

template <typename X, typename Y>
__global__ void dropout_forward_kernel(const X* x, Y* y, uint8_t* mask, int64_t n, uint64_t base, uint32_t k0,
                                       uint32_t k1, uint32_t threshold, float scale) {
  const int64_t whole = n / kGroup * kGroup;         // elements in whole groups
  const int64_t group_counters = whole / 4;          // 64 per group
  const int64_t counters = group_counters + (n - whole + 3) / 4;
  CMHA_GRID_STRIDE(w, counters) {
    const PhiloxWords r = philox_counter(base + static_cast<uint64_t>(w), k0, k1);
    if (w < group_counters) {
      const int64_t first = w / kCounters * kGroup + w % kCounters;  // element 256q + j
#pragma unroll
      for (int l = 0; l < 4; ++l) keep_or_drop(x, y, mask, first + kCounters * l, r.w[l], threshold, scale);
    } else {
      const int64_t first = whole + 4 * (w - group_counters);  // tail element 4·t' .. 4·t' + 3
#pragma unroll
      for (int l = 0; l < 4; ++l)
        if (first + l < n) keep_or_drop(x, y, mask, first + l, r.w[l], threshold, scale);
    }
  }
}

// dx = g · (mask · scale), as the CPU's apply_mask.
template <typename G, typename DX>
__global__ void dropout_backward_kernel(const G* g, const uint8_t* mask, DX* dx, int64_t n, float scale) {
  CMHA_GRID_STRIDE(i, n) st(dx[i], __fmul_rn(ld(g[i]), __fmul_rn(static_cast<float>(mask[i]), scale)));
}

void forward(const Tensor& x, const Tensor& y, const Tensor& mask, uint64_t base, std::array<uint32_t, 2> key,
             float p, float scale) {
  const int64_t n = x.numel();
  CMHA_CHECK(y.numel() == n && mask.numel() == n,
             "dropout: x " + x.describe() + ", y " + y.describe() + " and mask " + mask.describe() + " differ in size");
  auto* pm = reinterpret_cast<uint8_t*>(device_data<bool>(mask, "dropout"));
  with_float_types(x, y, "dropout", [&](auto tx, auto ty) {
    using X = decltype(tx);
    using Y = decltype(ty);
    const X* px = device_data<X>(x, "dropout");
    Y* py = device_data<Y>(y, "dropout");
    if (n == 0) return;
    const int64_t counters = (n + 3) / 4;  // the reservation: every counter is one thread's work
    dropout_forward_kernel<X, Y><<<blocks_for(counters), kThreads, 0, launch_stream(x)>>>(
        px, py, pm, n, base, key[0], key[1], backend::dropout_keep_threshold(p), scale);
  });
  if (n == 0) return;
  check_launch("dropout_forward_kernel");
}

void backward(const Tensor& g, const Tensor& mask, const Tensor& dx, float scale) {
  const int64_t n = dx.numel();
  CMHA_CHECK(g.numel() == n && mask.numel() == n, "dropout backward: g " + g.describe() + ", mask " +
                                                      mask.describe() + " and dx " + dx.describe() + " differ in size");
  const auto* pm = reinterpret_cast<const uint8_t*>(device_data<bool>(mask, "dropout backward"));
  with_float_types(g, dx, "dropout backward", [&](auto tg, auto td) {
    using G = decltype(tg);
    using DX = decltype(td);
    const G* pg = device_data<G>(g, "dropout backward");
    DX* pd = device_data<DX>(dx, "dropout backward");
    if (n == 0) return;
    dropout_backward_kernel<G, DX><<<blocks_for(n), kThreads, 0, launch_stream(dx)>>>(pg, pm, pd, n, scale);
  });
  if (n == 0) return;
  check_launch("dropout_backward_kernel");
}

}  // namespace

backend::DropoutKernels dropout_kernels() {
  backend::DropoutKernels k;
  k.forward = forward;
  k.backward = backward;
  return k;
}

}  // namespace cmha::cuda
