// The static resources of every CUDA kernel, as ptxas reports them when it
// compiles for each architecture (nvcc --resource-usage; the report of each
// object is kept beside it by cmake/keep_ptxas_report.sh): no kernel spills
// registers to local memory, none uses more than 128 registers (a 512-thread
// block would not fit an SM's 64 K registers), and a kernel whose code assumes
// its block size (shared scratch, __syncthreads, block reductions) says so with
// __launch_bounds__, so that ptxas budgets its registers for that block and a
// launch with more threads fails loudly. These hold without a GPU: ptxas runs
// at build time.
#include <gtest/gtest.h>

#include <cxxabi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include "support/source_paths.h"

namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct KernelResources {
  std::string file, kernel, arch;
  int registers = -1;
  long stack = -1, spill_stores = -1, spill_loads = -1;
};

std::string demangled(const std::string& name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  return out;
}

// One ptxas report: an entry per (kernel, architecture).
std::vector<KernelResources> parse_report(const fs::path& p) {
  static const std::regex entry(R"(Compiling entry function '([^']+)' for '(sm_[0-9a-z]+)')");
  static const std::regex frame(R"(([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads)");
  static const std::regex used(R"(Used ([0-9]+) registers)");
  std::vector<KernelResources> out;
  std::istringstream in(read_text(p));
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, entry)) {
      out.push_back({p.filename().string(), demangled(m[1]), m[2]});
    } else if (!out.empty() && std::regex_search(line, m, frame)) {
      out.back().stack = std::stol(m[1]);
      out.back().spill_stores = std::stol(m[2]);
      out.back().spill_loads = std::stol(m[3]);
    } else if (!out.empty() && std::regex_search(line, m, used)) {
      out.back().registers = std::stoi(m[1]);
    }
  }
  return out;
}

// The kernels of a source: each __global__ declaration with the body that follows it.
struct KernelSource {
  std::string declaration, body;
};
std::vector<KernelSource> kernels_in(const std::string& text) {
  std::vector<KernelSource> out;
  for (size_t at = text.find("__global__"); at != std::string::npos; at = text.find("__global__", at + 1)) {
    const size_t open = text.find_first_of("{;", at);
    if (open == std::string::npos || text[open] == ';') continue;  // a declaration without a body
    int depth = 0;
    size_t close = open;
    for (; close < text.size(); ++close) {
      if (text[close] == '{') ++depth;
      if (text[close] == '}' && --depth == 0) break;
    }
    out.push_back({text.substr(at, open - at), text.substr(open, close - open + 1)});
  }
  return out;
}

#ifdef CMHA_WITH_CUDA
const fs::path kCudaSources = fs::path(CMHA_SOURCE_DIR) / "framework" / "backend" / "cuda";
#endif

TEST(KernelResources, EveryKernelFileHasAReportForEveryArchitecture) {
#ifndef CMHA_WITH_CUDA
  GTEST_SKIP() << "built without CUDA (no nvcc here): no kernel was compiled, so ptxas reported nothing";
#else
  std::map<std::string, std::set<std::string>> archs_by_file;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(CMHA_BINARY_DIR) / "framework")) {
    const std::string name = e.path().filename().string();
    if (name.size() < 11 || name.substr(name.size() - 11) != ".cu.o.ptxas") continue;
    const std::string source = name.substr(0, name.size() - 8);  // "softmax.cu" of "softmax.cu.o.ptxas"
    archs_by_file[source];
    for (const KernelResources& k : parse_report(e.path())) archs_by_file[source].insert(k.arch);
  }
  // The configured architectures ("80-real,90" by default: CMAKE_CUDA_ARCHITECTURES with commas) as ptxas names them.
  std::set<std::string> all_archs;
  const std::string configured = CMHA_CUDA_ARCHITECTURES;
  static const std::regex number("[0-9]+");
  for (auto it = std::sregex_iterator(configured.begin(), configured.end(), number); it != std::sregex_iterator(); ++it)
    all_archs.insert("sm_" + it->str());
  ASSERT_FALSE(all_archs.empty()) << "CMAKE_CUDA_ARCHITECTURES '" << configured << "' names no architecture";
  for (const auto& e : fs::directory_iterator(kCudaSources)) {
    if (e.path().extension() != ".cu" || kernels_in(read_text(e.path())).empty()) continue;
    const std::string name = e.path().filename().string();
    ASSERT_TRUE(archs_by_file.count(name))
        << name << " has kernels but no ptxas report: is cmake/keep_ptxas_report.sh the CUDA launcher?";
    EXPECT_EQ(archs_by_file[name], all_archs)
        << name << " was not compiled for every architecture of CMAKE_CUDA_ARCHITECTURES '" << configured << "'";
  }
