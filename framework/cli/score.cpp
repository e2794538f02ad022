// cmha score: the log-probability a translation checkpoint gives each
// reference translation (teacher forcing), e.g. to rescore or filter a corpus.
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "data/text_corpus.h"
#include "eval/translator.h"
#include "tensor/error.h"

namespace cmha::cli {

namespace {
const char* kScoreDescription =
    "Prints, for each line pair, the natural-log probability the model gives the\n"
    "target line as a translation of the source line (sum over its SentencePiece\n"
    "pieces and the end of sentence) and its length in pieces, tab-separated, in\n"
    "input order. A summary (per-piece loss, perplexity) goes to standard error.\n";
}  // namespace

int score_command(const Args& args) {
  std::string checkpoint, src_path, tgt_path;
  eval::TranslatorOptions opt;
  long long threads = 0;
  CommandLine cl("score", kScoreDescription);
  cl.app().add_option("checkpoint", checkpoint, "the translation checkpoint")->type_name("CKPT");
  cl.app().add_option("--src", src_path, "source sentences, one per line")->type_name("FILE");
  cl.app().add_option("--tgt", tgt_path, "target sentences, line-aligned with --src")->type_name("FILE");
  cl.app().add_option("--max-tokens", opt.max_tokens, "tokens per batch, padding included")
      ->check(whole_number(1, 1LL << 40))->type_name("N")->capture_default_str();
  cl.app().add_option("--max-source-tokens", opt.max_source_tokens,
                      "longest line of either side in pieces, end of sentence included: a longer one is an error "
                      "naming it, as its score would be wrong cut (default: the recipe's eval.max_source_tokens, as "
                      "cmha translate)")
      ->check(whole_number(1, 1 << 20))->type_name("N");
  cl.app().add_option("--spm", opt.spm_path, "SentencePiece model (default: spm.model next to CKPT)")->type_name("FILE");
  cl.app().add_option("--threads", threads, "CPU threads (default: all cores, or OMP_NUM_THREADS)")
      ->check(whole_number(1, 4096))->type_name("T");
  if (!cl.parse(args)) return 0;
  CMHA_CHECK(!checkpoint.empty(), "cmha score needs a checkpoint (try 'cmha score --help')");
  CMHA_CHECK(!src_path.empty() && !tgt_path.empty(), "cmha score needs both --src FILE and --tgt FILE");
  if (threads > 0) omp_set_num_threads(static_cast<int>(threads));

  const std::vector<std::string> sources = data::read_text_lines(src_path);
  const std::vector<std::string> targets = data::read_text_lines(tgt_path);
  CMHA_CHECK(sources.size() == targets.size(), "source file '" + src_path + "' has " + std::to_string(sources.size()) +
                                                   " lines but target file '" + tgt_path + "' has " +
                                                   std::to_string(targets.size()));
  eval::Translator translator(checkpoint, opt);
  std::vector<int64_t> lengths;
  const std::vector<double> logprob = translator.score(sources, targets, &lengths, "source file '" + src_path + "'",
                                                      "target file '" + tgt_path + "'");
  double total = 0;
  int64_t pieces = 0;
  for (size_t i = 0; i < logprob.size(); ++i) {
    std::printf("%.6f\t%lld\n", logprob[i], static_cast<long long>(lengths[i]));
    total += logprob[i];
    pieces += lengths[i];
  }
  std::fflush(stdout);
  const double nll = pieces > 0 ? -total / static_cast<double>(pieces) : 0.0;
  std::fprintf(stderr, "cmha score: %zu pairs, %lld target pieces, loss %.4f nats/piece, perplexity %.2f\n",
               logprob.size(), static_cast<long long>(pieces), nll, std::exp(nll));
  return 0;
}

}  // namespace cmha::cli
