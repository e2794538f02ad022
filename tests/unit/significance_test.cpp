// sacreBLEU 2.6.0's statistical tests: numpy's default_rng(12345) stream
// (SeedSequence, PCG64, Generator.choice and integers(2, dtype=bool)) against
// numpy's own numbers, then --confidence, --paired-bs and --paired-ar against
// what sacreBLEU computed and printed on the same files
// (tests/data/significance-golden, made by
// tests/reference/make_significance_golden.py), and the mistakes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>

#include "eval/accuracy_tests.h"
#include "eval/metric_score.h"
#include "eval/numpy_random.h"
#include "eval/significance.h"
#include "eval/significance_report.h"
#include "support/check.h"
#include "support/files.h"
#include "support/sacrebleu_golden.h"
#include "support/source_paths.h"

using namespace cmha;
using namespace cmha::eval;
using test::error_of;
using test::kBleuGoldenDir;
using test::with_cmha_version;
namespace fs = std::filesystem;

namespace {

const std::string kGolden = std::string(CMHA_SOURCE_DIR) + "/tests/data/significance-golden";

nlohmann::json load_golden(const std::string& name) {
  std::ifstream in(kGolden + "/" + name);
  EXPECT_TRUE(in.good()) << name;
  return nlohmann::json::parse(in);
}

std::string u128(unsigned __int128 v) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v != 0);
  return s;
}

template <class T>
std::vector<int64_t> as_i64(const std::vector<T>& v) {
  return std::vector<int64_t>(v.begin(), v.end());
}

std::vector<int64_t> golden_ints(const nlohmann::json& j) {
  std::vector<int64_t> out;
  for (const auto& v : j) out.push_back(v.is_string() ? static_cast<int64_t>(std::stoull(v.get<std::string>()))
                                                      : v.get<int64_t>());
  return out;
}

std::vector<uint64_t> golden_u64(const nlohmann::json& j) {
  std::vector<uint64_t> out;
  for (const auto& v : j) out.push_back(std::stoull(v.get<std::string>()));
  return out;
}

// cmha run in the golden directory, so that systems are named as sacreBLEU named them.
test::CommandResult run_in_golden(const std::string& args) {
  const std::string cmd = "cd " + kGolden + " && " + std::string(CMHA_BINARY_DIR) + "/cmha " + args + " 2>&1";
  test::CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<std::string> lines_of(const std::string& path) { return read_segments(path, "test file"); }

}  // namespace

TEST(NumpyRandom, SeedSequenceAndPcg64StateAreNumpys) {
  const nlohmann::json g = load_golden("rng.json");
  const SeedSequence ss(12345);
  EXPECT_EQ(std::vector<int64_t>(ss.pool(), ss.pool() + 4), golden_ints(g.at("seed_sequence_pool")));
  EXPECT_EQ(as_i64(ss.generate_state32(8)), golden_ints(g.at("generate_state_uint32_8")));
  EXPECT_EQ(ss.generate_state64(4), golden_u64(g.at("generate_state_uint64_4")));
  const NumpyGenerator rng(12345);
  EXPECT_EQ(u128(rng.state()), g.at("pcg64_state").get<std::string>());
  EXPECT_EQ(u128(rng.increment()), g.at("pcg64_inc").get<std::string>());
}

TEST(NumpyRandom, RawAndThirtyTwoBitOutputsAreNumpys) {
  const nlohmann::json g = load_golden("rng.json");
  NumpyGenerator rng(12345);
  std::vector<uint64_t> raw;
  for (int i = 0; i < 8; ++i) raw.push_back(rng.next64());
  EXPECT_EQ(raw, golden_u64(g.at("random_raw_8")));
  NumpyGenerator rng32(12345);
  std::vector<int64_t> words;
  for (int i = 0; i < 9; ++i) words.push_back(rng32.next32());
  EXPECT_EQ(words, golden_ints(g.at("uint32_9")));
}

