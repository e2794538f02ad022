// The safetensors reader and the checkpoint loader on arbitrary bytes, then
// what `cmha info` does next: the stored recipe parsed and resolved. Any
// defect must be one cmha::Error; a crash, sanitizer report, leak, timeout
// or allocation past libFuzzer's limit is a bug.
#include <cstdint>
#include <cstdlib>

#include "fuzz_scratch.h"
#include "run/checkpoint.h"
#include "run/recipe.h"
#include "tensor/error.h"
#include "tensor/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = cmha::fuzz::write_scratch("input.safetensors", data, size);
  try {
    const cmha::run::Checkpoint c = cmha::run::load_checkpoint(path);
    uint64_t sum = 0;
    for (const auto* group : {&c.weights, &c.optimizer, &c.ema})
      for (const auto& [name, t] : *group) {
        // Every tensor comes back contiguous on the CPU, its bytes inside the file.
        if (!t.is_contiguous() || t.nbytes() > size) std::abort();
        sum += cmha::fuzz::touch(t.raw_data(), t.nbytes());
      }
    (void)cmha::run::Recipe::parse(c.recipe, path + " (recipe)").dump();
    return static_cast<int>(sum & 0);
  } catch (const cmha::Error&) {
  }
  return 0;
}
