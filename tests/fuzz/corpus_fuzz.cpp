// The corpus line readers on arbitrary bytes: the translation corpus's
// (data::read_text_lines, UTF-8 checked line by line), a parallel corpus of
// the input and its reverse, and BLEU's hypothesis/reference reader
// (eval::read_segments). Lines that load must be valid UTF-8 without '\n'.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "data/text_corpus.h"
#include "eval/bleu.h"
#include "fuzz_scratch.h"
#include "tensor/error.h"

namespace {

void check_lines(const std::vector<std::string>& lines) {
  for (const std::string& l : lines)
    if (!cmha::data::is_valid_utf8(l) || l.find('\n') != std::string::npos) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = cmha::fuzz::write_scratch("corpus.en", data, size);
  std::string reversed(reinterpret_cast<const char*>(data), size);
  std::reverse(reversed.begin(), reversed.end());
  cmha::fuzz::write_scratch("corpus.de", reversed.data(), reversed.size());
  try {
    check_lines(cmha::data::read_text_lines(path));
  } catch (const cmha::Error&) {
  }
  try {
    const cmha::data::ParallelCorpus c =
        cmha::data::read_parallel_corpus((cmha::fuzz::scratch_dir() / "corpus").string(), "en", "de");
    if (c.source.size() != c.target.size()) std::abort();
  } catch (const cmha::Error&) {
  }
  try {
    check_lines(cmha::eval::read_segments(path, "reference"));
  } catch (const cmha::Error&) {
  }
  return 0;
}
