#pragma once
// Translation with a trained checkpoint: raw text lines in, detokenised text
// lines out, in input order.
//
// Conventions (those of the training side): the SentencePiece model's ids are
// the model's ids; a source sentence is its pieces followed by EOS (</s>);
// the decoder starts from BOS (<s>; EOS when the SentencePiece model has no
// BOS), and stops at EOS. The padding id, when the SentencePiece model has
// one, and ids past its vocabulary (a model vocabulary rounded up) are never
// produced.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eval/beam_search.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace cmha::run {
class Recipe;
}

namespace cmha::eval {

struct TranslatorOptions {
  std::string spm_path;       // empty: default_spm_path(checkpoint)
  SearchOptions search;       // bos/eos/pad/vocab_limit/max_len_cap are set by the translator
  int64_t max_tokens = 4096;  // max(source, output) tokens (padding included) per batch
  // The longest source (and output) line in pieces, EOS included: what keeps
  // one long line from taking unbounded memory (attention is quadratic in it).
  // 0: the checkpoint recipe's eval.max_source_tokens (see source_token_limit);
  // over a model in memory, model.max_positions (learned) or kDefaultSourceTokens.
  int64_t max_source_tokens = 0;
};

// Settings that replace a checkpoint recipe's decoding settings (cmha
// translate's options); each one left unset keeps the recipe's value.
struct DecodingOverrides {
  std::string spm_path;  // empty: default_spm_path(checkpoint)
  std::optional<int64_t> beam, max_len_b, max_tokens, max_source_tokens;
  std::optional<double> lenpen, max_len_a;
  int64_t nbest = 1;  // hypotheses per line (search.nbest), at most the beam
};

// How a run translates its test split (its final evaluation): eval.beam,
// eval.lenpen, eval.max_len_a, eval.max_len_b, eval.max_tokens and
// source_token_limit(recipe), each replaced by `given`'s when set. The one
// place these keys are read, so that `cmha translate CKPT` with no options
// decodes exactly as the run did.
TranslatorOptions recipe_translator_options(const run::Recipe& recipe, const DecodingOverrides& given = {});

// Without a recipe to derive it from: long enough for any real sentence.
constexpr int64_t kDefaultSourceTokens = 1024;
// The decoder holds beam × tokens-per-batch cached positions (keys and values
// of every layer, about 50 KB each for transformer-base): refused above this.
constexpr int64_t kMaxDecoderPositions = int64_t{1} << 18;

// eval.max_source_tokens of a recipe: its value, or when 0, 4 × data.max_len
// (4 × the longest training pair); never more than model.max_positions with
// learned positions (the model cannot see further).
int64_t source_token_limit(const run::Recipe& recipe);
// beam × max(max_tokens, max_source_tokens) ≤ kMaxDecoderPositions, else
// one cmha::Error sentence naming the options and recipe keys to lower.
void check_decoding_budget(int64_t beam, int64_t max_tokens, int64_t max_source_tokens);

// One translation of a source line.
struct Translation {
  std::string text;    // detokenised
  double score = 0;    // logprob / length^lenpen, what the search ranks by (length counts the EOS)
  double logprob = 0;  // Σ log p (natural log) over the pieces and the EOS
};

class Translator {
 public:
  // Loads the weights and recipe of `checkpoint` and the SentencePiece model.
  // A missing file, a checkpoint that is not a transformer, or a
  // SentencePiece vocabulary larger than the model's is one cmha::Error.
  // Decodes with `options` as given (max_source_tokens 0: the recipe's).
  Translator(const std::string& checkpoint, const TranslatorOptions& options = {});
  // The same, decoding as the checkpoint's run evaluated its test split
  // (recipe_translator_options of its recipe) but for the overrides.
  Translator(const std::string& checkpoint, const DecodingOverrides& overrides);
  // Decodes with a model the caller owns and keeps alive (validation BLEU
  // during training); options.spm_path must name the SentencePiece model.
  Translator(nn::Transformer& model, const TranslatorOptions& options);
  ~Translator();
  Translator(const Translator&) = delete;
  Translator& operator=(const Translator&) = delete;

  // <directory of the checkpoint>/spm.model, where a training run writes it.
  static std::string default_spm_path(const std::string& checkpoint);

  // One output line per input line. Batches of similar length (sorted by
  // length, order restored); `on_batch(done, total)` after each batch (it
  // may throw to stop). A line longer than max_source_tokens is cut to its
  // first max_source_tokens - 1 pieces and the EOS, with a warning on
  // standard error naming its line number in `input_name` (cut, not refused:
  // the output stays line-aligned with the input, as BLEU needs).
  std::vector<std::string> translate(const std::vector<std::string>& lines,
                                     const std::function<void(size_t, size_t)>& on_batch = {},
                                     const std::string& input_name = "the input");
  // An input translated part by part as it arrives (cmha translate's
  // stream): the search.nbest best translations of each line of `lines`,
  // best first, which follow `first_line` lines of the input; cut lines are
  // warned about as in translate(), numbered in the whole input, the first
  // few by name. After the last part, report_cut_lines() counts the rest.
  std::vector<std::vector<Translation>> translate_part(const std::vector<std::string>& lines, size_t first_line,
                                                       const std::string& input_name,
                                                       const std::function<void(size_t, size_t)>& on_batch = {});
  // One line with the number of cut lines when more were cut than named
  // (translate() does it itself); starts the count afresh.
  void report_cut_lines(const std::string& input_name);
  // The best hypothesis of each source token sequence (ids with their EOS).
  std::vector<eval::Hypothesis> translate_ids(const std::vector<std::vector<int64_t>>& sources);
  // Each one's search.nbest best (or more), best first.
  std::vector<eval::NBest> search_ids(const std::vector<std::vector<int64_t>>& sources);

  // Teacher-forced log-probability (natural log) of each target given its
  // source: Σ log p over the target's pieces and its EOS. `tokens` (when
  // given) receives each target's length in pieces, EOS included. A line
  // of either side longer than max_source_tokens is refused (a cut target's
  // score would be a wrong number): one cmha::Error naming its line number
  // in `source_name` or `target_name`.
  std::vector<double> score(const std::vector<std::string>& sources, const std::vector<std::string>& targets,
                            std::vector<int64_t>* tokens = nullptr, const std::string& source_name = "the sources",
                            const std::string& target_name = "the targets");

  std::vector<int64_t> encode(const std::string& line) const;  // pieces + EOS, however many
  std::string decode(const std::vector<int64_t>& ids) const;

  const nn::Transformer& model() const { return *model_; }
  const eval::SearchOptions& search_options() const { return options_.search; }
  const std::string& spm_path() const { return options_.spm_path; }
  int64_t max_source_tokens() const { return options_.max_source_tokens; }

 private:
  // Loads `checkpoint` (after checking that it and `spm_path` exist) with the
  // options that `options_of` derives from its recipe.
  Translator(const std::string& checkpoint, const std::string& spm_path,
             const std::function<TranslatorOptions(const run::Recipe&)>& options_of);
  // The SentencePiece model, the search's special ids and the source limit.
  void load_vocabulary(const std::string& model_name);
  // max_source_tokens settled (0 = `fallback`), clamped to learned positions, checked with the beam.
  void settle_limits(int64_t fallback);

  TranslatorOptions options_;
  std::unique_ptr<nn::Transformer> owned_model_;  // set when loaded from a checkpoint
  nn::Transformer* model_ = nullptr;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  size_t cut_lines_ = 0;  // lines cut since the last report_cut_lines()
};

}  // namespace cmha::eval
