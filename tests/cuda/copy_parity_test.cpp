// GPU parity of the copy family: copy (every dtype to every dtype, strided,
// sliced, broadcast and strided-destination views), fill, iota and the
// host <-> device transfer. All exact: the CPU's bytes, NaN payloads,
// bf16/f16 rounding and x86's integer conversions included.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "autograd/ops.h"
#include "backend/kernels.h"
#include "cuda/parity.h"

using namespace cmha;
using namespace cmha::test;

namespace {

template <typename T>
void put(Tensor& t, const std::vector<T>& values) {
  const size_t k = std::min(values.size(), static_cast<size_t>(t.numel()));
  std::memcpy(t.raw_data(), values.data(), k * sizeof(T));
}

// n values of `dtype` (contiguous, on the CPU): first the special values
// where conversions round, overflow or meet NaN (as raw bits), then random
// ones over many magnitudes (1e-5 to 1e5, so f16 overflows and rounds to
// subnormals, and integer casts truncate).
Tensor source_values(DType dtype, int64_t n, uint64_t seed) {
  Tensor f = random_of({n}, DType::f32, seed, -1.0, 1.0);
  for (int64_t i = 0; i < n; ++i) f.data<float>()[i] *= static_cast<float>(std::pow(10.0, static_cast<double>(i % 11) - 5.0));
  Tensor t = Tensor::empty({n}, dtype);
  if (dtype == DType::i32 || dtype == DType::i64) t.copy_(random_of({n}, DType::f32, seed, -2e6, 2e6));
  else if (dtype == DType::b8) t.copy_(random_of({n}, DType::b8, seed));
  else t.copy_(f);
  switch (dtype) {
    case DType::f32:
      put<uint32_t>(t, {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa12345u, 0xff812345u, 0x7f800000u, 0xff800000u,
                        0x80000000u, 0x00000001u, 0x807fffffu, 0x3f808000u, 0x3f818000u, 0x477ff000u, 0x477fe000u,
                        0x477fefffu, 0x33000000u, 0x33000001u, 0x4f000000u, 0xcf000000u, 0xcf000001u, 0x5f000000u,
                        0xdf000000u, 0x4e6e6b28u, 0xbf7fffffu, 0x3f000000u, 0x4b800001u});
      break;
    case DType::bf16:
      put<uint16_t>(t, {0x7fc0, 0xffc0, 0x7f81, 0xff81, 0x7f80, 0xff80, 0x8000, 0x0001, 0x4780, 0x477f, 0x4f00,
                        0xcf00, 0x5f00, 0xdf00, 0x3f81, 0x3380, 0x3381});
      break;
    case DType::f16:
      put<uint16_t>(t, {0x7e00, 0xfe00, 0x7c01, 0xfd23, 0x7c00, 0xfc00, 0x8000, 0x0001, 0x83ff, 0x7bff, 0xfbff,
                        0x3c01, 0x6800, 0x6801});
      break;
    case DType::i32:
      put<int32_t>(t, {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), -1, 0, 16777217,
                       -16777219, 2049, 2051, 65504, 65520, 70001, 257, 1});
      break;
    case DType::i64:
      put<int64_t>(t, {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                       (int64_t{1} << 62) + (int64_t{1} << 38) + 1, 3000000000, -3000000000, 2147483647, -2147483648,
                       -2147483649, (int64_t{1} << 53) + 1, 16777217, -1, 0, 65520, 2049, int64_t{1} << 40});
      break;
    case DType::b8: break;
  }
  return t;
}

// dst = src converted on both devices, dst (of `dst_shape`) fresh, src a
// view `view` of the same base: the CPU's bytes.
::testing::AssertionResult copy_matches(DType dst_dtype, const Shape& dst_shape, const Tensor& src_base,
                                        const std::function<Tensor(const Tensor&)>& view) {
  Tensor cpu = Tensor::empty(dst_shape, dst_dtype), gpu = Tensor::empty(dst_shape, dst_dtype, Device::cuda(0));
  CMHA_KERNEL(Device::cpu(), copy.copy)(cpu, view(src_base));
  CMHA_KERNEL(Device::cuda(0), copy.copy)(gpu, view(gpu_copy(src_base)));
  return same_as_cpu(gpu, cpu);
}

std::string pair_name(DType d, DType s) { return std::string(dtype_name(s)) + " -> " + dtype_name(d); }

}  // namespace

PARITY_TEST(CopyEveryDTypePairContiguous, "copy.copy") {
  for (DType s : kEveryDType)
    for (DType d : kEveryDType)
      for (int64_t n : {0, 1, 7, 33, 1003}) {
        const Tensor src = source_values(s, n, 100 + n);
        EXPECT_TRUE(copy_matches(d, {n}, src, [](const Tensor& t) { return t; })) << pair_name(d, s) << ", n = " << n;
      }
}

