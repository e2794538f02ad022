// chrF and TER on small cases whose expected values are sacreBLEU 2.6.0's
// (its TercomTokenizer, translation_edit_rate and CHRF statistics on the
// same strings); the corpora are in metric_golden_test.cpp.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "eval/chrf.h"
#include "eval/metric_score.h"
#include "eval/ter.h"
#include "support/check.h"
#include "support/text.h"

using namespace cmha;
using namespace cmha::eval;

namespace {

using cmha::test::words;

TerOptions ter_options(bool case_sensitive, bool normalized, bool no_punct, bool asian) {
  TerOptions o;
  o.case_sensitive = case_sensitive;
  o.normalized = normalized;
  o.no_punct = no_punct;
  o.asian_support = asian;
  return o;
}

struct TerTokCase {
  const char* input;
  const char* lowercased;  // the defaults
  const char* normalized;  // --ter-normalized
  const char* no_punct;    // --ter-no-punct
  const char* all;         // --ter-normalized --ter-no-punct --ter-asian-support
};

const TerTokCase kTerTokCases[] = {
    {"He said &quot;hi&quot; &amp; left, (quietly).", "he said &quot;hi&quot; &amp; left, (quietly).",
     "he said \" hi \" & left , ( quietly ) .", "he said &quothi&quot &amp left quietly", "he said hi & left quietly"},
    {"John's car's; it's Mary's", "john's car's; it's mary's", "john 's car 's ; it 's mary 's",
     "john's car's it's mary's", "john 's car 's it 's mary 's"},
    {"3.14, 1,000 and 2-3 a.b ,5 7,-", "3.14, 1,000 and 2-3 a.b ,5 7,-", "3.14 , 1,000 and 2 - 3 a . b , 5 7 , -",
     "314 1000 and 2-3 ab 5 7-", "314 1000 and 2 - 3 a b 5 7 -"},
    // Entities are decoded once, in the order quot, amp, lt, gt.
    {"&amp;quot;x&lt;y&gt;", "&amp;quot;x&lt;y&gt;", "& quot ; x < y >", "&ampquotx&lty&gt", "& quot x < y >"},
    // CJK ideographs one word each, Katakana kept whole, CJK and full-width punctuation removed.
    {"我爱北京。カタカナ（テスト）！", "我爱北京。カタカナ（テスト）！", "我爱北京。カタカナ（テスト）！",
     "我爱北京。カタカナ（テスト）！", "我 爱 北 京 カタカナ テスト"},
    // Python's full lowercase mapping (İ is i + U+0307) and final sigma.
    {"İSTANBUL ΟΔΟΣ Äb", "i̇stanbul οδος äb", "i̇stanbul οδος äb", "i̇stanbul οδος äb", "i̇stanbul οδος äb"},
    {"  a \t b  ", "a b", "a b", "a b", "a b"},
    {"", "", "", "", ""},
};

}  // namespace

TEST(TerTokenizer, LikeSacrebleusTercomTokenizer) {
  for (const auto& c : kTerTokCases) {
    SCOPED_TRACE(c.input);
    EXPECT_EQ(ter_tokenize(c.input, ter_options(false, false, false, false)), c.lowercased);
    EXPECT_EQ(ter_tokenize(c.input, ter_options(false, true, false, false)), c.normalized);
    EXPECT_EQ(ter_tokenize(c.input, ter_options(false, false, true, false)), c.no_punct);
    EXPECT_EQ(ter_tokenize(c.input, ter_options(false, true, true, true)), c.all);
  }
  EXPECT_EQ(ter_tokenize("He said &quot;Hi&quot;", ter_options(true, false, false, false)), "He said &quot;Hi&quot;");
}

// Block shifts count one edit each, as Tercom's.
TEST(TerEdits, ShiftsInsertionsDeletionsSubstitutions) {
  struct Case {
    const char* hyp;
    const char* ref;
    int64_t edits;
  };
  for (const Case& c : {Case{"a b c d e", "c d e a b", 1}, Case{"the cat sat on the mat", "on the mat the cat sat", 1},
                        Case{"x y z", "a b c", 3}, Case{"", "a b", 2}, Case{"a b", "", 2}, Case{"a a a b", "b a a a", 1},
                        Case{"one two three four five six", "four five six one two three extra", 2}})
    EXPECT_EQ(ter_edits(words(c.hyp), words(c.ref)), c.edits) << c.hyp << " -> " << c.ref;
}

