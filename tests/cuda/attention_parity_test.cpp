// GPU parity of the attention entries (backend/attention.h): collaborative
// queries forward (bit for bit: one f32 product per element on both sides)
// and backward with dq, dmixing or both wanted, over shapes with one row,
// a ragged last 64-row chunk, and the WMT (H 8, D̃k 128) and DeiT-B3 (H 12,
// D̃k 192) widths.
//
// Tolerance of the backward: both sides sum in the same order (heads in
// order for dq; 64-row chunks, then the chunks in order, for dmixing), but
// the CPU's vectorised loop may contract a product and a sum into one fused
// multiply-add where the GPU's does too, or not: a few ulp per element,
// 1e-12 normalised.
#include <gtest/gtest.h>

#include <string>

#include "backend/kernels.h"
#include "cuda/parity.h"

using namespace cmha;
using namespace cmha::test;

namespace {

struct AttentionCase {
  int64_t N, Tq, Dk, H;
};

std::string describe(const AttentionCase& c) {
  return "N " + std::to_string(c.N) + " Tq " + std::to_string(c.Tq) + " D~k " + std::to_string(c.Dk) + " H " +
         std::to_string(c.H);
}

const AttentionCase kAttentionCases[] = {{1, 1, 8, 1}, {2, 5, 6, 3}, {3, 43, 16, 4}, {64, 31, 128, 8}, {8, 197, 192, 12}, {0, 4, 8, 2}};

}  // namespace

PARITY_TEST(CollaborativeQueriesMatchTheCpu, "attention.collaborative_queries",
            "attention.collaborative_queries_backward") {
  uint64_t seed = 300;
  for (const AttentionCase& c : kAttentionCases) {
    const float scale = 0.17f;
    const Tensor q = random_of({c.N, c.Tq, c.Dk}, DType::f32, ++seed);
    const Tensor m = random_of({c.H, c.Dk}, DType::f32, ++seed);
    const Tensor g = random_of({c.N, c.H, c.Tq, c.Dk + c.H}, DType::f32, ++seed);
    Tensor out_cpu = Tensor::empty({c.N, c.H, c.Tq, c.Dk + c.H});
    CMHA_KERNEL(Device::cpu(), attention.collaborative_queries)(q, m, out_cpu, scale);
    // Prefilled with NaN: an element the kernel skips cannot pass.
    Tensor out_gpu = Tensor::full({c.N, c.H, c.Tq, c.Dk + c.H}, NAN, DType::f32, gpu());
    CMHA_KERNEL(gpu(), attention.collaborative_queries)(on_gpu(q), on_gpu(m), out_gpu, scale);
    EXPECT_TRUE(same_as_cpu(out_gpu, out_cpu)) << describe(c);

    for (int wanted = 1; wanted <= 3; ++wanted) {
      const bool want_dq = wanted & 1, want_dm = wanted & 2;
      Tensor dq_cpu = want_dq ? Tensor::empty(q.shape()) : Tensor();
      Tensor dm_cpu = want_dm ? Tensor::empty(m.shape()) : Tensor();
      CMHA_KERNEL(Device::cpu(), attention.collaborative_queries_backward)(q, m, g, dq_cpu, dm_cpu, scale);
      Tensor dq_gpu = want_dq ? Tensor::full(q.shape(), NAN, DType::f32, gpu()) : Tensor();
      Tensor dm_gpu = want_dm ? Tensor::full(m.shape(), NAN, DType::f32, gpu()) : Tensor();
      CMHA_KERNEL(gpu(), attention.collaborative_queries_backward)(on_gpu(q), on_gpu(m), on_gpu(g), dq_gpu, dm_gpu,
                                                                   scale);
      if (want_dq) EXPECT_TRUE(close_to_cpu(dq_gpu, dq_cpu, 1e-12)) << describe(c) << " dq";
      if (want_dm) EXPECT_TRUE(close_to_cpu(dm_gpu, dm_cpu, 1e-12)) << describe(c) << " dmixing";
    }
  }
}