TEST(NumpyRandom, ChoiceAndBooleansDrawWhatSacrebleuDraws) {
  const nlohmann::json g = load_golden("rng.json");
  for (const int64_t n : {1, 3, 26, 304}) {
    NumpyGenerator rng(12345);
    EXPECT_EQ(rng.choice(n, 5 * static_cast<size_t>(n)), golden_ints(g.at("choice_" + std::to_string(n) + "_x_5")))
        << n;
  }
  NumpyGenerator big(12345);
  EXPECT_EQ(big.choice(3000000000LL, 64), golden_ints(g.at("choice_3000000000_x_64")));
  NumpyGenerator bools(12345);
  EXPECT_EQ(as_i64(bools.booleans(150)), golden_ints(g.at("bool_3_x_50")));
  NumpyGenerator both(12345);
  EXPECT_EQ(as_i64(both.booleans(14)), golden_ints(g.at("bool_then_choice_bool")));
  EXPECT_EQ(both.choice(7, 14), golden_ints(g.at("bool_then_choice_choice")));
  EXPECT_NE(error_of([] { NumpyGenerator(1).choice(0, 1); }).find("population size"), std::string::npos);
}

namespace {

struct GoldenCase {
  std::vector<std::vector<std::string>> refs, systems;
};

GoldenCase case1() {
  return {{lines_of(kBleuGoldenDir + "/case1.ref.de")},
          {lines_of(kBleuGoldenDir + "/case1.hyp.de"), lines_of(kGolden + "/case1.sys2.de"),
           lines_of(kBleuGoldenDir + "/case1.ref2.de")}};
}

GoldenCase case2() {
  return {{lines_of(kBleuGoldenDir + "/case2.ref"), lines_of(kBleuGoldenDir + "/case2.ref2")},
          {lines_of(kBleuGoldenDir + "/case2.hyp"), lines_of(kGolden + "/case2.sys2")}};
}

// The fixtures were made under Python 3.11, whose sum() of floats is not
// compensated; cmha's BLEU sums its log precisions as CPython 3.12 does
// (Neumaier), so a BLEU score may differ from the fixture's in its last
// bits (89.00354243847335 against ...342): far below any printed digit.
// p-values, counts of exceedances, are compared exactly.
constexpr double kLastBits = 1e-13;

void expect_close(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, kLastBits * std::fabs(want)) << what;
}

void expect_same(const std::optional<double>& got, const nlohmann::json& want, const std::string& what) {
  if (want.is_null()) {
    EXPECT_FALSE(got.has_value()) << what;
    return;
  }
  ASSERT_TRUE(got.has_value()) << what;
  expect_close(*got, want.get<double>(), what);
}

void check_paired(const GoldenCase& c, const nlohmann::json& golden, bool bootstrap) {
  const auto bleu = make_bleu_metric(c.refs, {});
  const auto chrf = make_chrf_metric(c.refs, {});
  const auto results = paired_test({bleu.get(), chrf.get()}, c.systems, bootstrap,
                                   bootstrap ? kDefaultResamples : kDefaultTrials);
  ASSERT_EQ(results.size(), c.systems.size());
  for (size_t s = 0; s < results.size(); ++s) {
    for (size_t m = 0; m < 2; ++m) {
      const TestResult& r = results[s][m];
      const nlohmann::json& want = golden.at(r.score.name).at(s);
      const std::string what = r.score.name + " of system " + std::to_string(s);
      expect_close(r.score.score, want.at("score").get<double>(), what);
      if (want.at("p_value").is_null()) EXPECT_FALSE(r.p_value.has_value()) << what;
      else EXPECT_EQ(r.p_value.value_or(-1), want.at("p_value").get<double>()) << what << ": p-value";
      expect_same(r.mean, want.at("mean"), what + ": mean");
      expect_same(r.ci, want.at("ci"), what + ": interval");
      EXPECT_EQ(r.score.signature, with_cmha_version(golden.at("signatures").at(r.score.name).get<std::string>()));
    }
  }
}

}  // namespace

