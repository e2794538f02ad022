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
#include <string>
#include <vector>

#include "eval/beam_search.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace cmha::train {

struct TranslatorOptions {
  std::string spm_path;       // empty: default_spm_path(checkpoint)
  eval::SearchOptions search;       // bos/eos/pad/vocab_limit are taken from the SentencePiece model
  int64_t max_tokens = 4096;  // source tokens (padding included) per batch
};

class Translator {
 public:
  // Loads the weights and recipe of `checkpoint` and the SentencePiece model.
  // A missing file, a checkpoint that is not a transformer, or a
  // SentencePiece vocabulary larger than the model's is one cmha::Error.
  Translator(const std::string& checkpoint, const TranslatorOptions& options = {});
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
  // may throw to stop).
  std::vector<std::string> translate(const std::vector<std::string>& lines,
                                     const std::function<void(size_t, size_t)>& on_batch = {});
  // The best hypothesis of each source token sequence (ids with their EOS).
  std::vector<eval::Hypothesis> translate_ids(const std::vector<std::vector<int64_t>>& sources);

  // Teacher-forced log-probability (natural log) of each target given its
  // source: Σ log p over the target's pieces and its EOS. `tokens` (when
  // given) receives each target's length in pieces, EOS included.
  std::vector<double> score(const std::vector<std::string>& sources, const std::vector<std::string>& targets,
                            std::vector<int64_t>* tokens = nullptr);

  std::vector<int64_t> encode(const std::string& line) const;  // pieces + EOS
  std::string decode(const std::vector<int64_t>& ids) const;

  const nn::Transformer& model() const { return *model_; }
  const eval::SearchOptions& search_options() const { return options_.search; }
  const std::string& spm_path() const { return options_.spm_path; }

 private:
  // The SentencePiece model, the search's special ids and the source limit.
  void load_vocabulary(const std::string& model_name);

  TranslatorOptions options_;
  std::unique_ptr<nn::Transformer> owned_model_;  // set when loaded from a checkpoint
  nn::Transformer* model_ = nullptr;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  int64_t max_source_ = 0;  // 0: no limit (sinusoidal positions)
};

}  // namespace cmha::train