#endif
}

TEST(KernelResources, NoSpillsAndAtMost128Registers) {
#ifndef CMHA_WITH_CUDA
  GTEST_SKIP() << "built without CUDA (no nvcc here): no kernel was compiled, so ptxas reported nothing";
#else
  int kernels = 0;
  std::string table;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(CMHA_BINARY_DIR) / "framework")) {
    if (e.path().extension() != ".ptxas") continue;
    for (const KernelResources& k : parse_report(e.path())) {
      ++kernels;
      SCOPED_TRACE(k.file + ": " + k.kernel + " for " + k.arch);
      ASSERT_GE(k.registers, 0) << "ptxas gave no register count";
      ASSERT_GE(k.stack, 0) << "ptxas gave no stack frame";
      EXPECT_EQ(k.spill_stores, 0);
      EXPECT_EQ(k.spill_loads, 0);
      EXPECT_LE(k.registers, 128);
      table += "  " + k.arch + " " + std::to_string(k.registers) + " registers, " + std::to_string(k.stack) +
               " B stack: " + k.kernel.substr(0, 100) + "\n";
    }
  }
  EXPECT_GT(kernels, 50) << "fewer kernel reports than the backend has kernels";
  std::printf("%d kernel compilations:\n%s", kernels, table.c_str());
#endif
}

TEST(KernelResources, KernelsThatAssumeTheirBlockSizeDeclareIt) {
#ifndef CMHA_WITH_CUDA
  GTEST_SKIP() << "built without CUDA: the CUDA sources are not part of this build";
#else
  // Shared scratch, barriers and block-wide reductions size themselves by the block.
  static const std::regex assumes_block(R"(__shared__|__syncthreads|block_sum|block_max|RowGroup<)");
  int checked = 0;
  for (const auto& e : fs::directory_iterator(kCudaSources)) {
    if (e.path().extension() != ".cu" && e.path().extension() != ".cuh") continue;
    for (const KernelSource& k : kernels_in(read_text(e.path()))) {
      if (!std::regex_search(k.body, assumes_block)) continue;
      ++checked;
      EXPECT_NE(k.declaration.find("__launch_bounds__"), std::string::npos)
          << e.path().filename().string() << ": " << k.declaration
          << "... assumes its block size but has no __launch_bounds__";
    }
  }
  EXPECT_GT(checked, 5);
#endif
}

TEST(KernelResources, TheSourceScannerFindsKernelsAndTheirBodies) {
  const auto k = kernels_in(
      "__global__ void a(int* x) { if (x) { x[0] = 1; } }\n"
      "template <int N> __global__ void __launch_bounds__(N) b(float* y) { __shared__ float s[32]; }\n"
      "__global__ void declared_only(int*);\n");
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].body, "{ if (x) { x[0] = 1; } }");
  EXPECT_NE(k[1].declaration.find("__launch_bounds__(N)"), std::string::npos);
  EXPECT_NE(k[1].body.find("__shared__"), std::string::npos);
}

TEST(KernelResources, TheReportParserReadsPtxasLines) {
  const fs::path p = fs::temp_directory_path() / ("cmha_ptxas_" + std::to_string(::getpid()) + ".ptxas");
  std::ofstream(p) << "ptxas info    : Compiling entry function '_Z1kPfi' for 'sm_90'\n"
                      "ptxas info    : Function properties for _Z1kPfi\n"
                      "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
                      "ptxas info    : Used 40 registers, used 0 barriers\n";
  const auto r = parse_report(p);
  fs::remove(p);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].kernel, "k(float*, int)");
  EXPECT_EQ(r[0].arch, "sm_90");
  EXPECT_EQ(r[0].registers, 40);
  EXPECT_EQ(r[0].stack, 8);
  EXPECT_EQ(r[0].spill_stores, 4);
  EXPECT_EQ(r[0].spill_loads, 4);
}

}  // namespace
