// Corpus BLEU against sacreBLEU 2.6.0: the golden case (304 German segments
// scored by sacreBLEU in four settings, tests/data/bleu-golden; the other
// metrics and settings are in metric_golden_test.cpp), the
// tokenizers on tricky strings (expected outputs from sacreBLEU's rules),
// smoothing, clipping, the brevity penalty, the compound split, and one
// clear error per defect.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/bleu.h"
#include "support/check.h"
#include "support/files.h"
#include "support/sacrebleu_golden.h"
#include "tensor/error.h"
#include "support/source_paths.h"

using namespace cmha;
using namespace cmha::eval;
namespace fs = std::filesystem;
using test::expect_error;
using test::kBleuGoldenDir;
using test::write_file;

namespace {

// A signature with sacreBLEU's version field ("...|version:2.6.0") as cmha writes it.
std::string cmha_signature(const std::string& sacrebleu_signature) {
  const std::string tail = "version:" + std::string(kSacrebleuVersion);
  EXPECT_EQ(sacrebleu_signature.substr(sacrebleu_signature.size() - tail.size()), tail);
  return sacrebleu_signature.substr(0, sacrebleu_signature.size() - tail.size()) + "version:" + metric_version();
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}


// Scores the golden files with `options` and compares every number of
// `setting` in case1.expected.json: counts, totals and lengths exactly, the
// score to 4 decimals, the brevity penalty to 6, the signature verbatim.
void check_golden(const std::string& setting, const BleuOptions& options) {
  std::ifstream f(kBleuGoldenDir + "/case1.expected.json");
  ASSERT_TRUE(f) << "missing " << kBleuGoldenDir << "/case1.expected.json";
  const nlohmann::json expected = nlohmann::json::parse(f).at(setting);

  const BleuScore s =
      corpus_bleu_files(kBleuGoldenDir + "/case1.hyp.de", kBleuGoldenDir + "/case1.ref.de", options);
  for (int n = 0; n < 4; ++n) {
    EXPECT_EQ(s.counts[n], expected.at("counts")[n].get<int64_t>()) << setting << " counts[" << n << "]";
    EXPECT_EQ(s.totals[n], expected.at("totals")[n].get<int64_t>()) << setting << " totals[" << n << "]";
  }
  EXPECT_EQ(s.sys_len, expected.at("sys_len").get<int64_t>()) << setting;
  EXPECT_EQ(s.ref_len, expected.at("ref_len").get<int64_t>()) << setting;
  EXPECT_EQ(fixed(s.score, 4), fixed(expected.at("score").get<double>(), 4)) << setting;
  EXPECT_EQ(fixed(s.bp, 6), fixed(expected.at("bp").get<double>(), 6)) << setting;
  EXPECT_EQ(s.signature, cmha_signature(expected.at("signature").get<std::string>())) << setting;
}

BleuOptions with_tokenizer(const std::string& tok) {
  BleuOptions o;
  o.tokenize = tok;
  return o;
}

}  // namespace

// --- The golden case --------------------------------------------------------

TEST(BleuGolden, Tok13aMixedCase) { check_golden("13a_mixed", {}); }

TEST(BleuGolden, Tok13aLowercase) {
  BleuOptions o;
  o.lowercase = true;
  check_golden("13a_lower", o);
}

TEST(BleuGolden, TokNone) { check_golden("none_mixed", with_tokenizer("none")); }

TEST(BleuGolden, TokIntl) { check_golden("intl_mixed", with_tokenizer("intl")); }

TEST(BleuGolden, FormatLikeSacrebleu) {
  const BleuScore s = corpus_bleu_files(kBleuGoldenDir + "/case1.hyp.de", kBleuGoldenDir + "/case1.ref.de");
  EXPECT_EQ(s.result().text(), "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" + metric_version() +
                                  " = 53.03 93.0/77.2/65.1/55.2 (BP = 0.744 ratio = 0.772 hyp_len = 3665 ref_len = 4748)");
  EXPECT_EQ(s.result().text(4).substr(s.signature.size() + 5, 10), " = 53.0275");
  EXPECT_EQ(s.result().text(0).substr(s.signature.size() + 5, 6), " = 53 ");
}

