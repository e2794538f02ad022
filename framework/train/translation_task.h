#pragma once
// Machine translation with the encoder-decoder transformer on a line-aligned
// parallel corpus (data.train_prefix / data.valid_prefix + "." + language).
// A joint SentencePiece model over both training sides is trained once per
// run directory (<train.save_dir>/spm.model) and reused; each split is encoded
// once into memory-mapped token caches (<train.save_dir>/cache/) that are
// rebuilt when the corpus or the SentencePiece model changes; a start or
// resume with them in place reads no corpus (data/corpus_token_cache.h) and
// each rank touches only the sentences of its own batches. Batches hold
// about data.max_tokens tokens (data/token_batches.h); the loss is the
// label-smoothed cross-entropy summed over the non-padding target tokens.
#include <memory>
#include <optional>

#include "data/sentencepiece_vocab.h"
#include "data/token_batches.h"
#include "data/token_cache.h"
#include "eval/translator.h"
#include "nn/transformer.h"
#include "run/recipe.h"
#include "train/task.h"

namespace cmha::train {

// The final evaluation of one translation checkpoint, without its run:
// translated with its recipe's decoding (and the SentencePiece model beside
// it) from data.test_prefix into out_dir/test.<target>.hyp, and scored as
// final_evaluation scores a run (bleu, bleu_compound, ...). A recipe without a
// test split is an error.
nlohmann::json score_translation_checkpoint(const std::string& checkpoint, const std::string& out_dir);

class TranslationTask : public Task {
 public:
  TranslationTask(const run::Recipe& recipe, Generator& init_gen, int rank = 0, int world = 1);
  nn::Module& model() override { return *model_; }
  const char* unit_name() const override { return "tokens"; }
  void start_epoch(int64_t epoch) override;
  bool has_next_batch() const override { return position_ < static_cast<int64_t>(batches_.size()); }
  BatchLoss next_batch_loss() override;
  int64_t batches_per_epoch() const override { return batches_.size(); }
  // loss: label-smoothed (train.label_smoothing) cross-entropy per target token,
  // nll_loss: without smoothing, perplexity: exp(nll_loss), top1: % of
  // target tokens predicted right. Nats. With eval.valid_bleu also bleu:
  // sacreBLEU of the first eval.valid_sentences validation sources translated
  // (beam eval.valid_beam) against their references.
  std::map<std::string, double> validate() override;
  // With data.test_prefix: averages the last eval.average_last checkpoints of
  // the run into checkpoint_average.safetensors, translates the test source
  // with beam search into test.hyp, and returns sacreBLEU ("bleu", 13a) and
  // the paper's tokenized BLEU with compound splitting ("bleu_compound").
  nlohmann::json final_evaluation(const std::string& run_dir) override;
  nlohmann::json data_state() const override;
  void restore_data_state(const nlohmann::json& state) override;

  nn::Transformer& transformer() { return *model_; }
  const data::SentencePieceVocab& vocab() const { return *vocab_; }
  const data::PackedBatches& current_batches() const { return batches_; }
  const data::TokenCache& train_target() const { return train_tgt_; }
  // Whether the constructor encoded the splits (false: both caches were reused).
  bool encoded_caches() const { return encoded_; }
  // Whether a corpus was hashed again (its size or mtime differed from the cache's record).
  bool rehashed_corpus() const { return rehashed_; }

 private:
  std::shared_ptr<nn::Transformer> model_;
  Device device_;  // train.device: the model's, and each batch's once made
  std::unique_ptr<data::SentencePieceVocab> vocab_;
  data::TokenCache train_src_, train_tgt_, valid_src_, valid_tgt_;
  std::unique_ptr<data::TokenBatcher> train_batcher_;
  data::PackedBatches valid_batches_;
  float label_smoothing_;
  std::string spm_path_;
  // Validation BLEU (eval.valid_bleu): raw sources and references.
  std::vector<std::string> bleu_sources_, bleu_references_;
  int64_t valid_beam_ = 1;
  // The final evaluation's settings, read from the recipe up front so a
  // mistake fails before training, not after it.
  struct FinalEvaluation {
    std::string test_prefix, source_lang, target_lang;
    int64_t average_last = 5;
    eval::TranslatorOptions decoding;  // recipe_translator_options
  } final_;
  int rank_, world_;
  bool encoded_ = false, rehashed_ = false;
  int64_t epoch_ = -1, position_ = 0;
  data::PackedBatches batches_;  // this rank's batches of epoch_
  // On a GPU, the next training batch, made and sent while the GPU runs the
  // current one's forward pass (the copy from pinned memory does not wait).
  struct BatchAhead {
    int64_t epoch = -1, position = -1;
    data::TranslationBatch host, device;
  };
  std::optional<BatchAhead> ahead_;
  BatchAhead make_training_batch(int64_t position) const;
};

}  // namespace cmha::train
