// CUDA kernels: matmul (entries of backend/matmul.h) through cuBLASLt.
//
// cuBLASLt is column-major; cmha's tensors are row-major. A row-major [R, C]
// matrix with leading stride ld is the column-major [C, R] matrix with the
// same ld, so c = a·b (row-major, [M, N]) is computed as the column-major
// cᵀ = bᵀ·aᵀ: cuBLASLt's "A" is our b, its "B" our a, its m = N, n = M.
//
// f32 runs with CUBLAS_COMPUTE_32F: no TF32, so results compare with the CPU's
// f32 GEMM to rounding; with train.tf32 (backend::f32_matmul_tf32) it runs
// with CUBLAS_COMPUTE_32F_FAST_TF32 instead. bf16 inputs accumulate in f32 and write f32 or bf16.
// The bias is cuBLASLt's epilogue (added to every row of c). Algorithms come
// from cuBLASLt's heuristic once per geometry and are cached with their
// descriptors; the workspace (32 MiB, what cuBLAS asks for on Hopper) is
// allocated once per device from the stream-ordered pool.
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cuda/cublaslt.h"
#include "backend/cuda/gemm_alignment.h"
#include "backend/cuda/kernel_table.h"
#include "backend/lru_cache.h"
#include "tensor/cuda_runtime.h"

namespace cmha::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: throw Error(std::string("matmul: cuBLASLt has no ") + dtype_name(t) + " GEMM in cmha");
  }
}

// One operand as cuBLASLt sees it: its stored column-major layout and
// whether the op transposes it.
struct Operand {
  bool transpose = false;
  uint64_t rows = 0, cols = 0;  // of the stored column-major matrix
  int64_t ld = 0;
};

// A row-major view [R, C] (strides sr, sc) that must enter cuBLASLt as the
// column-major op matrix of shape [C, R] (op rows × op cols).
Operand operand_of(int64_t R, int64_t C, int64_t sr, int64_t sc, const char* name) {
  Operand o;
  // Row-major dense (or a single column): stored column-major as [C, R], ld = sr.
  if (sc == 1 || C == 1) {
    o.transpose = false;
    o.rows = static_cast<uint64_t>(C);
    o.cols = static_cast<uint64_t>(R);
    o.ld = (R == 1) ? std::max<int64_t>(C, 1) : sr;
    if (o.ld >= std::max<int64_t>(C, 1)) return o;
  }
  // Column-major dense (a transposed view): stored column-major as [R, C], ld = sc.
  if (sr == 1 || R == 1) {
    o.transpose = true;
    o.rows = static_cast<uint64_t>(R);
    o.cols = static_cast<uint64_t>(C);
    o.ld = (C == 1) ? std::max<int64_t>(R, 1) : sc;
    if (o.ld >= std::max<int64_t>(R, 1)) return o;
  }
  throw Error(std::string("matmul: operand ") + name + " has strides (" + std::to_string(sr) + ", " +
              std::to_string(sc) + ") in its last two dims, neither row- nor column-major dense (the op copies such views)");
}

uint32_t alignment_of(const void* p) { return alignment_of_address(reinterpret_cast<uintptr_t>(p)); }

// Everything that selects descriptors and an algorithm.
struct GeometryKey {
  std::array<int64_t, 21> v{};
  bool operator==(const GeometryKey& o) const { return v == o.v; }
};
struct GeometryHash {
  size_t operator()(const GeometryKey& k) const noexcept {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t x : k.v) h = (h ^ static_cast<uint64_t>(x)) * 0x100000001b3ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};
// Plans per device: 512 geometries, the least recently used evicted (batch
// shapes change in translation; each plan holds four descriptors).
constexpr size_t kMaxPlans = 512;

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    const CublasLtApi& lt = cublaslt();
    if (op) lt.matmul_desc_destroy(op);
    if (a) lt.layout_destroy(a);
    if (b) lt.layout_destroy(b);
    if (d) lt.layout_destroy(d);
  }
};

struct DeviceContext {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  backend::LruCache<GeometryKey, Plan, GeometryHash> plans{kMaxPlans};
};

DeviceContext& context(int device) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<DeviceContext>>* contexts = new std::map<int, std::unique_ptr<DeviceContext>>;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<DeviceContext>& c = (*contexts)[device];
  if (!c) {
    auto fresh = std::make_unique<DeviceContext>();
    check_cublas(cublaslt().create(&fresh->handle), "cublasLtCreate", "matmul on cuda:" + std::to_string(device));
    fresh->workspace = cuda_alloc(kWorkspaceBytes, device);  // never freed: lives as long as the process
    c = std::move(fresh);
  }
  return *c;
}