// The repository's copy must not drift from the shared golden data, where a
// checkout has it (CI places shared/ beside the clone).
TEST(BleuGolden, RepositoryCopyMatchesShared) {
  const std::string shared = std::string(CMHA_SOURCE_DIR) + "/../shared/bleu-golden";
  if (!fs::exists(shared + "/case1.expected.json")) GTEST_SKIP() << "no " << shared << " in this checkout";
  for (const char* name : {"case1.hyp.de", "case1.ref.de", "case1.expected.json"})
    EXPECT_EQ(test::read_file(kBleuGoldenDir + "/" + name), test::read_file(shared + "/" + name)) << name;
}

// --- Tokenizers ---------------------------------------------------------------

struct TokCase {
  const char* input;
  const char* tok_13a;
  const char* tok_intl;
};

// Expected outputs follow sacreBLEU 2.6.0's regular expressions.
const TokCase kTokCases[] = {
    {"Er sagte: &quot;Hallo&quot; &amp; ging.", "Er sagte : \" Hallo \" & ging .",
     "Er sagte : & quot ; Hallo & quot ; & amp ; ging ."},
    {"3.14, 1,000 und 2-3 Äpfel.", "3.14 , 1,000 und 2 - 3 Äpfel .", "3.14 , 1,000 und 2-3 Äpfel ."},
    {"a<skipped>b c", "ab c", "a < skipped > b c"},
    {"&amp;lt;b&amp;gt; x&lt;y", "< b > x < y", "& amp ; lt ; b & amp ; gt ; x & lt ; y"},
    {"„Zitat“ – Ende…", "„Zitat“ – Ende…", "„ Zitat “ – Ende …"},
    {"Preis: 5€ (ca.) 1995.", "Preis : 5€ ( ca . ) 1995 .", "Preis : 5 € ( ca . ) 1995."},
    {"Er sagt's [data races] {a|b} ~x^y_z `q` @home #1 $5 %",
     "Er sagt's [ data races ] { a | b } ~ x ^ y _ z ` q ` @ home # 1 $ 5 %",
     "Er sagt ' s [ data races ] { a | b } ~ x ^ y _ z ` q ` @ home # 1 $ 5 %"},
    {"E-Mail-Adresse, 10-20 Stück", "E-Mail-Adresse , 10 - 20 Stück", "E - Mail - Adresse , 10-20 Stück"},
    {"Ende.,;", "Ende . , ;", "Ende . , ;"},
    {"Wait... what?!", "Wait . . . what ? !", "Wait . . . what ? !"},
    {"1.2.3 a.b ,5 x.5.y 7,- 3--4", "1.2.3 a . b , 5 x . 5 . y 7 , - 3 - -4", "1.2.3 a . b , 5 x . 5 . y 7 , - 3 - - 4"},
    {"(1). [2], 3-", "( 1 ) . [ 2 ] , 3 -", "(1 ) . [ 2 ] , 3-"},
    {"x+y=z a/b", "x + y = z a / b", "x + y = z a / b"},
    // NBSP, thin space and ideographic space separate words; a zero-width
    // space does not (Python's str.split).
    {"a\u00a0b\u2009c\u200bd\u3000e", "a b c\u200bd e", "a b c\u200bd e"},
    // Soft hyphen (Cf), dashes (Pd), quotes (Pi/Pf), ½ (No), ² (No).
    {"Ge\u00adbühr 50 % – „gut“ — 3½ ²", "Ge\u00adbühr 50 % – „gut“ — 3½ ²", "Ge\u00adbühr 50 % – „ gut “ — 3½ ²"},
    {"", "", ""},
    {" \t ", "", ""},
};

TEST(BleuTokenizer, Mteval13a) {
  for (const auto& c : kTokCases) EXPECT_EQ(bleu_tokenize(c.input, "13a"), c.tok_13a) << "input: " << c.input;
}

TEST(BleuTokenizer, International) {
  for (const auto& c : kTokCases) EXPECT_EQ(bleu_tokenize(c.input, "intl"), c.tok_intl) << "input: " << c.input;
}