TEST(Significance, PairedBootstrapIsSacrebleus) {
  const nlohmann::json g = load_golden("results.json");
  check_paired(case1(), g.at("case1_bs"), true);
  check_paired(case2(), g.at("case2_bs"), true);
}

TEST(Significance, PairedApproximateRandomizationIsSacrebleus) {
  const nlohmann::json g = load_golden("results.json");
  check_paired(case1(), g.at("case1_ar"), false);
  check_paired(case2(), g.at("case2_ar"), false);
}

TEST(Significance, ConfidenceIntervalIsSacrebleus) {
  const nlohmann::json g = load_golden("results.json");
  for (const auto& [name, c] : {std::pair{"case1_confidence", case1()}, std::pair{"case2_confidence", case2()}}) {
    // case1: the baseline; case2: its second system.
    const std::vector<std::string>& hyps = std::string(name) == "case1_confidence" ? c.systems[0] : c.systems[1];
    const auto bleu = make_bleu_metric(c.refs, {});
    const auto chrf = make_chrf_metric(c.refs, {});
    for (const auto* metric : {bleu.get(), chrf.get()}) {
      const TestResult r = confidence_interval(*metric, hyps);
      const nlohmann::json& want = g.at(name).at(r.score.name);
      expect_close(r.score.score, want.at("score").get<double>(), std::string(name) + " " + r.score.name);
      // statistics.mean is exact; cmha's sum of partials may differ in the last bit.
      EXPECT_NEAR(*r.mean, want.at("mean").get<double>(), 1e-12 * want.at("mean").get<double>()) << name;
      expect_close(*r.ci, want.at("ci").get<double>(), std::string(name) + " " + r.score.name);
    }
  }
}

TEST(Significance, CommandLinesPrintWhatSacrebleuPrints) {
  const nlohmann::json g = load_golden("results.json");
  int compared = 0;
  for (const auto& c : g.at("cli")) {
    const auto sacrebleu_args = c.at("args").get<std::vector<std::string>>();
    ASSERT_EQ(c.at("status").get<int>(), 0) << "sacreBLEU failed on " << c.at("args").dump();
    const auto given = [&](const char* opt) {
      return std::find(sacrebleu_args.begin(), sacrebleu_args.end(), opt) != sacrebleu_args.end();
    };
    // sacreBLEU's defaults where cmha's differ: JSON, 1 decimal.
    std::string args = std::string("bleu -q") + (given("-f") ? "" : " -f json") + (given("-w") ? "" : " -w 1");
    for (const std::string& arg : sacrebleu_args) args += " " + arg;
    const test::CommandResult r = run_in_golden(args);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.output;
    const std::string want = with_cmha_version(c.at("stdout").get<std::string>());
    if (given("--paired-bs") || given("--paired-ar") ? !given("json") : true) {
      EXPECT_EQ(r.output, want) << args;  // rounded as printed: the same text
    } else {
      // Full-precision JSON: the same document, numbers to their last bits (see kLastBits).
      const nlohmann::json got = nlohmann::json::parse(r.output), expected = nlohmann::json::parse(want);
      ASSERT_EQ(got.size(), expected.size()) << args;
      for (size_t s = 0; s < got.size(); ++s)
        for (auto it = expected[s].begin(); it != expected[s].end(); ++it) {
          if (it.value().is_string()) {
            EXPECT_EQ(got[s].at(it.key()), it.value()) << args;
            continue;
          }
          for (auto f = it.value().begin(); f != it.value().end(); ++f) {
            const nlohmann::json& g = got[s].at(it.key()).at(f.key());
            if (f.value().is_null()) EXPECT_TRUE(g.is_null()) << args << " " << f.key();
            else if (f.key() == "p_value") EXPECT_EQ(g.get<double>(), f.value().get<double>()) << args;
            else expect_close(g.get<double>(), f.value().get<double>(), args + " " + f.key());
          }
        }
      // Python's repr of a float and cmha's: the same shortest digits (p-values agree exactly).
      for (size_t at = want.find("\"p_value\": "); at != std::string::npos; at = want.find("\"p_value\": ", at + 1)) {
        const std::string p_value = want.substr(at, want.find_first_of(",\n}", at) - at);
        EXPECT_NE(r.output.find(p_value), std::string::npos) << args << ": " << p_value << " not in\n" << r.output;
      }
    }
    ++compared;
  }
  EXPECT_EQ(compared, 12);
}

