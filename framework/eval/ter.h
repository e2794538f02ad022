#pragma once
// Translation edit rate (Snover et al., 2006) as sacreBLEU 2.6.0 computes it
// (metrics/ter.py, metrics/lib_ter.py, tokenizers/tokenizer_ter.py: a
// re-implementation of Tercom), number for number.
//
// Per segment: the TER tokenizer (lowercasing unless case-sensitive, the
// optional Tercom normalisation and punctuation removal, whitespace
// collapsed; applied twice to the references, as sacreBLEU does, which
// changes them only with normalisation), then the fewest edits turning the hypothesis into the
// reference: insertions, deletions, substitutions and shifts of word blocks,
// found greedily as Tercom does (block shifts of up to 10 words moved at most
// 50 positions, at most 1000 shift candidates per segment, a beam of 25
// around the diagonal of the edit-distance matrix). With several references
// a segment takes the fewest edits over them and the mean reference length.
// TER = 100 · Σ edits / Σ reference lengths.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "eval/metric_score.h"

namespace cmha::eval {

// sacreBLEU's defaults (its --ter-* flags, all off): case-insensitive, no
// normalisation, punctuation kept, no Asian-script handling.
struct TerOptions {
  bool normalized = false;      // --ter-normalized: Tercom's normalisation and punctuation tokenization
  bool no_punct = false;        // --ter-no-punct: remove . , ? : ; ! " ( )
  bool asian_support = false;   // --ter-asian-support: with the above, CJK characters and punctuation too
  bool case_sensitive = false;  // --ter-case-sensitive (signature case:mixed)
};

struct TerScore {
  double score = 0.0;       // 100 · num_edits / ref_length (may exceed 100)
  int64_t num_edits = 0;    // the corpus's edits
  double ref_length = 0.0;  // Σ over segments of the mean reference length
  // "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:..."
  std::string signature;

  MetricScore result() const { return {"TER", score, signature, "", std::nullopt, std::nullopt}; }
};

// Corpus TER of UTF-8 hypotheses against reference streams, each as long as
// `hyps`. An empty reference costs one edit per hypothesis word and adds
// nothing to the reference length.
TerScore corpus_ter(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams,
                    const TerOptions& options = {});

// --- The pieces, exposed for tests ---------------------------------------------

// The TER tokenizer on one line (trailing whitespace stripped first, as
// sacreBLEU's TER does): its words joined by single spaces.
std::string ter_tokenize(std::string_view line, const TerOptions& options);

// The fewest edits (shifts counted one each) turning `hyp` into `ref`, as
// sacreBLEU's translation_edit_rate finds them.
int64_t ter_edits(const std::vector<std::string>& hyp, const std::vector<std::string>& ref);

}  // namespace cmha::eval
