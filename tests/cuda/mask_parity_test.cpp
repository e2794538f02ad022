// GPU parity of the mask family: the causal attention mask, bit for bit.
#include "backend/kernels.h"
#include "cuda/parity.h"

using namespace cmha;
using namespace cmha::test;

PARITY_TEST(CausalMaskShapesAndOffsets, "mask.causal") {
  struct Case {
    int64_t Tq, Tk;
  };
  const Case shapes[] = {{0, 5}, {5, 0}, {1, 1}, {7, 7}, {7, 33}, {33, 7}, {1, 1003}, {1003, 1003}};
  for (const Case& s : shapes)
    for (int64_t key_offset : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{-2}, int64_t{40}, int64_t{-2000}}) {
      Tensor cpu = Tensor::empty({s.Tq, s.Tk}, DType::b8);
      CMHA_KERNEL(Device::cpu(), mask.causal)(cpu, key_offset);
      // Prefilled with all false, then all true: a kernel that skips an element cannot pass.
      for (double before : {0.0, 1.0}) {
        Tensor gpu = Tensor::full({s.Tq, s.Tk}, before, DType::b8, Device::cuda(0));
        CMHA_KERNEL(Device::cuda(0), mask.causal)(gpu, key_offset);
        EXPECT_TRUE(same_as_cpu(gpu, cpu)) << "[" << s.Tq << ", " << s.Tk << "], key_offset " << key_offset;
      }
    }
}
