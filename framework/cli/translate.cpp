// cmha translate: a trained transformer checkpoint as a translator that
// streams, as fairseq-interactive and marian-decoder do: each line is
// translated and written (and flushed) as soon as it has arrived, and only
// lines already waiting on the input are batched together.
#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "data/line_reader.h"
#include "eval/translator.h"
#include "run/device.h"
#include "tensor/atomic_file.h"
#include "tensor/error.h"
#include "tensor/regular_file.h"

namespace cmha::cli {

namespace {

namespace fs = std::filesystem;

const char* kDescription =
    "Translates one sentence per line (raw text: SentencePiece-encoded with the run's model, decoded back)\n"
    "with beam search, one output line per input line, in input order. It streams: a line is translated\n"
    "and written as soon as it has arrived, and the lines already waiting (up to --buffer-size) are sorted\n"
    "by length and batched (--max-tokens). A hypothesis scores sum(log p) / length^lenpen (length counts\n"
    "the end-of-sentence token, as fairseq). Without options it decodes as the checkpoint's run translated\n"
    "its test split (the recipe's eval.* keys), so `cmha translate RUN/checkpoint_average.safetensors\n"
    "< test.en` reproduces RUN/test.de.hyp byte for byte.\n"
    "  cmha translate CKPT [options] < input > output\n"
    "\n"
    "With --nbest N or --print-scores each input line gives N lines (1 with --print-scores alone), best\n"
    "first, in the Moses/Marian n-best format\n"
    "  ID ||| hypothesis ||| score\n"
    "where ID counts the input lines from 0 and score is the ranking score above (6 decimals).";

// Where the translations go: standard output, or a file written as they come
// (through an AtomicFile, committed at the end, when it is also the input file).
class Output {
 public:
  Output(const std::string& path, const std::string& input) : path_(path) {
    if (path.empty() || path == "-") {
      file_ = stdout;
      return;
    }
    std::error_code ec;
    if (!input.empty() && fs::exists(path, ec) && fs::equivalent(path, input, ec)) {
      in_place_ = std::make_unique<AtomicFile>(path);
      return;
    }
    file_ = std::fopen(path.c_str(), "wb");
    CMHA_CHECK(file_ != nullptr, "output file '" + path + "' cannot be written: " + std::strerror(errno));
  }
  ~Output() {
    if (file_ != nullptr && file_ != stdout) std::fclose(file_);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  void write(const std::string& text) {
    if (in_place_) in_place_->write(text);
    else std::fwrite(text.data(), 1, text.size(), file_);
  }
  // Everything written so far reaches the reader (an in-place output: at close()).
  void flush() {
    if (in_place_) return;
    CMHA_CHECK(std::fflush(file_) == 0 && !std::ferror(file_),
               "writing " + name() + " failed: " + std::strerror(errno));
  }
  void close() {
    if (in_place_) {
      in_place_->commit();
      return;
    }
    flush();
    if (file_ == stdout) return;
    const bool ok = std::fclose(file_) == 0;
    file_ = nullptr;
    CMHA_CHECK(ok, "output file '" + path_ + "' could not be written completely");
  }

 private:
  std::string name() const { return file_ == stdout ? "standard output" : "output file '" + path_ + "'"; }
  std::string path_;
  FILE* file_ = nullptr;
  std::unique_ptr<AtomicFile> in_place_;  // the input file, replaced only when every line is translated
};

// The translations of one part of the input: plain lines, or the n-best format.
std::string format_part(const std::vector<std::vector<eval::Translation>>& part, size_t first_line, bool nbest_format) {
  std::string out;
  char score[64];
  for (size_t i = 0; i < part.size(); ++i) {
    if (!nbest_format) {
      out += part[i].empty() ? std::string() : part[i].front().text;
      out += '\n';
      continue;
    }
    for (const eval::Translation& t : part[i]) {
      std::snprintf(score, sizeof score, "%.6f", t.score);
      out += std::to_string(first_line + i) + " ||| " + t.text + " ||| " + score + '\n';
    }
  }
  return out;
}

void stop_if_interrupted() {
  if (interrupted()) throw Interrupted{};
}

}  // namespace

int translate_command(const Args& args) {
  std::string checkpoint, input, output, device = "cpu";
  eval::DecodingOverrides given;
  long long beam = 0, max_len_b = 0, max_tokens = 0, max_source_tokens = 0, nbest = 1, threads = 0, buffer = 1000;
  double lenpen = 0, max_len_a = 0;
  bool print_scores = false;
  CommandLine cl("translate", kDescription);
  CLI::App& app = cl.app();
  app.add_option("checkpoint", checkpoint, "the checkpoint (a run's checkpoint_*.safetensors)")->type_name("CKPT");
  app.add_option("-i,--input", input, "source sentences (default: standard input)")->type_name("FILE");
  app.add_option("-o,--output", output, "translations (default: standard output)")->type_name("FILE");
  CLI::Option* beam_opt = app.add_option("--beam", beam, "beam size; 1 = greedy (default: the checkpoint's eval.beam)")
                              ->check(whole_number(1, 1024))->type_name("K");
  CLI::Option* lenpen_opt =
      app.add_option("--lenpen", lenpen, "length penalty exponent (default: the checkpoint's eval.lenpen)")
          ->check(number(-100.0, 100.0))->type_name("A");
  CLI::Option* max_len_a_opt =
      app.add_option("--max-len-a", max_len_a,
                     "at most A x source tokens + B output tokens (default: the checkpoint's eval.max_len_a)")
          ->check(number(0.0, 1e6))->type_name("A");
  CLI::Option* max_len_b_opt =
      app.add_option("--max-len-b", max_len_b, "the B above (default: the checkpoint's eval.max_len_b)")
          ->check(whole_number(0LL, 1000000LL))->type_name("B");
  CLI::Option* max_tokens_opt =
      app.add_option("--max-tokens", max_tokens,
                     "max(source, output) tokens per batch, padding included (default: the checkpoint's "
                     "eval.max_tokens)")
          ->check(whole_number(1LL, 1LL << 24))->type_name("N");
  CLI::Option* max_source_opt =
      app.add_option("--max-source-tokens", max_source_tokens,
                     "longest source line in pieces, end of sentence included: a longer line is cut to it, with a "
                     "warning naming the line; outputs are as bounded (default: the checkpoint's "
                     "eval.max_source_tokens, 0 there = 4 x data.max_len; at most model.max_positions with learned "
                     "positions)")
          ->check(whole_number(1LL, 1LL << 20))->type_name("N");
  app.add_option("--nbest", nbest, "the N best translations of each line, in the n-best format above (N <= beam)")
      ->capture_default_str()->check(whole_number(1, 1024))->type_name("N");
  app.add_flag("--print-scores", print_scores, "the n-best format above, with the score of each translation");
  app.add_option("--buffer-size", buffer,
                 "at most this many waiting lines are sorted by length and batched together (a file is read in "
                 "parts of this many lines; the translations do not depend on it)")
      ->capture_default_str()->check(whole_number(1LL, 1LL << 24))->type_name("LINES");
  app.add_option("--spm", given.spm_path, "SentencePiece model (default: spm.model next to CKPT)")->type_name("FILE");
  app.add_option("--device", device, "device to translate on: cpu, cuda (= cuda:0) or cuda:N, checked as train.device")
      ->capture_default_str()->type_name("DEV");
  app.add_option("--threads", threads, "CPU threads (default: all cores, or OMP_NUM_THREADS)")
      ->check(whole_number(1, 4096))->type_name("T");
  if (!cl.parse(args)) return 0;
  CMHA_CHECK(!checkpoint.empty(), "cmha translate needs a checkpoint (try 'cmha translate --help')");
  run::checked_device(device, "--device " + device);
  if (beam_opt->count()) given.beam = beam;
  if (lenpen_opt->count()) given.lenpen = lenpen;
  if (max_len_a_opt->count()) given.max_len_a = max_len_a;
  if (max_len_b_opt->count()) given.max_len_b = max_len_b;
  if (max_tokens_opt->count()) given.max_tokens = max_tokens;
  if (max_source_opt->count()) given.max_source_tokens = max_source_tokens;
  given.nbest = nbest;
  const bool nbest_format = nbest > 1 || print_scores;
  if (threads > 0) omp_set_num_threads(static_cast<int>(threads));

  // An input file is opened before the model loads (a FIFO is refused at once).
  const bool from_stdin = input.empty() || input == "-";
  const std::string input_name = from_stdin ? "standard input" : "'" + input + "'";
  int fd = STDIN_FILENO;
  if (!from_stdin) {
    refuse_special_file(input, "input file");
    fd = ::open(input.c_str(), O_RDONLY | O_CLOEXEC);
    CMHA_CHECK(fd >= 0, "input file '" + input + "' cannot be opened: " + std::strerror(errno));
  }
  struct CloseInput {
    int fd;
    ~CloseInput() {
      if (fd != STDIN_FILENO) ::close(fd);
    }
  } close_input{fd};
  data::LineReader reader(fd, input_name);

  const auto start = std::chrono::steady_clock::now();
  eval::Translator translator(checkpoint, given);
  Output out(output, from_stdin ? std::string() : input);
  stop_if_interrupted();  // from here on Ctrl-C stops between batches, or while waiting for input
  size_t lines = 0;
  std::vector<std::string> part;
  std::string line;
  while (reader.next(line, stop_if_interrupted)) {
    stop_if_interrupted();  // a signal that came while a line was arriving
    part.assign(1, std::move(line));
    while (part.size() < static_cast<size_t>(buffer) && reader.ready() && reader.next(line)) part.push_back(std::move(line));
    const auto translations = translator.translate_part(part, lines, input_name, [](size_t, size_t) {
      stop_if_interrupted();
    });
    out.write(format_part(translations, lines, nbest_format));
    out.flush();
    lines += part.size();
  }
  stop_if_interrupted();  // a signal just before the end of the input
  translator.report_cut_lines(input_name);
  out.close();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto& s = translator.search_options();
  std::fprintf(stderr, "cmha translate: %zu sentences in %.1f s (%.1f sentences/s) | beam %lld, lenpen %g, %d threads\n",
               lines, seconds, seconds > 0 ? static_cast<double>(lines) / seconds : 0.0,
               static_cast<long long>(s.beam), s.lenpen, omp_get_max_threads());
  return 0;
}

}  // namespace cmha::cli
