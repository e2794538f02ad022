// BLEU, chrF and TER against sacreBLEU 2.6.0 on the golden cases of
// tests/data/bleu-golden (made by tests/reference/make_metric_golden.py):
// every setting's sufficient statistics exactly, its score to 1e-9 (sacreBLEU
// prints 4 decimals or fewer), its name and signature; and sacreBLEU's
// command lines, whose standard output `cmha bleu` must reproduce byte for
// byte but for the signature's version.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/bleu.h"
#include "eval/chrf.h"
#include "eval/metric_score.h"
#include "eval/ter.h"
#include "support/check.h"
#include "support/sacrebleu_golden.h"

using namespace cmha;
using namespace cmha::eval;
using test::kBleuGoldenDir;
using test::with_cmha_version;

namespace {


nlohmann::json load_case(const std::string& name) {
  std::ifstream f(kBleuGoldenDir + "/" + name + ".metrics.json");
  EXPECT_TRUE(f) << "missing " << kBleuGoldenDir << "/" << name << ".metrics.json";
  return f ? nlohmann::json::parse(f) : nlohmann::json::object();
}

// The options of each setting of make_metric_golden.py (a setting without
// an entry here fails the test).
struct Setting {
  std::string metric;  // "bleu", "chrf", "ter"
  BleuOptions bleu;
  ChrfOptions chrf;
  TerOptions ter;
};

std::map<std::string, Setting> settings() {
  std::map<std::string, Setting> s;
  auto chrf = [&](const std::string& name, const std::function<void(ChrfOptions&)>& f) {
    Setting x{"chrf", {}, {}, {}};
    f(x.chrf);
    s[name] = x;
  };
  auto ter = [&](const std::string& name, const std::function<void(TerOptions&)>& f) {
    Setting x{"ter", {}, {}, {}};
    f(x.ter);
    s[name] = x;
  };
  auto bleu = [&](const std::string& name, const std::function<void(BleuOptions&)>& f) {
    Setting x{"bleu", {}, {}, {}};
    f(x.bleu);
    s[name] = x;
  };
  chrf("chrf", [](ChrfOptions&) {});
  chrf("chrf_pp", [](ChrfOptions& o) { o.word_order = 2; });
  chrf("chrf_lc_ws", [](ChrfOptions& o) { o.lowercase = o.whitespace = true; });
  chrf("chrf_beta1_eps", [](ChrfOptions& o) {
    o.beta = 1;
    o.char_order = 4;
    o.word_order = 1;
    o.eps_smoothing = true;
  });
  ter("ter", [](TerOptions&) {});
  ter("ter_cs", [](TerOptions& o) { o.case_sensitive = true; });
  ter("ter_norm_nopunct", [](TerOptions& o) { o.normalized = o.no_punct = true; });
  ter("ter_norm_asian", [](TerOptions& o) { o.normalized = o.asian_support = true; });
  ter("ter_nopunct_asian", [](TerOptions& o) { o.no_punct = o.asian_support = o.case_sensitive = true; });
  bleu("bleu", [](BleuOptions&) {});
  bleu("bleu_char", [](BleuOptions& o) { o.tokenize = "char"; });
  bleu("bleu_floor", [](BleuOptions& o) {
    o.smooth = "floor";
    o.smooth_value = 0.5;
  });
  bleu("bleu_lc_intl", [](BleuOptions& o) {
    o.lowercase = true;
    o.tokenize = "intl";
  });
  bleu("bleu_addk", [](BleuOptions& o) { o.smooth = "add-k"; });
  bleu("bleu_none", [](BleuOptions& o) {
    o.smooth = "none";
    o.tokenize = "none";
  });
  return s;
}

void check_setting(const std::string& name, const nlohmann::json& expected) {
  const auto all = settings();
  const std::string base = name.size() > 6 && name.substr(name.size() - 6) == "_2refs" ? name.substr(0, name.size() - 6)
                                                                                      : name;
  const auto it = all.find(base);
  ASSERT_NE(it, all.end()) << "setting '" << base << "' has no options in metric_golden_test.cpp";
  const Setting& setting = it->second;

  std::vector<std::string> ref_paths;
  for (const auto& r : expected.at("refs")) ref_paths.push_back(kBleuGoldenDir + "/" + r.get<std::string>());
  const MetricInput in = read_metric_input(kBleuGoldenDir + "/" + expected.at("hyp").get<std::string>(), ref_paths);
  const double score = expected.at("score").get<double>();
  const std::string signature = with_cmha_version(expected.at("signature").get<std::string>());

  MetricScore got;
  if (setting.metric == "bleu") {
    const BleuScore s = corpus_bleu_multi(in.hyps, in.refs, setting.bleu);
    for (int n = 0; n < 4; ++n) {
      EXPECT_EQ(s.counts[n], expected.at("counts")[n].get<int64_t>()) << name << " counts[" << n << "]";
      EXPECT_EQ(s.totals[n], expected.at("totals")[n].get<int64_t>()) << name << " totals[" << n << "]";
    }
    EXPECT_EQ(s.sys_len, expected.at("sys_len").get<int64_t>()) << name;
    EXPECT_EQ(s.ref_len, expected.at("ref_len").get<int64_t>()) << name;
    EXPECT_NEAR(s.bp, expected.at("bp").get<double>(), 1e-12) << name;
    got = s.result();
    EXPECT_EQ(got.verbose, expected.at("verbose").get<std::string>()) << name;
  } else if (setting.metric == "chrf") {
    const ChrfScore s = corpus_chrf(in.hyps, in.refs, setting.chrf);
    EXPECT_EQ(s.stats, expected.at("stats").get<std::vector<int64_t>>()) << name;
    got = s.result();
  } else {
    const TerScore s = corpus_ter(in.hyps, in.refs, setting.ter);
    EXPECT_EQ(s.num_edits, expected.at("num_edits").get<int64_t>()) << name;
    EXPECT_DOUBLE_EQ(s.ref_length, expected.at("ref_length").get<double>()) << name;
    got = s.result();
  }
  EXPECT_NEAR(got.score, score, 1e-9) << name;
  EXPECT_EQ(got.name, expected.at("name").get<std::string>()) << name;
  EXPECT_EQ(got.signature, signature) << name;
}

void check_case(const std::string& name) {
  const nlohmann::json golden = load_case(name);
  ASSERT_TRUE(golden.contains("settings"));
  EXPECT_EQ(golden.at("sacrebleu").get<std::string>(), kSacrebleuVersion);
  for (const auto& [setting, expected] : golden.at("settings").items()) {
    SCOPED_TRACE(name + " " + setting);
    check_setting(setting, expected);
  }
}

// Runs each of sacreBLEU's recorded command lines as `cmha bleu` (-q: no
// warnings among the output; sacreBLEU's defaults -f json -w 1 spelled out
// where the line leaves them out, cmha's being text and 2) and compares the
// standard output.
void check_cli(const std::string& name) {
  const nlohmann::json golden = load_case(name);
  ASSERT_TRUE(golden.contains("cli"));
  for (const auto& c : golden.at("cli")) {
    const auto sacrebleu_args = c.at("args").get<std::vector<std::string>>();
    const auto given = [&](const char* opt) {
      return std::find(sacrebleu_args.begin(), sacrebleu_args.end(), opt) != sacrebleu_args.end();
    };
    std::string args = std::string("bleu -q") + (given("-f") ? "" : " -f json") + (given("-w") ? "" : " -w 1");
    for (const std::string& arg : sacrebleu_args) {
      const bool file = arg.rfind("case", 0) == 0;  // the golden files are case<N>.*
      args += " " + (file ? kBleuGoldenDir + "/" + arg : arg);
    }
    if (!c.at("stdin").is_null()) args += " < " + kBleuGoldenDir + "/" + c.at("stdin").get<std::string>();
    const test::CommandResult r = test::run_cmha(args);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.output;
    EXPECT_EQ(r.output, with_cmha_version(c.at("stdout").get<std::string>())) << args;
  }
}

}  // namespace

TEST(MetricGolden, Case1EverySetting) { check_case("case1"); }
TEST(MetricGolden, Case2EdgeCasesEverySetting) { check_case("case2"); }
TEST(MetricGolden, Case1CommandLinesPrintWhatSacrebleuPrints) { check_cli("case1"); }
TEST(MetricGolden, Case2CommandLinesPrintWhatSacrebleuPrints) { check_cli("case2"); }