TEST(Significance, ChrfBootstrapJsonIsSacrebleusWithItsFloat32sAsDoubles) {
  // Under numpy 2 sacreBLEU's resampled chrF is a float32 that its JSON
  // cannot write (2.6.0 exits 1); the fixture script ran its main() once more
  // with json.dumps writing numpy floats as doubles (make_significance_golden.py),
  // and cmha writes that document: compared with the others above, and here
  // its values against the paired test's own (the API's) to the bit.
  const nlohmann::json g = load_golden("results.json");
  int found = 0;
  for (const auto& c : g.at("cli")) {
    if (!c.value("json_numpy_floats_as_double", false)) continue;
    ++found;
    const nlohmann::json want = nlohmann::json::parse(c.at("stdout").get<std::string>());
    const nlohmann::json& api = g.at("case1_bs").at("chrF2");
    for (size_t s = 1; s < want.size(); ++s) {
      EXPECT_EQ(want.at(s).at("chrF2").at("mean").get<double>(), api.at(s).at("mean").get<double>()) << s;
      EXPECT_EQ(want.at(s).at("chrF2").at("p_value").get<double>(), api.at(s).at("p_value").get<double>()) << s;
    }
  }
  EXPECT_EQ(found, 1);
  const test::CommandResult r = run_in_golden(
      "bleu ../bleu-golden/case1.ref.de -i ../bleu-golden/case1.hyp.de case1.sys2.de -m chrf --paired-bs -f json");
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json out = nlohmann::json::parse(r.output);
  EXPECT_EQ(out.at(1).at("chrF2").at("mean").get<double>(), g.at("case1_bs").at("chrF2").at(1).at("mean").get<double>());
}

