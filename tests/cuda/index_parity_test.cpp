// GPU parity of the index family: the first out-of-range index, masked_fill
// with broadcast masks over strided inputs of every dtype, gather and its
// deterministic scatter-add backward. All exact.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "autograd/ops.h"
#include "backend/kernels.h"
#include "cuda/parity.h"

using namespace cmha;
using namespace cmha::test;

namespace {

Tensor values_of(DType dtype, const Shape& shape, uint64_t seed) {
  return dtype == DType::i32 || dtype == DType::i64 ? random_of(shape, dtype, seed, -1000.0, 1000.0)
                                                    : random_of(shape, dtype, seed, -4.0, 4.0);
}

}  // namespace

// ---- find_out_of_range ---------------------------------------------------------------

PARITY_TEST(FindOutOfRangeFindsTheFirst, "index.find_out_of_range") {
  struct Case {
    int64_t n, limit;
    std::vector<std::pair<int64_t, int64_t>> bad;  // (position, value) written into in-range data
  };
  const int64_t big = (int64_t{1} << 22) + 7;  // several grid-stride rounds of 65536·256
  const Case cases[] = {
      {0, 10, {}},
      {1, 10, {}},
      {1003, 1003, {}},
      {1, 10, {{0, 10}}},
      {7, 10, {{6, -1}}},
      {1003, 50, {{500, -3}, {700, 50}, {1002, std::numeric_limits<int64_t>::max()}}},
      {1003, 50, {{0, std::numeric_limits<int64_t>::min()}, {1, 51}}},
      {1003, 50, {{999, 50}, {31, 1000000}, {32, -7}}},  // the first in order, not the first written
      {big, 40000, {{big - 1, 40000}}},
      {big, 40000, {{big - 100, -1}, {big / 2, 40001}, {big - 3, 99999}}},
      {1003, 0, {}},  // every value is out of range for a limit of 0
  };
  for (const Case& c : cases) {
    Tensor idx = random_of({c.n}, DType::i64, 5 + c.n, 0.0, static_cast<double>(std::max<int64_t>(c.limit, 1)));
    for (const auto& [at, v] : c.bad) idx.data<int64_t>()[at] = v;
    // Each answer is written into an i64 [2] tensor on the kernel's device (poisoned on the GPU first).
    const auto found_on = [&](Device d, const Tensor& x) {
      Tensor found = Tensor::full({2}, 12345.0, DType::i64, d);
      CMHA_KERNEL(d, index.find_out_of_range)(x, c.limit, found);
      return backend::out_of_range_of(found.to(Device::cpu()).data<int64_t>());
    };
    const backend::OutOfRange cpu = found_on(Device::cpu(), idx);
    const backend::OutOfRange gpu = found_on(Device::cuda(0), gpu_copy(idx));
    EXPECT_EQ(gpu.position, cpu.position) << "n = " << c.n << ", limit " << c.limit;
    EXPECT_EQ(gpu.value, cpu.value) << "n = " << c.n << ", limit " << c.limit;
  }
}

// ---- masked_fill ---------------------------------------------------------------------

namespace {

::testing::AssertionResult masked_fill_matches(const Tensor& x_base, const View& vx, const Tensor& mask_base,
                                               const View& vm, double value) {
  const Tensor x = vx(x_base), mask = vm(mask_base);
  const Tensor gx = vx(gpu_copy(x_base)), gmask = vm(gpu_copy(mask_base));
  Tensor out = Tensor::empty(x.shape(), x.dtype()), gout = Tensor::empty(x.shape(), x.dtype(), Device::cuda(0));
  CMHA_KERNEL(Device::cpu(), index.masked_fill)(x, mask, out, value);
  CMHA_KERNEL(Device::cuda(0), index.masked_fill)(gx, gmask, gout, value);
  return same_as_cpu(gout, out);
}

}  // namespace

PARITY_TEST(MaskedFillBroadcastMasksEveryDType, "index.masked_fill") {
  struct Case {
    Shape x, mask;
  };
  const Case cases[] = {{{7, 33}, {7, 33}}, {{7, 33}, {33}},   {{7, 33}, {1, 33}},       {{7, 33}, {7, 1}},
                        {{7, 33}, {}},      {{1003}, {1003}},  {{2, 3, 4, 5}, {3, 1, 5}}, {{2, 3, 4, 5}, {4, 1}},
                        {{0, 33}, {33}},    {{1}, {1}},        {{}, {}}};
  for (DType d : kEveryDType)
    for (const Case& c : cases)
      for (double value : {-double(INFINITY), 0.0, 3.7, 1e10}) {
        const Tensor x = values_of(d, c.x, 61), mask = random_of(c.mask, DType::b8, 62);
        EXPECT_TRUE(masked_fill_matches(x, kWhole, mask, kWhole, value))
            << dtype_name(d) << shape_str(c.x) << " with mask " << shape_str(c.mask) << ", value " << value;
      }
}

