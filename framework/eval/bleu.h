#pragma once
// Corpus BLEU (Papineni et al., 2002) that reproduces sacreBLEU 2.6.0
// (Post, 2018) number for number: its tokenizers (13a, intl, char, none), its
// optional Unicode lowercasing, its n-gram clipping, brevity penalty,
// smoothing methods and signature string.
//
// What sacreBLEU does, and therefore what this does, per segment:
//   lowercase (Python's str.lower, when asked) -> strip trailing whitespace ->
//   tokenize -> split on whitespace -> count 1..4-grams.
// Matches are clipped per segment by the reference counts (the maximum over
// references when there are several); counts, totals and lengths are summed
// over the corpus before the precisions are formed.
//
// "Whitespace" is always Python's definition (str.split / str.rstrip): ASCII
// space, \t \n \v \f \r, \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-U+200A,
// U+2028, U+2029, U+202F, U+205F and U+3000.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/metric_score.h"

namespace cmha::eval {

struct BleuOptions {
  // "13a" (mteval-v13a, sacreBLEU's default), "intl" (mteval-v14
  // international: Unicode punctuation and symbols), "char" (every
  // character a token) or "none".
  std::string tokenize = "13a";
  // Lowercase both sides first (sacreBLEU --lowercase; signature case:lc).
  bool lowercase = false;
  // "exp" (NIST geometric halving, the default), "floor", "add-k" or "none".
  std::string smooth = "exp";
  // For "floor" (default 0.1) and "add-k" (default 1); ignored otherwise.
  std::optional<double> smooth_value;
  // Average only over the n-gram orders the hypotheses have (sentence BLEU).
  bool effective_order = false;
  // The tensor2tensor / fairseq WMT14 EN-DE convention (get_ende_bleu.sh,
  // for comparisons with Vaswani et al. 2017): after tokenizing, every
  // hyphen between two non-space characters, "a-b", becomes
  // "a ##AT##-##AT## b" on both sides (Perl `s{(\S)-(\S)}{...}g`, so in
  // "a-b-c" only the first hyphen is split). Not a sacreBLEU option; the
  // signature says tok:<name>+compound.
  bool compound_split = false;
};

struct BleuScore {
  double score = 0.0;                         // 0..100
  std::array<int64_t, 4> counts{};            // matched (clipped) n-grams, n = 1..4
  std::array<int64_t, 4> totals{};            // hypothesis n-grams, n = 1..4
  std::array<double, 4> precisions{};         // percent, after smoothing
  int64_t sys_len = 0;                        // hypothesis tokens
  int64_t ref_len = 0;                        // closest reference tokens
  double bp = 1.0;                            // brevity penalty
  // "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:cmha-0.1.0+sacreBLEU-2.6.0"
  std::string signature;

  // What sacreBLEU prints after the score:
  // "93.0/77.2/65.1/55.2 (BP = 0.744 ratio = 0.772 hyp_len = 3665 ref_len = 4748)".
  std::string verbose() const;
  // The score as every metric reports it; result().text(2) is sacreBLEU's line
  // "BLEU|nrefs:1|...|version:... = 53.03 93.0/77.2/65.1/55.2 (BP = ...)".
  MetricScore result() const;
};

// Corpus BLEU of hypotheses against one reference stream (same length).
// Strings must be UTF-8. An empty reference segment is a reference of no
// words, as sacreBLEU's command line scores an empty line; an empty corpus
// scores 0 with BP 1.
BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      const BleuOptions& options = {});

// Several reference streams, each as long as `hyps`: the n-gram counts clip
// against the maximum over a segment's references, and its closest reference
// length counts (the shorter one on a tie).
BleuScore corpus_bleu_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams,
                            const BleuOptions& options = {});

// sacreBLEU's sufficient statistics of one segment, in its order:
// [hypothesis length, closest reference length, matches of orders 1..4,
// hypothesis n-grams of orders 1..4]. Summed over a corpus (or a resample of
// its segments) they give the corpus score.
inline constexpr size_t kBleuStats = 10;
using BleuSegmentStats = std::array<int64_t, kBleuStats>;

// The statistics of each segment (reference streams as corpus_bleu_multi's).
std::vector<BleuSegmentStats> bleu_segment_stats(const std::vector<std::string>& hyps,
                                                 const std::vector<std::vector<std::string>>& ref_streams,
                                                 const BleuOptions& options = {});
// The corpus score of summed statistics, with the signature of `n_refs` references.
BleuScore bleu_from_stats(const BleuSegmentStats& sums, size_t n_refs, const BleuOptions& options = {});
// The score sacreBLEU's bootstrap computes from a resample's statistics,
// which it sums as float32 (numpy 2): the precisions are float32 values.
double bleu_resampled_score(const std::array<float, kBleuStats>& sums, const BleuOptions& options = {});

// Scores a hypothesis file against a reference file (read_metric_input),
// with errors naming both files when their line counts differ.
BleuScore corpus_bleu_files(const std::string& hyp_path, const std::string& ref_path,
                            const BleuOptions& options = {});

// --- The pieces, exposed for tests and for other metrics -------------------

// sacreBLEU's tokenizer `name` ("13a", "intl", "char", "none") on one UTF-8
// line: its tokens joined by single spaces ("none" returns the line unchanged).
std::string bleu_tokenize(std::string_view line, const std::string& name);

// The ##AT## compound split on already tokenized text (see BleuOptions).
std::string compound_split(std::string_view line);

// Python's str.lower() on UTF-8 text: full Unicode lowercase mapping
// ("İ" -> "i̇"), Greek final sigma by context.
std::string unicode_lower(std::string_view line);

namespace detail {

// UTF-8 <-> code points. find_invalid_utf8 returns the byte offset of the
// first byte that does not start (or continue) a well-formed sequence
// (overlong forms, surrogates and values past U+10FFFF are ill-formed), or
// std::string_view::npos. decode_utf8 expects valid input.
size_t find_invalid_utf8(std::string_view s);
std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(std::u32string_view s);

// Python's str.isspace() on one code point.
bool is_py_space(char32_t c);
// Python's str.split(): the non-whitespace runs.
std::vector<std::u32string> py_split(std::u32string_view s);
// Python's str.rstrip().
std::u32string_view py_rstrip(std::u32string_view s);

// The substitutions of each tokenizer, before whitespace is normalised
// (tokenizer_13a.cpp, tokenizer_intl.cpp).
std::u32string tokenize_13a_raw(std::u32string line);
std::u32string tokenize_intl_raw(const std::u32string& line);
std::u32string compound_split_raw(std::u32string_view line);

}  // namespace detail
}  // namespace cmha::eval