// sacreBLEU's "char": " ".join(line), so every character (code point) but
// whitespace is a token.
TEST(BleuTokenizer, CharSplitsEveryCharacter) {
  EXPECT_EQ(bleu_tokenize("Ab  c€,\u00a0𝄞", "char"), "A b c € , 𝄞");
  EXPECT_EQ(bleu_tokenize("", "char"), "");
}

TEST(BleuTokenizer, NoneLeavesTheLine) {
  EXPECT_EQ(bleu_tokenize("  a,b  &amp; ", "none"), "  a,b  &amp; ");
}

TEST(BleuTokenizer, LowercaseLikePython) {
  EXPECT_EQ(unicode_lower("Hello WORLD 123"), "hello world 123");
  // Umlauts, capital sharp s, dotted capital I (full mapping: i + U+0307),
  // Greek sigma (final form at the end of a word), the DŽ digraph.
  EXPECT_EQ(unicode_lower("ÄÖÜ STRASSE ẞ İx ΣΑΣ ΟΔΟΣ. Ǆ"), "äöü strasse ß i\u0307x σας οδος. ǆ");
  EXPECT_EQ(unicode_lower(""), "");
}

TEST(BleuTokenizer, PythonWhitespace) {
  using detail::is_py_space;
  for (const char32_t c : {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1F, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x200A,
                           0x2028, 0x2029, 0x202F, 0x205F, 0x3000})
    EXPECT_TRUE(is_py_space(c)) << std::hex << static_cast<uint32_t>(c);
  for (const char32_t c : {0x00, 0x08, 0x21, 0x84, 0x180E, 0x200B, 0xFEFF, 0x2060})
    EXPECT_FALSE(is_py_space(c)) << std::hex << static_cast<uint32_t>(c);
}

TEST(BleuTokenizer, Utf8Validation) {
  using detail::find_invalid_utf8;
  constexpr size_t kOk = std::string_view::npos;
  EXPECT_EQ(find_invalid_utf8("plain äöü € 𝄞"), kOk);
  EXPECT_EQ(find_invalid_utf8("ab\xff"), 2u);
  EXPECT_EQ(find_invalid_utf8("a\xc3"), 1u);              // truncated
  EXPECT_EQ(find_invalid_utf8("\xc0\xaf"), 0u);           // overlong "/"
  EXPECT_EQ(find_invalid_utf8("\xed\xa0\x80"), 0u);       // surrogate
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);   // past U+10FFFF
  const std::string s = "äö€𝄞x";
  EXPECT_EQ(detail::encode_utf8(detail::decode_utf8(s)), s);
}

// --- Scores -------------------------------------------------------------------

TEST(BleuScore, PerfectMatchIs100) {
  const std::vector<std::string> lines = {"Das ist ein kleiner Test.", "Noch ein Satz, mit Komma und &quot;Zitat&quot;.",
                                          "Kurz"};
  for (const char* tok : {"13a", "intl", "char", "none"}) {
    const BleuScore s = corpus_bleu(lines, lines, with_tokenizer(tok));
    EXPECT_DOUBLE_EQ(s.score, 100.0) << tok;
    EXPECT_EQ(s.bp, 1.0);
    EXPECT_EQ(s.counts, s.totals);
    EXPECT_EQ(s.sys_len, s.ref_len);
  }
  EXPECT_EQ(corpus_bleu(lines, lines).verbose(),
            "100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 18 ref_len = 18)");
}

TEST(BleuScore, EmptyCorpus) {
  const BleuScore s = corpus_bleu({}, {});
  EXPECT_EQ(s.score, 0.0);
  EXPECT_EQ(s.sys_len, 0);
  EXPECT_EQ(s.ref_len, 0);
  EXPECT_EQ(s.bp, 1.0);
  EXPECT_EQ(s.signature, "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" + metric_version());
  EXPECT_EQ(s.verbose(), "0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 0.000 hyp_len = 0 ref_len = 0)");
}