PARITY_TEST(MaskedFillStridedViews, "index.masked_fill") {
  const View transposed = [](const Tensor& t) { return t.transpose(0, 1); };   // [33, 7] -> [7, 33]
  const View every_third = [](const Tensor& t) { return t.slice(1, 2, 99, 3); };  // [7, 99] -> [7, 33]
  const View expanded = [](const Tensor& t) { return t.expand({7, 33}); };       // [1, 33] -> [7, 33]
  for (DType d : kEveryDType) {
    const std::string what = dtype_name(d);
    EXPECT_TRUE(masked_fill_matches(values_of(d, {33, 7}, 71), transposed, random_of({7, 99}, DType::b8, 72),
                                    every_third, -1e9))
        << what;
    EXPECT_TRUE(masked_fill_matches(values_of(d, {7, 99}, 73), every_third, random_of({33, 7}, DType::b8, 74),
                                    transposed, 2.5))
        << what;
    EXPECT_TRUE(masked_fill_matches(values_of(d, {1, 33}, 75), expanded, random_of({7, 1}, DType::b8, 76),
                                    kWhole, -INFINITY))
        << what << ", expanded x";
    // x [2, 3, 4, 5] permuted to [5, 3, 2, 4]; mask [4, 1, 6] permuted and
    // sliced with step 2 to [3, 1, 4]
    EXPECT_TRUE(masked_fill_matches(values_of(d, {2, 3, 4, 5}, 77),
                                    [](const Tensor& t) { return t.permute({3, 1, 0, 2}); },
                                    random_of({4, 1, 6}, DType::b8, 78),
                                    [](const Tensor& t) { return t.permute({2, 1, 0}).slice(0, 0, 6, 2); }, 1.0))
        << what << ", permuted";
  }
}

PARITY_TEST(MaskedFillOpWithBackward, "index.masked_fill") {
  // The attention pattern: scores [B, H, Tq, Tk], padding mask [B, 1, 1, Tk].
  const Tensor scores = random_of({2, 3, 5, 7}, DType::f32, 81), pad = random_of({2, 1, 1, 7}, DType::b8, 82);
  const Tensor g = random_of({2, 3, 5, 7}, DType::f32, 83);
  auto run = [&](Device device) {
    auto on = [&](const Tensor& t) { return device.is_cpu() ? t.clone() : gpu_copy(t); };
    Tensor x = on(scores).set_requires_grad(true);
    Tensor y = masked_fill(x, on(pad), -INFINITY);
    y.backward(on(g));
    return std::vector<Tensor>{y, x.grad()};
  };
  const std::vector<Tensor> cpu = run(Device::cpu()), gpu = run(Device::cuda(0));
  EXPECT_TRUE(same_as_cpu(gpu[0], cpu[0]));
  EXPECT_TRUE(same_as_cpu(gpu[1], cpu[1]));
}

// ---- gather and its backward ---------------------------------------------------------

namespace {

struct GatherCase {
  Shape x, index;
  int64_t dim;
};
// x [5, 7, 9] along each dim, the index no larger elsewhere; long lines with
// many repeats (each x position gathered several times); empty.
const GatherCase kGatherCases[] = {
    {{5, 7, 9}, {5, 7, 9}, 0},  {{5, 7, 9}, {11, 7, 9}, 0}, {{5, 7, 9}, {3, 7, 4}, 1}, {{5, 7, 9}, {5, 2, 33}, 2},
    {{5, 7, 9}, {2, 3, 1}, 2},  {{3}, {1003}, 0},           {{1003}, {7}, 0},          {{33, 4}, {33, 1}, 1},
    {{7, 33}, {0, 33}, 0},      {{7, 33}, {7, 0}, 1},       {{1, 1}, {1, 1}, 1},
};

Tensor index_for(const GatherCase& c, uint64_t seed) {
  return random_of(c.index, DType::i64, seed, 0.0, static_cast<double>(c.x[c.dim]));
}

::testing::AssertionResult gather_matches(const Tensor& x_base, const View& vx, const Tensor& index_base,
                                          const View& vi, int64_t dim) {
  const Tensor x = vx(x_base), index = vi(index_base);
  const Tensor gx = vx(gpu_copy(x_base)), gindex = vi(gpu_copy(index_base));
  Tensor out = Tensor::empty(index.shape(), x.dtype()), gout = Tensor::empty(index.shape(), x.dtype(), Device::cuda(0));
  CMHA_KERNEL(Device::cpu(), index.gather)(x, index, out, dim);
  CMHA_KERNEL(Device::cuda(0), index.gather)(gx, gindex, gout, dim);
  return same_as_cpu(gout, out);
}

// grad_x = scatter-add of grad into zeros of x's shape. Each line is summed
// in index order on both devices, with the same f32 additions: the CPU's bits.
::testing::AssertionResult gather_backward_matches(const Shape& x_shape, const Tensor& grad_base, const View& vg,
                                                   const Tensor& index_base, const View& vi, int64_t dim) {
  const Tensor grad = vg(grad_base), index = vi(index_base);
  const Tensor ggrad = vg(gpu_copy(grad_base)), gindex = vi(gpu_copy(index_base));
  Tensor cpu = Tensor::zeros(x_shape), gpu = Tensor::zeros(x_shape, DType::f32, Device::cuda(0));
  CMHA_KERNEL(Device::cpu(), index.gather_backward)(grad, index, cpu, dim);
  CMHA_KERNEL(Device::cuda(0), index.gather_backward)(ggrad, gindex, gpu, dim);
  return same_as_cpu(gpu, cpu);
}

}  // namespace