TEST(Significance, MistakesExitTwoInOneSentence) {
  const std::string dir = test::temp_dir("significance_errors");
  const std::string ref = dir + "/ref", a = dir + "/a", b = dir + "/b", shorter = dir + "/short";
  test::write_file(ref, "a b c\nd e f\ng h\n");
  test::write_file(a, "a b c\nd e\ng h\n");
  test::write_file(b, "a b\nd e f\ng\n");
  test::write_file(shorter, "a b c\nd e f\n");
  const auto expect_error = [](const std::string& args, const std::vector<std::string>& parts) {
    const test::CommandResult r = test::run_cmha(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "not one line: " << r.output;
    for (const auto& p : parts) EXPECT_NE(r.output.find(p), std::string::npos) << p << " not in: " << r.output;
  };
  expect_error("bleu " + ref + " -i " + a + " " + shorter + " --paired-bs",
               {"hypothesis file '" + shorter + "' has 2 lines but reference '" + ref + "' has 3"});
  expect_error("bleu " + ref + " -i " + a + " --paired-bs", {"-i BASELINE SYSTEM", "got 1 file"});
  expect_error("bleu " + ref + " -i " + a + " " + b, {"-i took 2 files", "--paired-bs or --paired-ar"});
  expect_error("bleu " + ref + " -i " + a + " " + b + " --paired-bs --paired-ar", {"exclude each other"});
  expect_error("bleu " + ref + " -i " + a + " " + b + " --paired-bs --confidence", {"--confidence is for one system"});
  expect_error("bleu " + ref + " -i " + a + " " + b + " --paired-ar -m bleu ter", {"not TER"});
  expect_error("bleu " + ref + " -i " + a + " --confidence -m ter", {"not TER"});
  expect_error("bleu " + ref + " -i " + a + " " + b + " " + b + " --paired-bs", {"'" + b + "' is given twice"});
  expect_error("bleu " + ref + " -i " + a + " " + b + " --paired-bs-n 0", {"--paired-bs-n"});
  expect_error("bleu " + ref + " -i " + a + " --confidence -cin 1", {"--confidence-n"});
  // The baseline given again is skipped, as sacreBLEU does: one system is left.
  expect_error("bleu " + ref + " -i " + a + " " + a + " --paired-ar", {"a system besides the baseline"});
  // Two systems of different lengths through the API.
  const auto bleu = make_bleu_metric({lines_of(ref)}, {});
  EXPECT_NE(error_of([&] { paired_test({bleu.get()}, {lines_of(ref), lines_of(shorter)}, true, 10); })
                .find("system 2 has 2 segments but the baseline has 3"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(Significance, IdenticalSystemsGetTheSmallestPValueAsInSacrebleu) {
  // sacreBLEU counts only differences strictly above the real one, so a
  // system against itself (delta 0) gets p = 1 / (samples + 1).
  const GoldenCase c = case2();
  const auto bleu = make_bleu_metric(c.refs, {});
  for (const bool bs : {true, false}) {
    const auto r = paired_test({bleu.get()}, {c.systems[0], c.systems[0]}, bs, 200);
    EXPECT_EQ(*r[1][0].p_value, 1.0 / 201) << bs;
    EXPECT_EQ(r[1][0].score.score, r[0][0].score.score);
  }
}

TEST(AccuracyTests, BootstrapIntervalOfTopOneDrawsNumpysResamples) {
  const nlohmann::json g = load_golden("results.json").at("accuracy");
  std::vector<uint8_t> correct;
  for (const auto& v : g.at("correct")) correct.push_back(static_cast<uint8_t>(v.get<int>()));
  const AccuracyInterval ci = bootstrap_top1(correct);
  EXPECT_EQ(ci.top1, g.at("top1").get<double>());
  EXPECT_EQ(ci.low, g.at("low").get<double>());
  EXPECT_EQ(ci.high, g.at("high").get<double>());
  EXPECT_LT(ci.low, ci.top1);
  EXPECT_GT(ci.high, ci.top1);
  EXPECT_NEAR(ci.mean, ci.top1, 0.5);
  EXPECT_NE(error_of([] { bootstrap_top1({}); }).find("at least one image"), std::string::npos);
}

TEST(AccuracyTests, ExactMcNemarIsTheBinomialTestOnTheDiscordantImages) {
  const nlohmann::json results = load_golden("results.json");  // named: a range-for over a temporary's member dangles
  for (const auto& c : results.at("accuracy").at("mcnemar")) {
    const int64_t only_a = c.at("only_a").get<int64_t>(), only_b = c.at("only_b").get<int64_t>();
    // Images each classifier gets right: 5 both, then the discordant ones, 2 neither.
    std::vector<uint8_t> a(5, 1), b(5, 1);
    a.insert(a.end(), static_cast<size_t>(only_a), 1);
    b.insert(b.end(), static_cast<size_t>(only_a), 0);
    a.insert(a.end(), static_cast<size_t>(only_b), 0);
    b.insert(b.end(), static_cast<size_t>(only_b), 1);
    a.insert(a.end(), 2, 0);
    b.insert(b.end(), 2, 0);
    const McNemarTest t = mcnemar_exact(a, b);
    EXPECT_EQ(t.both, 5);
    EXPECT_EQ(t.neither, 2);
    EXPECT_EQ(t.only_a, only_a);
    EXPECT_EQ(t.only_b, only_b);
    EXPECT_NEAR(t.p_value, c.at("p_value").get<double>(), 1e-12 + 1e-9 * c.at("p_value").get<double>())
        << only_a << " " << only_b;
  }
  EXPECT_NE(error_of([] { mcnemar_exact({1, 0}, {1}); }).find("the same images: 2 and 1 results"), std::string::npos);
}