TEST(BleuScore, EmptyHypothesesScoreZero) {
  const BleuScore s = corpus_bleu({"", ""}, {"ein Satz", "noch einer"});
  EXPECT_EQ(s.score, 0.0);
  EXPECT_EQ(s.sys_len, 0);
  EXPECT_EQ(s.ref_len, 4);
  EXPECT_EQ(s.bp, 0.0);
}

TEST(BleuScore, NoMatchesScoreZero) {
  const BleuScore s = corpus_bleu({"x y z w"}, {"a b c d"});
  EXPECT_EQ(s.score, 0.0);
  EXPECT_EQ(s.totals, (std::array<int64_t, 4>{4, 3, 2, 1}));
  EXPECT_EQ(s.counts, (std::array<int64_t, 4>{0, 0, 0, 0}));
}

// Without any 4-gram the precision loop stops early and the missing order
// counts as log(0): the score is 0, as in sacreBLEU (without effective order).
TEST(BleuScore, ShortSegmentsWithoutFourGrams) {
  const BleuScore s = corpus_bleu({"a b c", "d e"}, {"a b c", "d e"});
  EXPECT_EQ(s.totals, (std::array<int64_t, 4>{5, 3, 1, 0}));
  EXPECT_EQ(s.score, 0.0);
  BleuOptions eff;
  eff.effective_order = true;
  const BleuScore e = corpus_bleu({"a b c", "d e"}, {"a b c", "d e"}, eff);
  EXPECT_DOUBLE_EQ(e.score, 100.0);
  EXPECT_EQ(e.signature, "nrefs:1|case:mixed|eff:yes|tok:13a|smooth:exp|version:" + metric_version());
}

// exp smoothing: the k-th order without a match gets precision 100 / (2^k · total).
TEST(BleuScore, ExpSmoothing) {
  const BleuScore s = corpus_bleu({"a b c d e"}, {"a b c x e"});
  EXPECT_EQ(s.counts, (std::array<int64_t, 4>{4, 2, 1, 0}));
  EXPECT_EQ(s.totals, (std::array<int64_t, 4>{5, 4, 3, 2}));
  EXPECT_DOUBLE_EQ(s.precisions[3], 25.0);
  EXPECT_NEAR(s.score, 42.72870063962342, 1e-12);
  EXPECT_NEAR(s.score, std::pow(80.0 * 50.0 * (100.0 / 3.0) * 25.0, 0.25), 1e-9);
}

// Hypothesis n-grams count at most as often as in the reference; a short
// hypothesis pays exp(1 - r/c).
TEST(BleuScore, ClippingAndBrevityPenalty) {
  const BleuScore s = corpus_bleu({"the the the the cat"}, {"the cat sat on the mat"});
  EXPECT_EQ(s.counts, (std::array<int64_t, 4>{3, 1, 0, 0}));
  EXPECT_EQ(s.totals, (std::array<int64_t, 4>{5, 4, 3, 2}));
  EXPECT_EQ(s.sys_len, 5);
  EXPECT_EQ(s.ref_len, 6);
  EXPECT_DOUBLE_EQ(s.bp, std::exp(1.0 - 6.0 / 5.0));
  EXPECT_NEAR(s.score, 19.3576934939088, 1e-11);
}

TEST(BleuScore, OtherSmoothingMethods) {
  BleuOptions o;
  o.smooth = "none";
  EXPECT_EQ(corpus_bleu({"a b c d e"}, {"a b c x e"}, o).score, 0.0);
  o.smooth = "floor";
  BleuScore f = corpus_bleu({"a b c d e"}, {"a b c x e"}, o);
  EXPECT_DOUBLE_EQ(f.precisions[3], 100.0 * 0.1 / 2.0);
  EXPECT_EQ(f.signature, "nrefs:1|case:mixed|eff:no|tok:13a|smooth:floor[0.10]|version:" + metric_version());
  o.smooth = "add-k";
  f = corpus_bleu({"a b c d e"}, {"a b c x e"}, o);
  EXPECT_DOUBLE_EQ(f.precisions[1], 100.0 * 3.0 / 5.0);  // (2 + 1) / (4 + 1); unigrams untouched
  EXPECT_DOUBLE_EQ(f.precisions[0], 80.0);
  EXPECT_EQ(f.signature, "nrefs:1|case:mixed|eff:no|tok:13a|smooth:add-k[1.00]|version:" + metric_version());
}