PARITY_TEST(CopyEveryDTypePairFromViews, "copy.copy") {
  for (DType s : kEveryDType)
    for (DType d : kEveryDType) {
      const std::string what = pair_name(d, s);
      // [33, 7] transposed to [7, 33]
      EXPECT_TRUE(copy_matches(d, {7, 33}, source_values(s, 33 * 7, 1).view({33, 7}),
                               [](const Tensor& t) { return t.transpose(0, 1); }))
          << what << ", transposed";
      // every other column of [7, 67], from column 1
      EXPECT_TRUE(copy_matches(d, {7, 33}, source_values(s, 7 * 67, 2).view({7, 67}),
                               [](const Tensor& t) { return t.slice(1, 1, 67, 2); }))
          << what << ", sliced with step 2";
      // broadcasts: a row [1, 33] and a lower-rank [33] to [7, 33], a column
      // expanded, a 0-d scalar
      EXPECT_TRUE(copy_matches(d, {7, 33}, source_values(s, 33, 3).view({1, 33}), [](const Tensor& t) { return t; }))
          << what << ", row broadcast";
      EXPECT_TRUE(copy_matches(d, {7, 33}, source_values(s, 33, 4), [](const Tensor& t) { return t; }))
          << what << ", lower rank broadcast";
      EXPECT_TRUE(copy_matches(d, {7, 33}, source_values(s, 7, 5).view({7, 1}),
                               [](const Tensor& t) { return t.expand({7, 33}); }))
          << what << ", expanded column";
      EXPECT_TRUE(copy_matches(d, {3, 5}, source_values(s, 1, 6).view({}), [](const Tensor& t) { return t; }))
          << what << ", scalar";
      // 4-d permuted with a step slice
      EXPECT_TRUE(copy_matches(d, {5, 3, 2, 2}, source_values(s, 2 * 3 * 4 * 5, 7).view({2, 3, 4, 5}),
                               [](const Tensor& t) { return t.permute({3, 1, 0, 2}).slice(3, 0, 4, 3); }))
          << what << ", permuted and sliced";
      // empty
      EXPECT_TRUE(copy_matches(d, {0, 33}, source_values(s, 33, 8), [](const Tensor& t) { return t; }))
          << what << ", empty destination";
    }
}

PARITY_TEST(CopyIntoStridedDestinations, "copy.copy") {
  // dst is a view of a bigger base: the elements outside it must stay as they were.
  for (DType s : kEveryDType)
    for (DType d : kEveryDType) {
      const Tensor src = source_values(s, 7 * 33, 11).view({7, 33});
      const Tensor dst_base = source_values(d, 33 * 14, 12).view({33, 14});
      Tensor cpu_base = dst_base.clone(), gpu_base = gpu_copy(dst_base);
      auto dst_view = [](const Tensor& base) { return base.slice(1, 0, 14, 2).transpose(0, 1); };  // [7, 33]
      CMHA_KERNEL(Device::cpu(), copy.copy)(dst_view(cpu_base), src);
      CMHA_KERNEL(Device::cuda(0), copy.copy)(dst_view(gpu_base), gpu_copy(src));
      EXPECT_TRUE(same_as_cpu(gpu_base, cpu_base)) << pair_name(d, s);
      // A broadcast source into the strided destination.
      const Tensor row = source_values(s, 33, 13);
      CMHA_KERNEL(Device::cpu(), copy.copy)(dst_view(cpu_base), row);
      CMHA_KERNEL(Device::cuda(0), copy.copy)(dst_view(gpu_base), gpu_copy(row));
      EXPECT_TRUE(same_as_cpu(gpu_base, cpu_base)) << pair_name(d, s) << ", broadcast row";
    }
}

PARITY_TEST(CopyPastTheGridCap, "copy.copy") {
  // Past 65536 blocks of 256 threads: the grid-stride loops must go round.
  const int64_t n = (int64_t{1} << 24) + 3;
  EXPECT_TRUE(copy_matches(DType::bf16, {n}, source_values(DType::f32, n, 21), [](const Tensor& t) { return t; }));
  EXPECT_TRUE(copy_matches(DType::f32, {4097, 4099}, source_values(DType::f32, 4099 * 4097, 22).view({4099, 4097}),
                           [](const Tensor& t) { return t.transpose(0, 1); }));
}

