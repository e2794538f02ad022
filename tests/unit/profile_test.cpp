// The kernel profile (backend/profile.h): off, nothing is recorded; on, each
// kernel call is counted under its entry and phase, GEMMs with their flops.
#include "backend/profile.h"

#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "support/check.h"

using namespace cmha;

namespace {

const backend::ProfileRow* find_row(const std::vector<backend::ProfileRow>& rows, const std::string& entry,
                                    const std::string& phase) {
  for (const auto& r : rows)
    if (r.entry == entry && r.phase == phase) return &r;
  return nullptr;
}

struct ProfilingOn {
  ProfilingOn() {
    backend::reset_profile();
    backend::set_profiling(true);
  }
  ~ProfilingOn() {
    backend::set_profiling(false);
    backend::reset_profile();
  }
};

}  // namespace

TEST(KernelProfile, OffRecordsNothing) {
  backend::reset_profile();
  Tensor a = test::random_tensor({8, 16}, 1), b = test::random_tensor({16, 4}, 2);
  (void)matmul(a, b);
  EXPECT_TRUE(backend::profile_rows().empty());
}

TEST(KernelProfile, CountsCallsPhasesAndGemmFlops) {
  ProfilingOn on;
  Tensor a = test::random_tensor({8, 16}, 1), b = test::random_tensor({16, 4}, 2);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor c = matmul(a, b);  // [8, 4]: 2·8·4·16 flops
  sum(c).backward();
  const auto rows = backend::profile_rows();
  const backend::ProfileRow* fwd = find_row(rows, "matmul.matmul", "forward");
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->calls, 1);
  EXPECT_DOUBLE_EQ(fwd->flops, 2.0 * 8 * 4 * 16);
  EXPECT_GE(fwd->seconds, 0.0);
  const backend::ProfileRow* bwd = find_row(rows, "matmul.matmul", "backward");
  ASSERT_NE(bwd, nullptr);
  EXPECT_EQ(bwd->calls, 2);  // dA = dC·Bᵀ and dB = Aᵀ·dC
  EXPECT_DOUBLE_EQ(bwd->flops, 2 * 2.0 * 8 * 4 * 16);
  {
    backend::ProfilePhase phase("optimizer");
    Tensor z = Tensor::zeros({3});
    z.fill_(1.0f);
  }
  const auto after = backend::profile_rows();
  const backend::ProfileRow* fill = find_row(after, "copy.fill", "optimizer");
  ASSERT_NE(fill, nullptr);
  EXPECT_GE(fill->calls, 1);
}

TEST(KernelProfile, TableNamesEveryRowAndTheRest) {
  std::vector<backend::ProfileRow> rows = {{"matmul.matmul", "forward", 40, 0.5, 5e10},
                                           {"softmax.forward", "forward", 8, 0.1, 0},
                                           {"copy.copy", "backward", 20, 0.05, 0}};
  const std::string t = backend::profile_table(rows, 1.0, 10, 2);
  EXPECT_NE(t.find("matmul.matmul"), std::string::npos) << t;
  EXPECT_NE(t.find("100.0"), std::string::npos) << t;  // 5e10 flops in 0.5 s = 100 GFLOP/s
  EXPECT_NE(t.find("50.0%"), std::string::npos) << t;  // 0.5 s of a 1 s wall
  EXPECT_NE(t.find("(other kernels)"), std::string::npos) << t;  // copy.copy beyond max_rows
  EXPECT_EQ(t.find("copy.copy"), std::string::npos) << t;
  EXPECT_NE(t.find("outside kernels"), std::string::npos) << t;
  EXPECT_NE(t.find("step: 100.00 ms (10 steps)"), std::string::npos) << t;
}
