#include "backend/cpu/onednn.h"

#include "backend/kernels.h"
#include "backend/lru_cache.h"

#include <omp.h>

#include <cstdio>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

namespace cmha::cpu {

namespace {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::memory::data_type dnnl_type(DType t) {
  switch (t) {
    case DType::f32: return dnnl::memory::data_type::f32;
    case DType::bf16: return dnnl::memory::data_type::bf16;
    case DType::f16: return dnnl::memory::data_type::f16;
    case DType::i32: return dnnl::memory::data_type::s32;
    default: throw Error(std::string("oneDNN matmul: unsupported dtype ") + dtype_name(t));
  }
}

dnnl::memory::desc desc_of(const Tensor& t) {
  dnnl::memory::dims dims(t.shape().begin(), t.shape().end());
  dnnl::memory::dims strides(t.strides().begin(), t.strides().end());
  // oneDNN wants a non-zero stride even on size-1 dims.
  for (size_t i = 0; i < strides.size(); ++i)
    if (dims[i] == 1 && strides[i] == 0) strides[i] = 1;
  return dnnl::memory::desc(dims, dnnl_type(t.dtype()), strides);
}

struct Cached {
  dnnl::matmul prim;
  dnnl::memory::desc a, b, bias, c;
  // No oneDNN implementation for these dtypes on this CPU (bf16 and f16 need
  // AVX-512 in oneDNN 2.7): the product runs in f32 (matmul_through_f32).
  bool through_f32 = false;
};

// The cache key: the geometry of every operand plus the thread count. With
// the OpenMP runtime a primitive fixes its thread decomposition when it is
// created (brgemm matmul runs exactly that many threads), so a primitive made
// under omp_set_num_threads(1) must not serve a later 2-thread call.
// Flat integers rather than a formatted string: the lookup runs on every call.
using Key = std::vector<int64_t>;

struct KeyHash {
  size_t operator()(const Key& k) const noexcept {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t v : k) {
      h ^= static_cast<uint64_t>(v);
      h *= 0x100000001b3ull;
    }
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

// At most 512 primitives (about 2 KB of descriptors and a kernel each): a
// training run uses a few dozen geometries per batch shape, and the least
// recently used go first when shapes keep changing.
constexpr size_t kMaxPrimitives = 512;
backend::LruCache<Key, Cached, KeyHash>& primitives() {
  static backend::LruCache<Key, Cached, KeyHash> cache(kMaxPrimitives);
  return cache;
}

void key_of(Key& k, const Tensor& t) {
  k.push_back(static_cast<int64_t>(t.dtype()));
  k.push_back(t.dim());
  k.insert(k.end(), t.shape().begin(), t.shape().end());
  k.insert(k.end(), t.strides().begin(), t.strides().end());
}

// The operands widened to f32 (exact for bf16 and f16), one f32 product
// (which accumulates in f32, as oneDNN's bf16 kernels do), and the result
// rounded to c's dtype: the numbers a native bf16 GEMM gives, up to the order
// of the sums, at f32 GEMM speed. Said once per process on stderr.
void matmul_through_f32(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c) {
  static std::once_flag said;
  std::call_once(said, [&] {
    std::fprintf(stderr, "cmha: this CPU has no oneDNN kernels for %s matrix products (they need AVX-512): they run "
                 "as f32 products of the %s values, no faster than f32 training\n",
                 dtype_name(a.dtype()), dtype_name(a.dtype()));
  });
  const auto widened = [](const Tensor& t) {
    if (!t.defined() || t.dtype() == DType::f32) return t;
    Tensor w = Tensor::empty(t.shape(), DType::f32, Device::cpu());
    CMHA_KERNEL(Device::cpu(), copy.copy)(w, t);
    return w;
  };
  const Tensor a32 = widened(a), b32 = widened(b), bias32 = widened(bias);
  if (c.dtype() == DType::f32) return matmul_into(a32, b32, bias32, c);
  const Tensor c32 = Tensor::empty(c.shape(), DType::f32, Device::cpu());
  matmul_into(a32, b32, bias32, c32);
  CMHA_KERNEL(Device::cpu(), copy.copy)(c, c32);
}

}  // namespace

void matmul_into(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c) {
  if (c.numel() == 0) return;
  if (a.shape().back() == 0) {
    // K = 0 (oneDNN divides by it): the empty sum, plus the bias.
    if (bias.defined())
      CMHA_KERNEL(Device::cpu(), copy.copy)(c, bias.expand(c.shape()));
    else
      CMHA_KERNEL(Device::cpu(), copy.fill)(c, 0.0);
    return;
  }
  thread_local Key key;  // reused: no allocation once it has grown
  key.clear();
  key.push_back(omp_get_max_threads());
  key_of(key, a);
  key_of(key, b);
  key_of(key, c);
  if (bias.defined()) key_of(key, bias);
  const std::shared_ptr<Cached> entry = primitives().get_or_make(key, [&] {
      auto made = std::make_shared<Cached>();
      Cached& e = *made;
      e.a = desc_of(a);
      e.b = desc_of(b);
      e.c = desc_of(c);
      if (bias.defined()) {
        dnnl::memory::dims bd(c.dim(), 1);
        bd.back() = bias.numel();
        dnnl::memory::dims bs(c.dim(), bias.numel());
        bs.back() = 1;
        e.bias = dnnl::memory::desc(bd, dnnl_type(bias.dtype()), bs);
      }
      try {
        auto desc = bias.defined() ? dnnl::matmul::desc(e.a, e.b, e.bias, e.c) : dnnl::matmul::desc(e.a, e.b, e.c);
        e.prim = dnnl::matmul(dnnl::matmul::primitive_desc(desc, engine()));
      } catch (const dnnl::error& err) {
        const auto narrow = [](const Tensor& t) { return t.defined() && t.dtype() != DType::f32; };
        if (err.status != dnnl_unimplemented || !(narrow(a) || narrow(b) || narrow(bias) || narrow(c)))
          throw Error("oneDNN matmul cannot run " + a.describe() + " @ " + b.describe() + ": " + err.what());
        e.through_f32 = true;
      }
      return made;
  });
  if (entry->through_f32) return matmul_through_f32(a, b, bias, c);
  dnnl::memory ma(entry->a, engine(), a.raw_data());
  dnnl::memory mb(entry->b, engine(), b.raw_data());
  dnnl::memory mc(entry->c, engine(), c.raw_data());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, dnnl::memory(entry->bias, engine(), bias.raw_data()));
  // One stream per thread: streams are not meant to be shared across threads.
  thread_local dnnl::stream stream(engine());
  entry->prim.execute(stream, args);
  stream.wait();
}

size_t matmul_primitives_created() { return primitives().created(); }
size_t matmul_primitives_cached() { return primitives().size(); }

}  // namespace cmha::cpu
