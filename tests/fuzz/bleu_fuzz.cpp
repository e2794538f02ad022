// The BLEU tokenisers (sacreBLEU's 13a, intl and none), the TER tokenizer,
// Unicode lowercasing and the compound split on arbitrary bytes, line by line,
// then corpus BLEU, chrF/chrF++ and TER of the lines against themselves
// shifted by one (the first half of the input's lines as hypotheses, the next
// as references) with every tokenizer and option, lowercased and not. Invalid
// UTF-8 must be a cmha::Error; BLEU and chrF must be finite numbers in
// [0, 100], TER finite and ≥ 0 (it may exceed 100).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "eval/bleu.h"
#include "eval/chrf.h"
#include "eval/ter.h"
#include "tensor/error.h"

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cmha::eval;
  const std::vector<std::string> lines = lines_of(std::string(reinterpret_cast<const char*>(data), size));
  for (const std::string& line : lines) {
    for (const char* tok : {"13a", "intl", "none"}) {
      try {
        const std::string t = bleu_tokenize(line, tok);
        // Tokenised text is valid UTF-8 again (the scorer splits and re-encodes it).
        if (detail::find_invalid_utf8(t) != std::string_view::npos) std::abort();
      } catch (const cmha::Error&) {
      }
    }
    try {
      (void)compound_split(unicode_lower(line));
    } catch (const cmha::Error&) {
    }
    for (bool normalized : {false, true}) {
      TerOptions o;
      o.normalized = normalized;
      o.no_punct = normalized;
      o.asian_support = normalized;
      try {
        const std::string t = ter_tokenize(line, o);
        if (detail::find_invalid_utf8(t) != std::string_view::npos) std::abort();
      } catch (const cmha::Error&) {
      }
    }
  }
  const size_t half = lines.size() / 2;
  const std::vector<std::string> hyps(lines.begin(), lines.begin() + half);
  const std::vector<std::string> refs(lines.begin() + half, lines.begin() + 2 * half);
  for (const char* tok : {"13a", "intl", "none"})
    for (bool lowercase : {false, true}) {
      BleuOptions o;
      o.tokenize = tok;
      o.lowercase = lowercase;
      o.compound_split = lowercase;  // once with, once without
      try {
        const BleuScore s = corpus_bleu(hyps, refs, o);
        if (!std::isfinite(s.score) || s.score < 0 || s.score > 100 + 1e-9) std::abort();
        (void)s.result().text(2);
      } catch (const cmha::Error&) {
      }
    }
  const std::vector<std::vector<std::string>> ref_streams{refs};
  for (int word_order : {0, 2})
    for (bool flags : {false, true}) {
      ChrfOptions o;
      o.word_order = word_order;
      o.lowercase = flags;
      o.whitespace = flags;
      o.eps_smoothing = !flags;
      try {
        const ChrfScore s = corpus_chrf(hyps, ref_streams, o);
        if (!std::isfinite(s.score) || s.score < 0 || s.score > 100 + 1e-9) std::abort();
        (void)s.result().text(2);
      } catch (const cmha::Error&) {
      }
    }
  for (bool normalized : {false, true}) {
    TerOptions o;
    o.normalized = normalized;
    o.case_sensitive = normalized;
    try {
      const TerScore s = corpus_ter(hyps, ref_streams, o);
      if (!std::isfinite(s.score) || s.score < 0 || s.num_edits < 0) std::abort();
      (void)s.result().text(2);
    } catch (const cmha::Error&) {
    }
  }
  return 0;
}