PARITY_TEST(CopyThroughTensorApi, "copy.copy", "copy.transfer") {
  // contiguous(), to(dtype), clone() and concat/split (slices and copy_) on the GPU.
  const Tensor x = source_values(DType::bf16, 2 * 3 * 4 * 5, 31).view({2, 3, 4, 5});
  const Tensor gx = gpu_copy(x);
  EXPECT_TRUE(same_as_cpu(gx.permute({2, 0, 3, 1}).contiguous(), x.permute({2, 0, 3, 1}).contiguous()));
  EXPECT_TRUE(same_as_cpu(gx.to(DType::f32), x.to(DType::f32)));
  EXPECT_TRUE(same_as_cpu(gx.transpose(1, 3).clone(), x.transpose(1, 3).clone()));
  const Tensor y = source_values(DType::f32, 7 * 33, 32).view({7, 33});
  const Tensor gy = gpu_copy(y);
  EXPECT_TRUE(same_as_cpu(gy.to(DType::f16).to(DType::bf16), y.to(DType::f16).to(DType::bf16)));
  const Tensor z = source_values(DType::f32, 7 * 5, 33).view({7, 5});
  EXPECT_TRUE(same_as_cpu(concat({gy, gpu_copy(z), gy.slice(1, 0, 33, 4)}, 1), concat({y, z, y.slice(1, 0, 33, 4)}, 1)));
  const std::vector<Tensor> parts = split(gy, {10, 0, 23}, 1), cpu_parts = split(y, {10, 0, 23}, 1);
  for (size_t i = 0; i < parts.size(); ++i) EXPECT_TRUE(same_as_cpu(parts[i].contiguous(), cpu_parts[i].contiguous())) << i;
}

PARITY_TEST(FillEveryDTypeAndView, "copy.fill") {
  const double values[] = {0.0,  -0.0, 1.5,     -2.75,   0.1,   1e10,      -1e10,       NAN,         INFINITY,
                           -INFINITY, 65520.0, 65519.0, 1e-8, 3e9, -2147483648.0, 9.3e18, 1e-300, 255.0, 0.5};
  for (DType d : kEveryDType)
    for (double v : values) {
      // contiguous (zero is a memset there), strided (every other column,
      // transposed), and empty
      for (int which = 0; which < 3; ++which) {
        const Tensor base = source_values(d, 7 * 66, 41).view({7, 66});
        Tensor cpu_base = base.clone(), gpu_base = gpu_copy(base);
        auto view = [which](const Tensor& b) {
          if (which == 0) return b;
          if (which == 1) return b.slice(1, 1, 66, 2).transpose(0, 1);
          return b.slice(0, 3, 3);
        };
        CMHA_KERNEL(Device::cpu(), copy.fill)(view(cpu_base), v);
        CMHA_KERNEL(Device::cuda(0), copy.fill)(view(gpu_base), v);
        EXPECT_TRUE(same_as_cpu(gpu_base, cpu_base)) << dtype_name(d) << " = " << v << ", view " << which;
      }
    }
}

PARITY_TEST(IotaEveryDType, "copy.iota") {
  // 70001 passes f16's largest value (65504; 65520 on round to inf) with its
  // spacing of 32 there; 300007 rounds in bf16 (spacing 2048 there).
  for (DType d : kEveryDType)
    for (int64_t n : {0, 1, 7, 33, 1003, 70001, 300007}) {
      Tensor cpu = Tensor::empty({n}, d), gpu = Tensor::empty({n}, d, Device::cuda(0));
      CMHA_KERNEL(Device::cpu(), copy.iota)(cpu);
      CMHA_KERNEL(Device::cuda(0), copy.iota)(gpu);
      EXPECT_TRUE(same_as_cpu(gpu, cpu)) << dtype_name(d) << ", n = " << n;
    }
}

PARITY_TEST(TransferRoundTripsBytes, "copy.transfer") {
  // Arbitrary bytes (NaN payloads, non-canonical values) there and back.
  std::mt19937_64 bytes(51);
  for (DType d : kEveryDType)
    for (int64_t n : {0, 1, 7, 1003, 1 << 20}) {
      Tensor host = Tensor::empty({n}, d);
      auto* p = static_cast<unsigned char*>(host.raw_data());
      for (size_t i = 0; i < host.nbytes(); ++i) p[i] = d == DType::b8 ? bytes() % 2 : static_cast<unsigned char>(bytes());
      Tensor device = Tensor::empty({n}, d, Device::cuda(0));
      CMHA_KERNEL(Device::cuda(0), copy.transfer)(device, host);
      Tensor back = Tensor::empty({n}, d);
      CMHA_KERNEL(Device::cuda(0), copy.transfer)(back, device);
      EXPECT_TRUE(same_as_cpu(back, host)) << dtype_name(d) << ", n = " << n;
      // A device-side copy in between, read back by Tensor::to.
      Tensor twice = Tensor::empty({n}, d, Device::cuda(0));
      twice.copy_(device);
      EXPECT_TRUE(same_as_cpu(twice.to(Device::cpu()), host)) << dtype_name(d) << ", n = " << n;
    }
  // Host to host is not a transfer.
  const Tensor a = Tensor::zeros({3}), b = Tensor::zeros({3});
  EXPECT_THROW(CMHA_KERNEL(Device::cuda(0), copy.transfer)(a, b), Error);
}
