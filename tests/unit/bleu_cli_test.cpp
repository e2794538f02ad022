// `cmha bleu` as a sacreBLEU drop-in: references as arguments and the
// hypotheses from -i or standard input, several references, -m bleu chrf ter,
// -f json, -w, -b, the signature, and one clear error (exit 2) per mistake.
// The numbers themselves are checked against sacreBLEU in bleu_test.cpp and
// metric_golden_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "eval/bleu.h"
#include "eval/chrf.h"
#include "eval/metric_score.h"
#include "eval/ter.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"

using namespace cmha;
using namespace cmha::eval;
namespace fs = std::filesystem;
using test::run_cmha;
using test::write_file;
using Result = test::CommandResult;

namespace {

using cmha::test::has;

const char* kHyp = "The cat sat on the mat.\nA quick-brown fox jumps over the lazy dog!\nhello world\n";
const char* kRef = "The cat sat on a mat.\nThe quick-brown fox jumped over the lazy dog!\nHello world.\n";
const char* kRef2 = "A cat sat on the mat.\nA quick brown fox jumps over a lazy dog.\nHello, world!\n";

struct Files {
  std::string dir, hyp, ref, ref2;
  explicit Files(const std::string& tag) : dir(test::temp_dir(tag)) {
    hyp = dir + "/hyp.txt";
    ref = dir + "/ref.txt";
    ref2 = dir + "/ref2.txt";
    write_file(hyp, kHyp);
    write_file(ref, kRef);
    write_file(ref2, kRef2);
  }
  ~Files() { fs::remove_all(dir); }
};

// Exit code 2 and one line naming every one of `parts`.
void expect_usage_error(const std::string& args, const std::vector<std::string>& parts) {
  const Result r = run_cmha(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "not one line: " << r.output;
  for (const auto& p : parts) EXPECT_TRUE(has(r.output, p)) << "'" << p << "' not in: " << r.output;
}

}  // namespace

TEST(BleuCommand, PrintsSacreBleusLineFromAFileOrStandardInput) {
  const Files f("cli_bleu");
  const Result r = run_cmha("bleu " + f.ref + " -i " + f.hyp);
  ASSERT_EQ(r.code, 0) << r.output;
  const MetricInput in = read_metric_input(f.hyp, {f.ref});
  const BleuScore s = corpus_bleu(in.hyps, in.refs[0]);
  EXPECT_EQ(r.output, s.result().text(2) + "\n");
  EXPECT_EQ(r.output.substr(0, 5 + s.signature.size()),
            "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" + metric_version());
  // cmha's version (CMakeLists.txt's project version) and the sacreBLEU release it matches.
  EXPECT_TRUE(std::regex_match(metric_version(), std::regex(R"(cmha-\d+\.\d+\.\d+\+sacreBLEU-2\.6\.0)")))
      << metric_version();
  // As `cmha translate ... | cmha bleu REF` gives them.
  EXPECT_EQ(run_cmha("bleu " + f.ref + " < " + f.hyp).output, r.output);
  EXPECT_EQ(run_cmha("bleu " + f.ref + " -i " + f.hyp + " -w 4").output, s.result().text(4) + "\n");
  EXPECT_EQ(run_cmha("bleu " + f.ref + " -i " + f.ref + " --score-only").output, "100.00\n");
  EXPECT_EQ(run_cmha("bleu " + f.ref + " -i " + f.hyp + " -b -w 0").output, format_score(s.score, 0) + "\n");
}

TEST(BleuCommand, SacrebleusOptionNamesAndBleuOptions) {
  const Files f("cli_bleu_opts");
  const MetricInput in = read_metric_input(f.hyp, {f.ref});
  BleuOptions o;
  o.lowercase = true;
  o.tokenize = "intl";
  o.smooth = "floor";
  o.smooth_value = 0.25;
  const std::string expected = corpus_bleu(in.hyps, in.refs[0], o).result().text() + "\n";
  EXPECT_EQ(run_cmha("bleu " + f.ref + " -i " + f.hyp + " -lc -tok intl -s floor -sv 0.25").output, expected);
  EXPECT_EQ(run_cmha("bleu " + f.ref + " -i " + f.hyp +
                     " --lowercase --tokenize intl --smooth-method floor --smooth-value 0.25")
                .output,
            expected);
  EXPECT_TRUE(has(expected, "case:lc|eff:no|tok:intl|smooth:floor[0.25]")) << expected;
  BleuOptions c;
  c.compound_split = true;
  const Result r = run_cmha("bleu " + f.ref + " -i " + f.hyp + " --compound-split");
  EXPECT_EQ(r.output, corpus_bleu(in.hyps, in.refs[0], c).result().text() + "\n");
  EXPECT_TRUE(has(r.output, "tok:13a+compound")) << r.output;
}

TEST(BleuCommand, SeveralMetricsAlignedInSacrebleusOrder) {
  const Files f("cli_bleu_metrics");
  const Result r = run_cmha("bleu " + f.ref + " " + f.ref2 + " -i " + f.hyp + " -m ter chrf bleu --chrf-word-order 2");
  ASSERT_EQ(r.code, 0) << r.output;
  const MetricInput in = read_metric_input(f.hyp, {f.ref, f.ref2});
  ChrfOptions pp;
  pp.word_order = 2;
  const std::vector<MetricScore> scores = {corpus_bleu_multi(in.hyps, in.refs).result(),
                                           corpus_chrf(in.hyps, in.refs, pp).result(),
                                           corpus_ter(in.hyps, in.refs).result()};
  EXPECT_EQ(r.output, format_results_text(scores, 2) + "\n");
  // One line per metric, BLEU first, each '=' in the same column.
  const size_t l1 = r.output.find('\n'), l2 = r.output.find('\n', l1 + 1);
  const std::string line2 = r.output.substr(l1 + 1, l2 - l1 - 1);
  EXPECT_EQ(r.output.find(" = "), line2.find(" = "));
  EXPECT_TRUE(has(line2, "chrF2++|nrefs:2|case:mixed|eff:yes|nc:6|nw:2|space:no|")) << r.output;
  EXPECT_TRUE(has(r.output, "\nTER|nrefs:2|case:lc|tok:tercom|norm:no|punct:yes|asian:no|")) << r.output;
  EXPECT_EQ(run_cmha("bleu " + f.ref + " -i " + f.hyp + " -m ter ter").output,
            corpus_ter(in.hyps, {in.refs[0]}).result().text() + "\n");
}

TEST(BleuCommand, JsonHasSacrebleusFields) {
  const Files f("cli_bleu_json");
  Result r = run_cmha("bleu " + f.ref + " -i " + f.hyp + " -m bleu chrf ter -f json -w 3");
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 3u);
  const MetricInput in = read_metric_input(f.hyp, {f.ref});
  const BleuScore bleu = corpus_bleu(in.hyps, in.refs[0]);
  EXPECT_EQ(j[0].at("name"), "BLEU");
  EXPECT_DOUBLE_EQ(j[0].at("score").get<double>(), std::stod(format_score(bleu.score, 3)));
  EXPECT_EQ(j[0].at("signature"), bleu.signature);
  EXPECT_EQ(j[0].at("verbose_score"), bleu.verbose());
  for (const char* key : {"nrefs", "case", "eff", "tok", "smooth", "version"}) EXPECT_TRUE(j[0].contains(key)) << key;
  EXPECT_EQ(j[0].at("nrefs"), "1");
  EXPECT_EQ(j[0].at("tok"), "13a");
  EXPECT_EQ(j[0].at("version"), metric_version());
  EXPECT_EQ(j[1].at("name"), "chrF2");
  for (const char* key : {"nrefs", "case", "eff", "nc", "nw", "space", "version"}) EXPECT_TRUE(j[1].contains(key)) << key;
  EXPECT_FALSE(j[1].contains("verbose_score"));
  EXPECT_EQ(j[2].at("name"), "TER");
  for (const char* key : {"nrefs", "case", "tok", "norm", "punct", "asian", "version"})
    EXPECT_TRUE(j[2].contains(key)) << key;
  // The keys in sacreBLEU's order.
  EXPECT_LT(r.output.find("\"name\""), r.output.find("\"score\""));
  EXPECT_LT(r.output.find("\"signature\""), r.output.find("\"verbose_score\""));
  EXPECT_LT(r.output.find("\"verbose_score\""), r.output.find("\"nrefs\""));
  // One metric: one object, not an array.
  r = run_cmha("bleu " + f.ref + " -f json < " + f.hyp);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(nlohmann::json::parse(r.output).is_object()) << r.output;
  EXPECT_EQ(r.output, bleu.result().json(2).dump(1) + "\n");
}