TEST(BleuScore, MultipleReferences) {
  // Counts clip against the maximum over references; the closest reference
  // length (the shorter on a tie) is used.
  const BleuScore s = corpus_bleu_multi({"the the cat"}, {{"the cat"}, {"the the dog sat"}});
  EXPECT_EQ(s.counts[0], 3);
  EXPECT_EQ(s.ref_len, 2);  // |3-2| == |3-4|: the shorter one
  EXPECT_EQ(s.signature, "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:" + metric_version());
  // An empty reference is a reference of no words (sacreBLEU's command line
  // reads an empty line so): its length 0 is the closest to an empty hypothesis.
  const BleuScore v = corpus_bleu_multi({"a b", ""}, {{"a b", "c d"}, {"a c", ""}});
  EXPECT_EQ(v.signature, "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:" + metric_version());
  EXPECT_EQ(v.sys_len, 2);
  EXPECT_EQ(v.ref_len, 2);
}

// --- Compound split (tensor2tensor get_ende_bleu.sh) -----------------------

TEST(BleuCompoundSplit, PerlRuleOnTokenizedText) {
  EXPECT_EQ(compound_split("rich-text format"), "rich ##AT##-##AT## text format");
  EXPECT_EQ(compound_split("Ä-Ö x--y"), "Ä ##AT##-##AT## Ö x ##AT##-##AT## -y");
  // The character after a split hyphen is consumed by the match, as in Perl.
  EXPECT_EQ(compound_split("a-b-c"), "a ##AT##-##AT## b-c");
  EXPECT_EQ(compound_split("E-Mail-Adresse"), "E ##AT##-##AT## Mail ##AT##-##AT## Adresse");
  // No split next to whitespace or at the ends.
  EXPECT_EQ(compound_split("-z q- a - b"), "-z q- a - b");
}

TEST(BleuCompoundSplit, ScoresHandMadeExample) {
  const std::vector<std::string> hyps = {"Die E-Mail-Adresse ist gültig.", "Das rich-text Format für 10-20 Seiten."};
  const std::vector<std::string> refs = {"Die E-Mail Adresse ist gültig.", "Das rich-text-Format für 10-20 Seiten."};
  const BleuScore plain = corpus_bleu(hyps, refs);
  EXPECT_EQ(plain.counts, (std::array<int64_t, 4>{11, 7, 5, 3}));
  EXPECT_EQ(plain.totals, (std::array<int64_t, 4>{14, 12, 10, 8}));
  EXPECT_NEAR(plain.score, 54.14341926669983, 1e-11);

  BleuOptions o;
  o.compound_split = true;
  const BleuScore split = corpus_bleu(hyps, refs, o);
  // 13a first ("10-20" becomes "10 - 20" and is not a compound), then
  // ##AT##-##AT## is one token.
  EXPECT_EQ(split.counts, (std::array<int64_t, 4>{19, 15, 11, 7}));
  EXPECT_EQ(split.totals, (std::array<int64_t, 4>{20, 18, 16, 14}));
  EXPECT_EQ(split.sys_len, 20);
  EXPECT_EQ(split.ref_len, 20);
  EXPECT_NEAR(split.score, 72.22644952263249, 1e-11);
  EXPECT_EQ(split.signature, "nrefs:1|case:mixed|eff:no|tok:13a+compound|smooth:exp|version:" + metric_version());
}

// --- Files and errors ---------------------------------------------------------

