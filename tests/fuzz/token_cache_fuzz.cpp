// The tokenised corpus cache (data::TokenCache, memory-mapped) on arbitrary
// bytes: a file that opens must let every sentence be read inside the file.
#include <cstdint>
#include <cstdlib>

#include "data/token_cache.h"
#include "fuzz_scratch.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = cmha::fuzz::write_scratch("input.src.bin", data, size);
  uint64_t key = 0;
  (void)cmha::data::TokenCache::read_key(path, &key);
  try {
    const cmha::data::TokenCache c(path);
    int64_t ids = 0;
    for (int64_t i = 0; i < c.size(); ++i) {
      // Sentence i must lie inside the ids: ASan does not watch mapped memory.
      const int64_t n = c.length(i), at = c.ids(i) - c.ids(0);
      if (n < 0 || at < 0 || at + n > c.total_ids()) std::abort();
      ids += n;
      (void)cmha::fuzz::touch(c.ids(i), static_cast<size_t>(n) * sizeof(int32_t));
    }
    if (ids != c.total_ids()) std::abort();
  } catch (const cmha::Error&) {
  }
  return 0;
}
