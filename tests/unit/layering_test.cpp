// The layers of framework/: a folder includes only its own headers and those
// of the folders below it. Bottom to top (README.md, "Layout"):
//
//   tensor       Tensor, Storage and the allocators under it, dtype, device, RNG, safetensors, atomic files
//   backend      the kernel table; cpu/ and cuda/ fill it (reached only through backend/kernels.h)
//   autograd     differentiable ops and the tape (checks, geometry, allocation, record; no loops)
//   nn           modules: linear, norms, the attention family, transformer, ViT
//   optim        the Optimizer interface, Adam/AdamW/SGD, schedules, clipping, EMA
//   distributed  the Communicator: single, MPI, Gloo, NCCL; launch detection
//   data         corpora, vocabularies, batches, images, loaders
//   run          what a run is on disk and in YAML: recipes and the option registry, model
//                configuration, checkpoints, run directories, results, averaging, metrics, TensorBoard,
//                device selection
//   interop      timm / Hugging Face / fairseq import and export
//   eval         beam search, the translator, BLEU/chrF/TER, accuracy, head importance
//   compress     CP-ALS, collaborative re-parametrisation, head redundancy: post hoc, on checkpoints
//   train        the trainer loop, tasks and their factory, gradient buckets, progress, bench
//   study        what runs many trainings: sweeps over a grid and seeds, compression with fine-tuning
//   cli          the cmha command: parses, calls one library function, prints
//
// A header's place is its first path component. Tensor's header sits at the
// bottom so kernels can take Tensors; the Tensor methods that compute or
// record are defined in backend/ and autograd/ (see tensor/tensor.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>
#include "support/source_paths.h"

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kLayers = {"tensor", "backend", "autograd", "nn",       "optim", "distributed", "data",
                                          "run",    "interop", "eval",     "compress", "train", "study",
                                          "cli"};

int layer_of(const std::string& folder) {
  for (size_t i = 0; i < kLayers.size(); ++i)
    if (kLayers[i] == folder) return static_cast<int>(i);
  return -1;
}

struct Include {
  std::string file;    // relative to framework/
  int line;
  std::string target;  // as written in the #include
};

std::vector<Include> framework_includes() {
  const fs::path root = fs::path(CMHA_SOURCE_DIR) / "framework";
  const std::regex include_re(R"(^\s*#\s*include\s*"([^"]+)\")");
  std::vector<Include> out;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh")) continue;
    std::ifstream in(entry.path());
    std::string text;
    int n = 0;
    while (std::getline(in, text)) {
      ++n;
      std::smatch m;
      if (std::regex_search(text, m, include_re))
        out.push_back({fs::relative(entry.path(), root).string(), n, m[1].str()});
    }
  }
  return out;
}

std::string first_component(const std::string& path) { return path.substr(0, path.find('/')); }

TEST(Layering, EveryFolderIsALayer) {
  const fs::path root = fs::path(CMHA_SOURCE_DIR) / "framework";
  for (const auto& entry : fs::directory_iterator(root))
    if (entry.is_directory())
      EXPECT_GE(layer_of(entry.path().filename().string()), 0)
          << "framework/" << entry.path().filename().string()
          << "/ is in no layer: add it to kLayers in tests/unit/layering_test.cpp and to README.md's layout table";
}

TEST(Layering, NoIncludeRunsUpTheLayers) {
  const std::vector<Include> includes = framework_includes();
  ASSERT_GT(includes.size(), 100u) << "framework/ was not found under " << CMHA_SOURCE_DIR;
  std::string violations;
  for (const Include& inc : includes) {
    if (inc.target.find('/') == std::string::npos) continue;  // generated or system-style local headers
    const std::string from = first_component(inc.file), to = first_component(inc.target);
    const int lf = layer_of(from), lt = layer_of(to);
    if (lf < 0 || lt < 0) continue;  // reported by EveryFolderIsALayer / not a framework header
    if (lt > lf)
      violations += "framework/" + inc.file + ":" + std::to_string(inc.line) + " includes \"" + inc.target + "\": " +
                    from + "/ (layer " + std::to_string(lf) + ") may include only " + from +
                    "/ and the layers below it, and " + to + "/ is layer " + std::to_string(lt) + "\n";
  }
  EXPECT_TRUE(violations.empty()) << "includes that run up the layers:\n" << violations;
}

// Devices meet in the kernel table: code outside backend/ reaches a kernel
// through backend/kernels.h only, never a device's implementation.
TEST(Layering, DeviceImplementationsAreReachedOnlyThroughTheKernelTable) {
  std::string violations;
  for (const Include& inc : framework_includes()) {
    const bool device_header = inc.target.rfind("backend/cpu/", 0) == 0 || inc.target.rfind("backend/cuda/", 0) == 0;
    if (device_header && first_component(inc.file) != "backend")
      violations += "framework/" + inc.file + ":" + std::to_string(inc.line) + " includes \"" + inc.target + "\"\n";
  }
  EXPECT_TRUE(violations.empty()) << "code outside backend/ that includes a device's kernels (use backend/kernels.h):\n"
                                  << violations;
}

}  // namespace