TEST(TerScore, BestReferenceMeanLengthAndEmptyReferences) {
  // Segment 1: 1 edit against the first reference (5 words), 0 against the
  // second (5 words); segment 2: an empty reference costs the hypothesis's 2
  // words and adds no length: (0 + 2) / (5 + 0).
  const TerScore s = corpus_ter({"a b c d e", "x y"}, {{"c d e a b", ""}, {"a b c d e", ""}});
  EXPECT_EQ(s.num_edits, 2);
  EXPECT_DOUBLE_EQ(s.ref_length, 5.0);
  EXPECT_DOUBLE_EQ(s.score, 40.0);
  EXPECT_EQ(s.signature, "nrefs:2|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:" + metric_version());
  // Nothing to edit and nothing to match: 0; edits without reference words: 100.
  EXPECT_EQ(corpus_ter({""}, {{""}}).score, 0.0);
  EXPECT_EQ(corpus_ter({"a"}, {{""}}).score, 100.0);
  EXPECT_EQ(corpus_ter({"A B"}, {{"a b"}}).score, 0.0);
  EXPECT_EQ(corpus_ter({"A B"}, {{"a b"}}, ter_options(true, false, false, false)).score, 100.0);
}

TEST(ChrfScore, StatisticsLikeSacrebleu) {
  ChrfOptions pp;
  pp.word_order = 2;
  // chrF++ words: "(hi)" -> "(hi" ")", "hi!" -> "hi" "!".
  ChrfScore s = corpus_chrf({"(hi) hi! x"}, {{"(hi) hi! x"}}, pp);
  EXPECT_EQ(s.stats, (std::vector<int64_t>{8, 8, 8, 7, 7, 7, 6, 6, 6, 5, 5, 5, 4, 4, 4, 3, 3, 3, 5, 5, 5, 4, 4, 4}));
  EXPECT_DOUBLE_EQ(s.score, 100.0);
  EXPECT_EQ(s.name, "chrF2++");
  // No hypothesis: the reference's n-grams still count.
  s = corpus_chrf({""}, {{"abc"}}, pp);
  EXPECT_EQ(s.stats, (std::vector<int64_t>{0, 3, 0, 0, 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(s.score, 0.0);
  // An empty reference: nothing counts, not even the hypothesis's n-grams.
  s = corpus_chrf({"abc"}, {{""}}, pp);
  EXPECT_EQ(s.stats, std::vector<int64_t>(24, 0));
  s = corpus_chrf({"a"}, {{"a"}}, pp);
  EXPECT_EQ(s.stats, (std::vector<int64_t>{1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0}));
  EXPECT_DOUBLE_EQ(s.score, 100.0);  // the orders that occur on both sides only
}

TEST(ChrfScore, TheBestReferenceWhereverItIs) {
  const std::vector<int64_t> exact = {10, 10, 10, 9, 9, 9, 8, 8, 8, 7, 7, 7, 6, 6, 6, 5, 5, 5};
  for (const auto& refs : {std::vector<std::vector<std::string>>{{"The cat sat."}, {"A dog sat."}},
                           std::vector<std::vector<std::string>>{{"A dog sat."}, {"The cat sat."}}}) {
    const ChrfScore s = corpus_chrf({"The cat sat."}, refs);
    EXPECT_EQ(s.stats, exact);
    EXPECT_DOUBLE_EQ(s.score, 100.0);
    EXPECT_EQ(s.signature, "nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:" + metric_version());
  }
}

TEST(ChrfScore, BadOptionsAndInput) {
  ChrfOptions none;
  none.char_order = 0;
  EXPECT_NE(test::error_of([&] { corpus_chrf({"a"}, {{"a"}}, none); }).find("order above 0"), std::string::npos);
  EXPECT_NE(test::error_of([] { corpus_chrf({"a", "b"}, {{"a"}}); }).find("2 hypotheses but reference stream 1 has 1"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { corpus_chrf({"b\xff"}, {{"a"}}); }).find("hypothesis segment 1 is not valid UTF-8"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { corpus_ter({"a"}, {{"a"}, {}}); }).find("reference stream 2 has 0"), std::string::npos);
  EXPECT_NE(test::error_of([] { corpus_ter({"a"}, {{"\xc3"}}); }).find("segment 1 of reference stream 1 is not valid UTF-8"),
            std::string::npos);
}