TEST(BleuCommand, WarnsAboutEmptyReferenceLinesUnlessQuiet) {
  const Files f("cli_bleu_warn");
  write_file(f.ref2, "The cat sat on a mat.\n\n   \n");
  Result r = run_cmha("bleu " + f.ref2 + " -i " + f.hyp + " -b");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "reference '" + f.ref2 + "' has 2 empty lines (the first is line 2), scored as "
                            "references without words, as sacreBLEU does")) << r.output;
  r = run_cmha("bleu " + f.ref2 + " -i " + f.hyp + " -b -q");
  const MetricInput in = read_metric_input(f.hyp, {f.ref2});
  EXPECT_EQ(r.output, format_score(corpus_bleu(in.hyps, in.refs[0]).score, 2) + "\n");
}

TEST(BleuCommand, HelpSaysWhichSacrebleuItMatches) {
  const Result r = run_cmha("bleu --help");
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char* part : {"sacreBLEU 2.6.0", "cmha-<version>+sacreBLEU-2.6.0", "--chrf-word-order", "--ter-normalized",
                           "-f json -w 1", "{bleu,chrf,ter}"})
    EXPECT_TRUE(has(r.output, part)) << part << " not in:\n" << r.output;
}

TEST(BleuCommand, MistakesExitTwoNamingTheProblem) {
  const Files f("cli_bleu_errors");
  write_file(f.ref2, "one\n");
  expect_usage_error("bleu " + f.ref2 + " -i " + f.hyp,
                     {"hypothesis file '" + f.hyp + "' has 3 lines but reference '" + f.ref2 + "' has 1"});
  expect_usage_error("bleu " + f.ref + " " + f.ref2 + " < " + f.hyp,
                     {"standard input has 3 lines but reference '" + f.ref2 + "' has 1"});
  expect_usage_error("bleu " + f.ref + " -i " + f.hyp + " -m bleu meteor", {"meteor", "'bleu', 'chrf' or 'ter'"});
  expect_usage_error("bleu " + f.ref + " -i " + f.dir + "/missing.txt",
                     {"cannot open hypothesis file '" + f.dir + "/missing.txt'", "No such file"});
  expect_usage_error("bleu " + f.dir + "/nope.txt -i " + f.hyp, {"cannot open reference '" + f.dir + "/nope.txt'"});
  expect_usage_error("bleu -i " + f.hyp, {"needs the reference files"});
  expect_usage_error("bleu -i " + f.hyp + " " + f.ref, {"-i took 2 files", "--paired-bs", "before -i"});
  expect_usage_error("bleu --ref " + f.ref + " --hyp " + f.hyp, {"not '--ref'", "the reference files first"});
  expect_usage_error("bleu " + f.ref + " -i " + f.hyp + " -tok zh", {"--tokenize", "zh", "'13a', 'intl', 'char' or 'none'"});
  expect_usage_error("bleu " + f.ref + " -i " + f.hyp + " -f latex", {"--format", "'text' or 'json'"});
  expect_usage_error("bleu " + f.ref + " -i " + f.hyp + " -w 16", {"--width", "16"});
  expect_usage_error("bleu " + f.ref + " -i " + f.hyp + " -m chrf -cc 0 -cw 0", {"cannot both be 0"});
  write_file(f.ref2, "");
  expect_usage_error("bleu " + f.ref2 + " -i " + f.ref2, {"hypothesis file '" + f.ref2 + "' holds no hypotheses"});
  // sacreBLEU reads tab-separated columns on standard input as several systems.
  write_file(f.ref2, "a b\nc\td\ne\n");
  expect_usage_error("bleu " + f.ref + " < " + f.ref2, {"standard input line 2 holds a tab", "-i HYP"});
  write_file(f.ref2, "ok\nschl\xe4" "cht\nok\n");
  expect_usage_error("bleu " + f.ref + " -i " + f.ref2,
                     {"hypothesis file '" + f.ref2 + "' line 2 is not valid UTF-8", "byte 0xE4"});
}
