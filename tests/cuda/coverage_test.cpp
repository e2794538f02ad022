// Runs on every machine, GPU or not: the parity suite names every entry of
// the kernel table, and in a CUDA build the CUDA table fills every entry the
// CPU table fills (so `train.device=cuda` can reach no missing kernel).
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/kernels.h"
#include "cuda/parity.h"
#ifdef CMHA_WITH_CUDA
#include "backend/cuda/kernel_table.h"
#endif

using namespace cmha;

TEST(CudaParityCoverage, EveryKernelTableEntryHasAParityTest) {
  const std::set<std::string>& covered = test::parity_entries();
  std::vector<std::string> missing, unknown;
  const std::vector<std::string> all = backend::kernel_entry_names();
  for (const std::string& e : all)
    if (!covered.count(e)) missing.push_back(e);
  for (const std::string& e : covered)
    if (std::find(all.begin(), all.end(), e) == all.end()) unknown.push_back(e);
  EXPECT_TRUE(missing.empty()) << "entries without a PARITY_TEST: " << ::testing::PrintToString(missing);
  EXPECT_TRUE(unknown.empty()) << "PARITY_TESTs name entries the table lacks: " << ::testing::PrintToString(unknown);
}

TEST(CudaParityCoverage, EntryListMatchesTheCpuTable) {
  // The CPU fills every entry but fused attention's runs (its fused_prepare
  // says the CPU takes the unfused path) and the host-device transfer.
  EXPECT_EQ(backend::empty_entries(backend::kernel_table(Device::cpu())),
            (std::vector<std::string>{"attention.fused_forward", "attention.fused_backward", "copy.transfer"}));
  EXPECT_EQ(backend::kernel_entry_names().size(), 56u);
}

#ifdef CMHA_WITH_CUDA
TEST(CudaParityCoverage, CudaTableFillsEveryEntry) {
  EXPECT_EQ(backend::empty_entries(cuda::kernel_table()), std::vector<std::string>{});
}
#endif