PARITY_TEST(GatherEveryDTypeAndDim, "index.gather") {
  for (DType d : kEveryDType)
    for (const GatherCase& c : kGatherCases)
      EXPECT_TRUE(gather_matches(values_of(d, c.x, 91), kWhole, index_for(c, 92), kWhole, c.dim))
          << dtype_name(d) << shape_str(c.x) << " by " << shape_str(c.index) << " along " << c.dim;
}

PARITY_TEST(GatherStridedAndExpandedViews, "index.gather") {
  for (DType d : kEveryDType) {
    // x [9, 5, 7] permuted to [5, 7, 9]; index [9, 4, 5] transposed to [5, 4, 9]
    const Tensor x = values_of(d, {9, 5, 7}, 101);
    const View x_view = [](const Tensor& t) { return t.permute({1, 2, 0}); };
    const Tensor index = index_for({{5, 7, 9}, {9, 4, 5}, 1}, 102);  // values in [0, 7)
    const View index_view = [](const Tensor& t) { return t.transpose(0, 2); };
    EXPECT_TRUE(gather_matches(x, x_view, index, index_view, 1)) << dtype_name(d) << ", permuted x, transposed index";
    // every other row of x, an index expanded along a dim of size 1
    const Tensor x2 = values_of(d, {14, 33}, 103);
    const Tensor row = random_of({1, 33}, DType::i64, 104, 0.0, 7.0);
    EXPECT_TRUE(gather_matches(x2, [](const Tensor& t) { return t.slice(0, 1, 14, 2); }, row,
                               [](const Tensor& t) { return t.expand({5, 33}); }, 0))
        << dtype_name(d) << ", sliced x, expanded index";
  }
}

PARITY_TEST(GatherBackwardRepeatsInOrder, "index.gather_backward") {
  for (const GatherCase& c : kGatherCases)
    EXPECT_TRUE(gather_backward_matches(c.x, random_of(c.index, DType::f32, 111), kWhole, index_for(c, 112), kWhole,
                                        c.dim))
        << shape_str(c.x) << " by " << shape_str(c.index) << " along " << c.dim;
  // Long lines into a few slots: the order of thousands of f32 additions
  // shows in the bits. Values of mixed magnitude make every order differ.
  Tensor grad = random_of({3, 5003}, DType::f32, 113, -1.0, 1.0);
  for (int64_t i = 0; i < grad.numel(); i += 7) grad.data<float>()[i] *= 1e6f;
  EXPECT_TRUE(gather_backward_matches({3, 4}, grad, kWhole, random_of({3, 5003}, DType::i64, 114, 0.0, 4.0), kWhole, 1));
  // Strided grad (transposed) and expanded index.
  EXPECT_TRUE(gather_backward_matches({5, 7, 9}, random_of({9, 4, 5}, DType::f32, 115),
                                      [](const Tensor& t) { return t.transpose(0, 2); },
                                      random_of({5, 4, 1}, DType::i64, 116, 0.0, 7.0),
                                      [](const Tensor& t) { return t.expand({5, 4, 9}); }, 1));
}

PARITY_TEST(GatherOpWithBackward, "index.gather", "index.gather_backward", "index.find_out_of_range") {
  // The op converts an i32 index, range-checks it, gathers, and scatters the
  // gradient back (in f32, then x's dtype).
  const Tensor x = random_of({6, 11}, DType::f32, 121), g = random_of({6, 40}, DType::f32, 122);
  const Tensor index = random_of({6, 40}, DType::i32, 123, 0.0, 11.0);
  auto run = [&](Device device) {
    auto on = [&](const Tensor& t) { return device.is_cpu() ? t.clone() : gpu_copy(t); };
    Tensor leaf = on(x).set_requires_grad(true);
    Tensor y = gather(leaf, 1, on(index));
    y.backward(on(g));
    return std::vector<Tensor>{y, leaf.grad()};
  };
  const std::vector<Tensor> cpu = run(Device::cpu()), gpu = run(Device::cuda(0));
  EXPECT_TRUE(same_as_cpu(gpu[0], cpu[0]));
  EXPECT_TRUE(same_as_cpu(gpu[1], cpu[1]));
  // An index out of range is reported with the CPU's message.
  Tensor bad = index.clone();
  bad.data<int32_t>()[77] = 11;
  std::string cpu_msg, gpu_msg;
  try {
    gather(x, 1, bad);
  } catch (const Error& e) {
    cpu_msg = e.what();
  }
  try {
    gather(gpu_copy(x), 1, gpu_copy(bad));
  } catch (const Error& e) {
    gpu_msg = e.what();
  }
  EXPECT_FALSE(cpu_msg.empty());
  EXPECT_EQ(gpu_msg.substr(0, gpu_msg.find(" of x ")), cpu_msg.substr(0, cpu_msg.find(" of x ")));
}
