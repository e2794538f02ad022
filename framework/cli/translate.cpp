// cmha translate: a trained transformer checkpoint as a translator.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "train/translator.h"
#include "tensor/error.h"
#include "tensor/regular_file.h"

namespace cmha::cli {

namespace {
const char* kTranslateUsage =
    "usage: cmha translate CKPT [--input FILE] [--output FILE] [--beam K] [--lenpen A]\n"
    "                      [--max-len-a A] [--max-len-b B] [--max-tokens N] [--max-source-tokens N]\n"
    "                      [--spm FILE] [--threads T]\n"
    "\n"
    "Translates one sentence per line (raw text: SentencePiece-encoded with the\n"
    "run's model, decoded back) with beam search, and prints one line per input\n"
    "line, in input order. A hypothesis scores sum(log p) / length^lenpen\n"
    "(length counts the end-of-sentence token, as fairseq).\n"
    "\n"
    "options:\n"
    "  --input FILE     source sentences (default: standard input)\n"
    "  --output FILE    translations (default: standard output)\n"
    "  --beam K         beam size; 1 = greedy (default 4)\n"
    "  --lenpen A       length penalty exponent (default 0.6, as Vaswani et al.; fairseq's default is 1)\n"
    "  --max-len-a A    at most A * source tokens + B output tokens (default 1)\n"
    "  --max-len-b B    (default 50: Vaswani et al.'s source length + 50)\n"
    "  --max-tokens N   max(source, output) tokens per batch, padding included (default 4096)\n"
    "  --max-source-tokens N\n"
    "                   longest source line in pieces, end of sentence included: a longer\n"
    "                   line is cut to it, with a warning naming the line (default: the\n"
    "                   recipe's eval.max_source_tokens, 0 there = 4 x data.max_len, at most\n"
    "                   model.max_positions with learned positions); outputs are as bounded\n"
    "  --spm FILE       SentencePiece model (default: spm.model next to CKPT)\n"
    "  --threads T      CPU threads (default: all cores, or OMP_NUM_THREADS)\n"
    "  -h, --help       show this help\n";

std::vector<std::string> read_lines(std::istream& in) {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}
}  // namespace

int translate_command(const Args& args) {
  std::string checkpoint, input, output;
  train::TranslatorOptions opt;
  long long threads = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kTranslateUsage, stdout);
      return 0;
    }
    if (a == "--input" || a == "-i") input = option_value(args, i, "translate");
    else if (a == "--output" || a == "-o") output = option_value(args, i, "translate");
    else if (a == "--beam") opt.search.beam = parse_int(option_value(args, i, "translate"), a, 1, 1024);
    else if (a == "--lenpen") opt.search.lenpen = parse_real(option_value(args, i, "translate"), a, -100, 100);
    else if (a == "--max-len-a") opt.search.max_len_a = parse_real(option_value(args, i, "translate"), a, 0, 1e6);
    else if (a == "--max-len-b") opt.search.max_len_b = parse_int(option_value(args, i, "translate"), a, 0, 1000000);
    else if (a == "--max-tokens") opt.max_tokens = parse_int(option_value(args, i, "translate"), a, 1, 1LL << 40);
    else if (a == "--max-source-tokens") opt.max_source_tokens = parse_int(option_value(args, i, "translate"), a, 1, 1 << 20);
    else if (a == "--spm") opt.spm_path = option_value(args, i, "translate");
    else if (a == "--threads") threads = parse_int(option_value(args, i, "translate"), a, 1, 4096);
    else if (!a.empty() && a[0] == '-') throw Error("unknown option '" + a + "' for 'cmha translate'");
    else if (checkpoint.empty()) checkpoint = a;
    else throw Error("cmha translate takes one checkpoint, got '" + checkpoint + "' and '" + a + "'");
  }
  CMHA_CHECK(!checkpoint.empty(), "cmha translate needs a checkpoint (try 'cmha translate --help')");
  if (threads > 0) omp_set_num_threads(static_cast<int>(threads));

  // An input file is read first (it may be the output file too); standard
  // input only once the model has loaded.
  const bool from_stdin = input.empty() || input == "-";
  std::vector<std::string> lines;
  if (!from_stdin) {
    refuse_special_file(input, "input file");
    std::ifstream in(input, std::ios::binary);
    CMHA_CHECK(in, "input file '" + input + "' cannot be opened");
    lines = read_lines(in);
  }
  const auto start = std::chrono::steady_clock::now();
  train::Translator translator(checkpoint, opt);
  std::ofstream out;
  if (!output.empty() && output != "-") {
    out.open(output, std::ios::binary | std::ios::trunc);
    CMHA_CHECK(out, "output file '" + output + "' cannot be written");
  }
  if (from_stdin) lines = read_lines(std::cin);
  if (interrupted()) throw Interrupted{};
  const std::vector<std::string> hyps = translator.translate(lines, [](size_t, size_t) {
    if (interrupted()) throw Interrupted{};
  }, from_stdin ? "standard input" : "'" + input + "'");

  if (!out.is_open()) {
    for (const std::string& h : hyps) std::printf("%s\n", h.c_str());
    std::fflush(stdout);
  } else {
    for (const std::string& h : hyps) out << h << '\n';
    out.close();
    CMHA_CHECK(out, "output file '" + output + "' could not be written completely");
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto& s = translator.search_options();
  std::fprintf(stderr, "cmha translate: %zu sentences in %.1f s (%.1f sentences/s) | beam %lld, lenpen %g, %d threads\n",
               hyps.size(), seconds, seconds > 0 ? static_cast<double>(hyps.size()) / seconds : 0.0,
               static_cast<long long>(s.beam), s.lenpen, omp_get_max_threads());
  return 0;
}

}  // namespace cmha::cli
