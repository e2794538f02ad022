// cmha bleu --ref R [--hyp H]: corpus BLEU of hypotheses (a file, or standard
// input as `sacrebleu R < H`) against a reference file, number for number as
// sacreBLEU 2.6.0.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "eval/bleu.h"
#include "tensor/error.h"

namespace cmha::cli {

namespace {
const char* kBleuUsage =
    "usage: cmha bleu --ref REF [--hyp HYP] [--tokenize 13a|intl|none] [--lowercase]\n"
    "                 [--compound-split] [--width N] [--score-only]\n"
    "\n"
    "Scores detokenised hypotheses (one segment per line) against one reference\n"
    "file of the same length, as sacreBLEU 2.6.0 does, and prints sacreBLEU's\n"
    "text line: BLEU|<signature> = score 1/2/3/4-gram precisions (BP ...).\n"
    "\n"
    "options:\n"
    "  --ref REF         the reference translations\n"
    "  --hyp HYP         the hypotheses (default: standard input, e.g. from cmha translate)\n"
    "  --tokenize T      13a (default, mteval-v13a), intl (mteval-v14) or none\n"
    "  --lowercase       lowercase both sides first (signature case:lc)\n"
    "  --compound-split  split hyphenated compounds as ##AT##-##AT## on both sides (the\n"
    "                    tensor2tensor/fairseq WMT14 EN-DE convention; not sacreBLEU's)\n"
    "  --width N         decimals of the score (default 2)\n"
    "  --score-only      print only the score\n"
    "  -h, --help        show this help\n";
}  // namespace

int bleu_command(const Args& args) {
  std::string ref, hyp = "-";
  eval::BleuOptions opt;
  long long width = 2;
  bool score_only = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kBleuUsage, stdout);
      return 0;
    }
    if (a == "--ref" || a == "-r") {
      ref = option_value(args, i, "bleu");
    } else if (a == "--hyp" || a == "-i") {
      hyp = option_value(args, i, "bleu");
    } else if (a == "--tokenize" || a == "-tok") {
      opt.tokenize = option_value(args, i, "bleu");
      CMHA_CHECK(opt.tokenize == "13a" || opt.tokenize == "intl" || opt.tokenize == "none",
                 "option '--tokenize' needs 13a, intl or none, not '" + opt.tokenize + "'");
    } else if (a == "--lowercase" || a == "-lc") {
      opt.lowercase = true;
    } else if (a == "--compound-split") {
      opt.compound_split = true;
    } else if (a == "--width" || a == "-w") {
      width = parse_int(option_value(args, i, "bleu"), a, 0, 10);
    } else if (a == "--score-only" || a == "-b") {
      score_only = true;
    } else if (!a.empty() && a[0] == '-') {
      throw Error("unknown option '" + a + "' for 'cmha bleu' (try 'cmha bleu --help')");
    } else {
      throw Error("cmha bleu takes its files as --ref REF and --hyp HYP, not '" + a + "' (try 'cmha bleu --help')");
    }
  }
  CMHA_CHECK(!ref.empty(), "cmha bleu needs --ref REF, the reference translations (try 'cmha bleu --help')");
  // Standard input is read through its /dev path, so the file reader and its errors are the same.
  const eval::BleuScore s = eval::corpus_bleu_files(hyp == "-" ? "/dev/stdin" : hyp, ref, opt);
  const std::string line = s.format(static_cast<int>(width));  // "BLEU = 53.03 ..."
  if (score_only) {
    std::printf("%s\n", line.substr(7, line.find(' ', 7) - 7).c_str());
  } else {
    std::printf("BLEU|%s%s\n", s.signature.c_str(), line.substr(4).c_str());
  }
  return 0;
}

}  // namespace cmha::cli