void set_layout_batch(cublasLtMatrixLayout_t layout, int32_t count, int64_t stride, const std::string& what) {
  const CublasLtApi& lt = cublaslt();
  check_cublas(lt.layout_set(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), "cublasLtMatrixLayoutSetAttribute", what);
  check_cublas(lt.layout_set(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
               "cublasLtMatrixLayoutSetAttribute", what);
}

// The batch dims of c with each operand's element stride per dim (0 where it
// broadcasts), merged where all three are contiguous across a boundary.
struct Batch {
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, 3>> strides;  // a, b, c
};

Batch batch_of(const Tensor& a, const Tensor& b, const Tensor& c) {
  Batch batch;
  const int64_t nb = c.dim() - 2;
  for (int64_t d = 0; d < nb; ++d) {
    const int64_t n = c.size(d);
    if (n == 1) continue;
    const std::array<int64_t, 3> s = {a.size(d) == 1 ? 0 : a.strides()[d], b.size(d) == 1 ? 0 : b.strides()[d], c.strides()[d]};
    if (!batch.sizes.empty()) {
      const std::array<int64_t, 3>& prev = batch.strides.back();
      bool merge = true;
      for (int k = 0; k < 3; ++k) merge = merge && prev[k] == s[k] * n;
      if (merge) {
        batch.sizes.back() *= n;
        batch.strides.back() = s;
        continue;
      }
    }
    batch.sizes.push_back(n);
    batch.strides.push_back(s);
  }
  return batch;
}

void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c) {
  const Device dev = c.device();
  const int64_t nd = c.dim(), M = c.size(nd - 2), N = c.size(nd - 1), K = a.size(nd - 1);
  if (M == 0 || N == 0 || c.numel() == 0) return;
  const bool bias_after = bias.defined() && c.dtype() != DType::f32;
  if (K == 0 || bias_after) {
    // K = 0: c = 0 (+ bias). A bf16 c with an f32 bias: GEMM into f32 with
    // the bias, then round once (cuBLASLt's bias type follows D's).
    if (K == 0) {
      if (bias.defined())
        CMHA_KERNEL(dev, copy.copy)(c, bias.expand(c.shape()));
      else
        CMHA_KERNEL(dev, copy.fill)(c, 0.0);
      return;
    }
    Tensor wide = Tensor::empty(c.shape(), DType::f32, dev);
    matmul(a, b, bias, wide);
    CMHA_KERNEL(dev, copy.copy)(c, wide);
    return;
  }
  const std::string what = "matmul " + a.describe() + " @ " + b.describe() + " on " + dev.str();
  const CublasLtApi& lt = cublaslt();

  // cuBLASLt's A = our b [K, N]: op(A) is [N, K]. Its B = our a [M, K]: op(B) is [K, M].
  const Operand A = operand_of(K, N, b.strides()[nd - 2], b.strides()[nd - 1], "b");
  const Operand B = operand_of(M, K, a.strides()[nd - 2], a.strides()[nd - 1], "a");
  const Batch batch = batch_of(a, b, c);
  // The innermost merged batch dim goes to cuBLASLt; outer ones loop here.
  const int64_t inner_count = batch.sizes.empty() ? 1 : batch.sizes.back();
  const std::array<int64_t, 3> inner_stride = batch.sizes.empty() ? std::array<int64_t, 3>{0, 0, 0} : batch.strides.back();
  CMHA_CHECK(inner_count <= INT32_MAX, what + ": more than 2^31 matrices in one batch");
  const size_t ea = dtype_size(a.dtype()), eb = dtype_size(b.dtype()), ec = dtype_size(c.dtype());
  const cudaDataType_t ta = cuda_type(a.dtype()), tc = cuda_type(c.dtype());
  CMHA_CHECK(a.dtype() == b.dtype(), what + ": a and b must have one dtype");

  // TF32 only where both inputs are f32 (bf16 inputs already use the tensor cores).
  const bool tf32 = a.dtype() == DType::f32 && backend::f32_matmul_tf32();
  DeviceContext& ctx = context(dev.index);
  std::lock_guard<std::mutex> lock(ctx.mutex);
  // The alignments every matrix of the call has (gemm_alignment.h): the
  // outer batch loop below offsets the pointers.
  std::vector<int64_t> outer_sizes, outer_a, outer_b, outer_c;  // strides in bytes
  for (size_t d = 0; d + 1 < batch.sizes.size(); ++d) {
    outer_sizes.push_back(batch.sizes[d]);
    outer_a.push_back(batch.strides[d][0] * static_cast<int64_t>(ea));
    outer_b.push_back(batch.strides[d][1] * static_cast<int64_t>(eb));
    outer_c.push_back(batch.strides[d][2] * static_cast<int64_t>(ec));
  }
  const uint32_t align_of_a = batch_alignment(reinterpret_cast<uintptr_t>(a.raw_data()), outer_sizes, outer_a);
  const uint32_t align_of_b = batch_alignment(reinterpret_cast<uintptr_t>(b.raw_data()), outer_sizes, outer_b);
  const uint32_t align_of_c = batch_alignment(reinterpret_cast<uintptr_t>(c.raw_data()), outer_sizes, outer_c);
  GeometryKey key;
  key.v = {static_cast<int64_t>(ta), static_cast<int64_t>(tc), A.transpose, static_cast<int64_t>(A.rows),
           static_cast<int64_t>(A.cols), A.ld, B.transpose, static_cast<int64_t>(B.rows), static_cast<int64_t>(B.cols),
           B.ld, N, M, inner_count, inner_stride[0], inner_stride[1], inner_stride[2], bias.defined(),
           align_of_a * 1000 + align_of_b, align_of_c, bias.defined() ? alignment_of(bias.raw_data()) : 0, tf32};
  const std::shared_ptr<Plan> plan = ctx.plans.get_or_make(key, [&] {
    auto p = std::make_shared<Plan>();
    check_cublas(lt.matmul_desc_create(&p->op, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", what);
    const cublasOperation_t opa = A.transpose ? CUBLAS_OP_T : CUBLAS_OP_N, opb = B.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_cublas(lt.matmul_desc_set(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), "cublasLtMatmulDescSetAttribute", what);
    check_cublas(lt.matmul_desc_set(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), "cublasLtMatmulDescSetAttribute", what);
    if (bias.defined()) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bias_type = CUDA_R_32F;
      check_cublas(lt.matmul_desc_set(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
                   "cublasLtMatmulDescSetAttribute", what);
      check_cublas(lt.matmul_desc_set(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type),
                   "cublasLtMatmulDescSetAttribute", what);
    }
    check_cublas(lt.layout_create(&p->a, ta, A.rows, A.cols, A.ld), "cublasLtMatrixLayoutCreate", what);
    check_cublas(lt.layout_create(&p->b, ta, B.rows, B.cols, B.ld), "cublasLtMatrixLayoutCreate", what);
    check_cublas(lt.layout_create(&p->d, tc, static_cast<uint64_t>(N), static_cast<uint64_t>(M), N),
                 "cublasLtMatrixLayoutCreate", what);
    if (inner_count > 1) {
      set_layout_batch(p->a, static_cast<int32_t>(inner_count), inner_stride[1], what);  // our b
      set_layout_batch(p->b, static_cast<int32_t>(inner_count), inner_stride[0], what);  // our a
      set_layout_batch(p->d, static_cast<int32_t>(inner_count), inner_stride[2], what);
    }
    cublasLtMatmulPreference_t pref = nullptr;
    check_cublas(lt.preference_create(&pref), "cublasLtMatmulPreferenceCreate", what);
    const uint64_t ws = kWorkspaceBytes;
    lt.preference_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    const uint32_t align_a = align_of_b, align_b = align_of_a, align_d = align_of_c;  // cuBLASLt's A is our b
    lt.preference_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a);
    lt.preference_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b);
    lt.preference_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof align_d);
    lt.preference_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof align_d);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = lt.algo_get_heuristic(ctx.handle, p->op, p->a, p->b, p->d, p->d, pref, 1, &result, &found);
    lt.preference_destroy(pref);
    check_cublas(st, "cublasLtMatmulAlgoGetHeuristic", what);
    CMHA_CHECK(found > 0, what + ": cuBLASLt has no algorithm for this geometry");
    p->algo = result.algo;
    return p;
  });
  if (bias.defined()) {
    const void* bias_ptr = bias.raw_data();
    check_cublas(lt.matmul_desc_set(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr),
                 "cublasLtMatmulDescSetAttribute", what);
  }
  const float alpha = 1.0f, beta = 0.0f;
  cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream(dev.index));
  cuda_check(cudaSetDevice(dev.index), "cudaSetDevice", what);
  // Outer batch dims (those that did not merge into one stride) loop here.
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < batch.sizes.size(); ++d) outer *= batch.sizes[d];
  const auto* pa = static_cast<const char*>(a.raw_data());
  const auto* pb = static_cast<const char*>(b.raw_data());
  auto* pc = static_cast<char*>(c.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rem = o, oa = 0, ob = 0, oc = 0;
    for (int64_t d = static_cast<int64_t>(batch.sizes.size()) - 2; d >= 0; --d) {
      const int64_t idx = rem % batch.sizes[d];
      rem /= batch.sizes[d];
      oa += idx * batch.strides[d][0];
      ob += idx * batch.strides[d][1];
      oc += idx * batch.strides[d][2];
    }
    // What the plan declared holds for this matrix (a wrong declaration is a fault, not an error).
    CMHA_CHECK(alignment_of(pa + oa * ea) >= align_of_a && alignment_of(pb + ob * eb) >= align_of_b &&
                   alignment_of(pc + oc * ec) >= align_of_c,
               what + ": batch " + std::to_string(o) + " is less aligned than declared to cuBLASLt");
    check_cublas(lt.matmul(ctx.handle, plan->op, &alpha, pb + ob * eb, plan->a, pa + oa * ea, plan->b, &beta, pc + oc * ec,
                           plan->d, pc + oc * ec, plan->d, &plan->algo, ctx.workspace, kWorkspaceBytes, stream),
                 "cublasLtMatmul", what);
  }
}

}  // namespace

backend::MatmulKernels matmul_kernels() {
  backend::MatmulKernels k;
  k.matmul = matmul;
  return k;
}

}  // namespace cmha::cuda
