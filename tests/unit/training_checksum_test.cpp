// Fixed-seed 50-update training runs (the local translation recipe on the toy
// corpus, and the local Fashion-MNIST ViT on tiny images) must leave
// byte-identical checkpoints from one version of cmha to the next, unless a
// change means to alter the numbers (then re-record and say why). The
// reference hashes live in tests/data/training_checksums.tsv, one line per
// run and per machine signature: oneDNN's kernels and -march=native differ
// between CPU models, so the bytes are only comparable on the same kind of
// CPU with the same compiler. On a machine with no recorded line the test
// says so and skips; record with CMHA_RECORD_CHECKSUMS=1 (it prints the lines
// to add), on the code *before* the change being checked.
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "support/check.h"
#include "support/checkpoint_hash.h"
#include "support/files.h"
#include "support/tiny_images.h"
#include "support/toy_translation.h"
#include "tensor/safetensors.h"
#include "support/source_paths.h"

namespace cmha {
namespace {

// Optimisation and sanitizers change the arithmetic the compiler emits (FMA
// contraction, vectorised reductions): a Debug or sanitizer build has its own bytes.
const char* build_flavour() {
#if defined(__SANITIZE_ADDRESS__)
  return " | sanitized";
#elif !defined(__OPTIMIZE__)
  return " | unoptimised";
#else
  return "";
#endif
}

// The CPU model and its cache sizes (oneDNN blocks its GEMMs by them),
// oneDNN's instruction set and the compiler: what the bytes of a run depend on.
std::string machine_signature() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown-cpu";
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  const auto kib = [](int name) { return std::to_string(sysconf(name) / 1024) + "K"; };
  return model + " | L1d " + kib(_SC_LEVEL1_DCACHE_SIZE) + " L2 " + kib(_SC_LEVEL2_CACHE_SIZE) + " L3 " +
         kib(_SC_LEVEL3_CACHE_SIZE) + " | dnnl-isa " + std::to_string(static_cast<int>(dnnl_get_effective_cpu_isa())) +
         " | " + __VERSION__ + build_flavour();
}

std::string recorded_hash(const std::string& run) {
  std::ifstream in(std::string(CMHA_SOURCE_DIR) + "/tests/data/training_checksums.tsv");
  const std::string prefix = machine_signature() + "\t" + run + "\t";
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  return "";
}

std::string text_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  std::ostringstream s;
  s << "text:" << std::hex << h;
  return s.str();
}

// `what` is a checkpoint path, or a hash already made by text_hash.
void expect_recorded(const std::string& run, const std::string& what) {
  const std::string actual = what.rfind("text:", 0) == 0 ? what : test::checkpoint_hash(what);
  if (std::getenv("CMHA_RECORD_CHECKSUMS")) {
    std::cout << "add to tests/data/training_checksums.tsv:\n" << machine_signature() << "\t" << run << "\t" << actual
              << "\n";
    return;
  }
  const std::string expected = recorded_hash(run);
  if (expected.empty())
    GTEST_SKIP() << "no recorded checksum of '" << run << "' for this machine (" << machine_signature()
                 << "); the run gave " << actual << " (record with CMHA_RECORD_CHECKSUMS=1 on the code before a change)";
  EXPECT_EQ(actual, expected) << run << ": the checkpoint after 50 fixed-seed updates differs from the recorded one";
}

// Skips before training when nothing is recorded for this machine (a sanitized
// build would spend minutes on a run it cannot compare).
#define CMHA_SKIP_UNLESS_RECORDED(run)                                                                    \
  if (!std::getenv("CMHA_RECORD_CHECKSUMS") && recorded_hash(run).empty())                               \
  GTEST_SKIP() << "no recorded checksum of '" << (run) << "' for this machine (" << machine_signature() \
               << "); record with CMHA_RECORD_CHECKSUMS=1 on the code before a change"

// Both runs leave the head telemetry off: its metrics.jsonl rows change no
// weight, but the trainer state counts the rows (metrics_rows), so with it on
// every recorded hash would move (checked when it came: the same tensors, the
// count 3 -> 6 in the ViT run).
TEST(TrainingChecksum, LocalTranslationRecipeFiftyUpdates) {
  CMHA_SKIP_UNLESS_RECORDED("translation");
  const std::string dir = test::toy_dir("checksum");
  test::write_toy_corpus(dir + "/test", 20, 3);
  const auto r = test::run_cmha(
      "train " + std::string(CMHA_SOURCE_DIR) + "/recipes/local/en_de_transformer_small.yaml train.save_dir=" + dir +
      "/run data.train_prefix=" + dir + "/train data.valid_prefix=" + dir + "/valid data.test_prefix=" + dir +
      "/test model.vocab_size=100 data.max_tokens=512 data.spm_sample_sentences=1000 train.max_updates=50 "
      "train.save_every=25 train.validate_every=50 train.log_every=1000 lr.warmup=10 eval.valid_sentences=20 "
      "eval.average_last=2 train.head_telemetry=false");
  ASSERT_EQ(r.code, 0) << r.output;
  expect_recorded("translation", dir + "/run/checkpoint_50.safetensors");
  // What the rest of the run derives from it: the averaged model and the beam-search translations.
  expect_recorded("translation-average", dir + "/run/checkpoint_average.safetensors");
  const std::string hyp = test::read_file(dir + "/run/test.de.hyp");
  ASSERT_FALSE(hyp.empty());
  expect_recorded("translation-test-hyp", text_hash(hyp));
}

TEST(TrainingChecksum, FashionMnistVitFiftyUpdates) {
  CMHA_SKIP_UNLESS_RECORDED("vit");
  const std::string dir = test::temp_dir("checksum_vit");
  test::write_tiny_fashion_mnist(dir, 200, 40);
  const auto r = test::run_cmha("train " + test::tiny_run(dir, dir + "/run") +
                                " train.max_updates=50 train.max_epochs=0 train.log_every=1000 train.head_telemetry=false");
  ASSERT_EQ(r.code, 0) << r.output;
  expect_recorded("vit", dir + "/run/checkpoint_50.safetensors");
}

}  // namespace
}  // namespace cmha
