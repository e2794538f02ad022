// The output projection fused with label-smoothed cross-entropy, in row
// chunks: logits = x·Wᵀ for a chunk of rows (f32, a few MB, cache-resident),
// its losses and argmax, and — when a gradient is wanted — d loss/d logits
// of the chunk, kept in the GEMM dtype (bf16 under autocast). The [N, V]
// logits are never stored whole; the gradient rows are, once. After the last
// chunk two GEMMs give dx = dZ·W and dW = dZᵀ·x for an upstream gradient of
// 1, dZ is freed, and backward only scales them: the gradient of a summed or
// averaged loss is linear in its upstream scalar.
//
// Unfused, the same step stores the f32 logits, their f32 gradient and its
// bf16 copy: 2.5 × N·V·4 bytes (330 MB at 4096 tokens × 8000 pieces).
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "autograd/deferred_checks.h"
#include "autograd/engine.h"
#include "autograd/loss_chunks.h"
#include "autograd/ops.h"
#include "backend/kernels.h"
#include "backend/working_copy.h"
#ifdef CMHA_WITH_CUDA
#include "tensor/cuda_runtime.h"
#endif

namespace cmha {

namespace {

// Rows per chunk on `dev` (autograd/loss_chunks.h).
int64_t chunk_rows(int64_t N, int64_t V, Device dev) {
  const bool real_gpu = !dev.is_cpu() && !cuda_emulated();
  size_t device_bytes = 0;
#ifdef CMHA_WITH_CUDA
  if (real_gpu) {  // asked once per device: cudaGetDeviceProperties is slow
    static std::mutex mutex;
    static std::map<int, size_t> bytes_of;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = bytes_of.find(dev.index);
    if (it == bytes_of.end()) it = bytes_of.emplace(dev.index, cuda_device_info(dev.index).total_bytes).first;
    device_bytes = it->second;
  }
#endif
  return loss_chunk_rows(N, V, loss_chunk_bytes(real_gpu, device_bytes));
}

struct LinearCrossEntropySaved {
  Tensor dx, dw;  // [N, D], [V, D]: the gradients for an upstream gradient of 1
};

}  // namespace

LinearCrossEntropy linear_cross_entropy(const Tensor& x, const Tensor& w, const Tensor& target, float eps,
                                        int64_t ignore_index, Reduction reduction) {
  CMHA_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16,
             "linear_cross_entropy: expected an f32 or bf16 input, got " + x.describe());
  w.check_dtype(DType::f32, "linear_cross_entropy weight");
  const Device dev = common_device("linear_cross_entropy", {x, w, target});
  CMHA_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && w.size(0) > 0,
             "linear_cross_entropy: input " + x.describe() + " must be [N, D] and the weight " + w.describe() +
                 " [V, D] with V > 0");
  CMHA_CHECK(target.dtype() == DType::i32 || target.dtype() == DType::i64,
             "linear_cross_entropy: target must be i32 or i64, got " + target.describe());
  CMHA_CHECK(target.shape() == Shape{x.size(0)},
             "linear_cross_entropy: target " + target.describe() + " does not match the input " + x.describe());
  CMHA_CHECK(eps >= 0.0f && eps <= 1.0f,
             "linear_cross_entropy: label_smoothing must be in [0, 1], got " + std::to_string(eps));
  CMHA_CHECK(reduction != Reduction::none, "linear_cross_entropy: reduction none is not supported (use linear and "
                                           "cross_entropy): its gradient needs the per-row upstream values");
  const int64_t N = x.size(0), V = w.size(0), D = x.size(1);
  Tensor t = target.to(DType::i64).contiguous();
  const int64_t count = checked_target_count(t, V, ignore_index, reduction == Reduction::mean);
  const bool need_grad = autograd::needs_grad({x, w});
  // Under bf16 autocast the GEMMs read bf16 copies (made once), as linear's do.
  const DType gemm = autograd::autocast_bf16() ? DType::bf16 : DType::f32;
  // An f32 weight's bf16 copy is kept between steps (backend/working_copy.h).
  const Tensor xg = x.detach().to(gemm).contiguous();
  const Tensor wg = gemm == DType::bf16 && w.dtype() == DType::f32 ? backend::bf16_working_copy(w).contiguous()
                                                                   : w.detach().to(gemm).contiguous();

  Tensor row_loss = Tensor::empty({N}, DType::f32, dev), max = Tensor::empty({N}, DType::f32, dev),
         log_sum = Tensor::empty({N}, DType::f32, dev), predictions = Tensor::empty({N}, DType::i64, dev);
  Tensor dz = need_grad ? Tensor::empty({N, V}, gemm, dev) : Tensor();  // d loss/d logits, upstream 1
  const float denom = reduction == Reduction::mean ? static_cast<float>(count) : 1.0f;
  const Tensor one = Tensor::full({1}, 1.0, DType::f32, dev);
  const int64_t rows = chunk_rows(N, V, dev);
  Tensor z = Tensor::empty({std::min(rows, N), V}, DType::f32, dev);  // one chunk's logits
  Tensor dz_f32 = need_grad && gemm != DType::f32 ? Tensor::empty(z.shape(), DType::f32, dev) : Tensor();
  Tensor best = Tensor::empty({std::min(rows, N)}, DType::f32, dev);
  for (int64_t r0 = 0; r0 < N; r0 += rows) {
    const int64_t n = std::min(rows, N - r0);
    Tensor zc = z.narrow(0, 0, n);  // [n, V]
    CMHA_KERNEL(dev, matmul.matmul)(xg.narrow(0, r0, n), wg.transpose(0, 1), Tensor(), zc);
    const Tensor tc = t.narrow(0, r0, n), mc = max.narrow(0, r0, n), lc = log_sum.narrow(0, r0, n);
    CMHA_KERNEL(dev, loss.cross_entropy_forward)(zc, tc, row_loss.narrow(0, r0, n), mc, lc, eps, ignore_index);
    CMHA_KERNEL(dev, reduce.max)(zc, 1, best.narrow(0, 0, n), predictions.narrow(0, r0, n));
    if (!need_grad) continue;
    Tensor dzc = dz.narrow(0, r0, n);
    Tensor grad_rows = gemm == DType::f32 ? dzc : dz_f32.narrow(0, 0, n);
    CMHA_KERNEL(dev, loss.cross_entropy_backward)(zc, tc, mc, lc, one, grad_rows, eps, ignore_index, false, denom);
    if (gemm != DType::f32) CMHA_KERNEL(dev, copy.copy)(dzc, grad_rows);
  }

  Tensor loss = Tensor::empty({}, DType::f32, dev);
  CMHA_KERNEL(dev, loss.reduce_rows)(row_loss, loss, reduction == Reduction::mean ? static_cast<double>(count)
                                                                                   : 1.0);
  if (need_grad) {
    auto saved = std::make_shared<LinearCrossEntropySaved>();
    if (x.requires_grad()) {
      saved->dx = Tensor::empty({N, D}, x.dtype(), dev);  // dZ [N, V] · W [V, D], in x's dtype
      CMHA_KERNEL(dev, matmul.matmul)(dz, wg, Tensor(), saved->dx);
    }
    if (w.requires_grad()) {
      saved->dw = Tensor::empty({V, D}, DType::f32, dev);  // dZᵀ [V, N] · x [N, D]
      CMHA_KERNEL(dev, matmul.matmul)(dz.transpose(0, 1), xg, Tensor(), saved->dw);  // N = 0 gives zeros
    }
    autograd::record(loss, "linear_cross_entropy", {x, w}, [saved](const Tensor& g) {
      // g: the upstream scalar; the saved gradients are for g = 1.
      return std::vector<Tensor>{saved->dx.defined() ? mul(saved->dx, g).to(saved->dx.dtype()) : Tensor(),
                                 saved->dw.defined() ? mul(saved->dw, g) : Tensor()};
    });
  }
  return {loss, predictions};
}

}  // namespace cmha