TEST(BleuFiles, ReadsLinesLikeSacrebleu) {
  const std::string dir = test::temp_dir("bleu_files");
  // CRLF endings and trailing blanks are stripped; a last line without '\n' counts.
  write_file(dir + "/hyp.txt", "Ein Test.\r\nZweite Zeile  \n\nletzte");
  write_file(dir + "/ref.txt", "Ein Test.\nZweite Zeile\nleer\nletzte\n");
  const auto hyps = read_segments(dir + "/hyp.txt", "hypothesis file");
  EXPECT_EQ(hyps, (std::vector<std::string>{"Ein Test.", "Zweite Zeile", "", "letzte"}));
  const BleuScore s = corpus_bleu_files(dir + "/hyp.txt", dir + "/ref.txt");
  EXPECT_EQ(s.sys_len, 6);
  EXPECT_EQ(s.ref_len, 7);
  write_file(dir + "/empty.txt", "");
  EXPECT_TRUE(read_segments(dir + "/empty.txt", "reference").empty());
  fs::remove_all(dir);
}

TEST(BleuErrors, LineCountMismatchNamesBothFiles) {
  const std::string dir = test::temp_dir("bleu_count");
  write_file(dir + "/hyp.txt", "a\nb\n");
  write_file(dir + "/ref.txt", "a\nb\nc\n");
  expect_error([&] { corpus_bleu_files(dir + "/hyp.txt", dir + "/ref.txt"); },
               {"hypothesis file '" + dir + "/hyp.txt' has 2 lines but reference '" + dir + "/ref.txt' has 3"});
  fs::remove_all(dir);
}

TEST(BleuErrors, MissingFile) {
  const std::string dir = test::temp_dir("bleu_missing");
  write_file(dir + "/ref.txt", "a\n");
  expect_error([&] { corpus_bleu_files(dir + "/nope.txt", dir + "/ref.txt"); },
               {"cannot open hypothesis file '" + dir + "/nope.txt'", "No such file"});
  expect_error([&] { corpus_bleu_files(dir + "/ref.txt", dir); }, {"reference '" + dir + "' is a directory"});
  fs::remove_all(dir);
}

TEST(BleuErrors, InvalidUtf8NamesFileAndLine) {
  const std::string dir = test::temp_dir("bleu_utf8");
  write_file(dir + "/hyp.txt", "gut\nauch gut\nschl\xe4" "cht\n");
  write_file(dir + "/ref.txt", "a\nb\nc\n");
  expect_error([&] { corpus_bleu_files(dir + "/hyp.txt", dir + "/ref.txt"); },
               {"hypothesis file '" + dir + "/hyp.txt' line 3 is not valid UTF-8", "byte 0xE4 at byte 5 of the line"});
  expect_error([&] { corpus_bleu({"ok", "b\xff"}, {"ok", "b"}); }, {"hypothesis segment 2 is not valid UTF-8 (byte 0xFF at byte 2)"});
  fs::remove_all(dir);
}

// sacreBLEU 2.6.0 scores an empty reference line as a reference without
// words (`sacrebleu ref -i hyp -m bleu -w 4` on these files prints 96.2195).
TEST(BleuFiles, EmptyReferenceLineIsAReferenceWithoutWords) {
  const std::string dir = test::temp_dir("bleu_emptyref");
  write_file(dir + "/hyp.txt", "a b c d\nfoo\nx y\n");
  write_file(dir + "/ref.txt", "a b c d\n  \nx y\n");
  const BleuScore s = corpus_bleu_files(dir + "/hyp.txt", dir + "/ref.txt");
  EXPECT_EQ(s.sys_len, 7);
  EXPECT_EQ(s.ref_len, 6);
  EXPECT_EQ(fixed(s.score, 4), "96.2195");
  EXPECT_EQ(s.verbose(), "85.7/100.0/100.0/100.0 (BP = 1.000 ratio = 1.167 hyp_len = 7 ref_len = 6)");
  fs::remove_all(dir);
}

TEST(BleuErrors, BadArguments) {
  expect_error([] { corpus_bleu({"a"}, {"a", "b"}); }, {"1 hypotheses but 2 references"});
  expect_error([] { corpus_bleu({"a"}, {"a"}, with_tokenizer("zh")); },
               {"unknown BLEU tokenizer 'zh' (expected 13a, intl, char or none)"});
  BleuOptions o;
  o.smooth = "add-one";
  expect_error([&] { corpus_bleu({"a"}, {"a"}, o); }, {"unknown BLEU smoothing 'add-one'"});
}
