#include "train/translation_task.h"

#include "run/device.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "autograd/accuracy.h"
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "data/corpus_token_cache.h"
#include "data/text_corpus.h"
#include "eval/bleu.h"
#include "eval/translator.h"
#include "run/average.h"
#include "run/checkpoint.h"
#include "run/model_config.h"
#include "run/run_dir.h"
#include "tensor/atomic_file.h"
#include "tensor/clock.h"

namespace cmha::train {

namespace fs = std::filesystem;

namespace {

// Bumped whenever what goes into a cache changes (not its file format: that has its own version).
constexpr uint64_t kCacheRecipe = 0x636d6861'74743031ull;  // "cmhatt01"

}  // namespace

TranslationTask::TranslationTask(const run::Recipe& r, Generator& init_gen, int rank, int world)
    : rank_(rank), world_(world) {
  const bool verbose = rank == 0;
  const nn::TransformerConfig cfg = run::transformer_config(r);
  const std::string save_dir = r.string("train.save_dir");
  const std::string src_lang = r.string("data.source_lang"), tgt_lang = r.string("data.target_lang");
  CMHA_CHECK(src_lang != tgt_lang, "data.source_lang and data.target_lang are both '" + src_lang + "'");
  label_smoothing_ = static_cast<float>(r.real("train.label_smoothing"));
  const uint64_t seed = static_cast<uint64_t>(r.integer("train.seed"));

  // A missing corpus most often means the preparation step has not run: say which one.
  for (const char* key : {"data.train_prefix", "data.valid_prefix"})
    for (const std::string& lang : {src_lang, tgt_lang}) {
      const std::string path = data::corpus_path(r.string(key), lang);
      CMHA_CHECK(fs::exists(path), std::string(key) + ": the corpus file '" + path +
                                       "' does not exist (data/prepare_local_en_de.sh builds the local corpus, "
                                       "data/prepare_wmt14_en_de.sh the WMT14 one)");
    }
  // The training corpus is read only to train the SentencePiece model and to (re)build its token caches; a
  // start or resume with both in place reads none of it (data/corpus_token_cache.h).
  const std::string train_src = data::corpus_path(r.string("data.train_prefix"), src_lang);
  const std::string train_tgt = data::corpus_path(r.string("data.train_prefix"), tgt_lang);
  const std::string valid_src = data::corpus_path(r.string("data.valid_prefix"), src_lang);
  const std::string valid_tgt = data::corpus_path(r.string("data.valid_prefix"), tgt_lang);
  final_.test_prefix = r.string("data.test_prefix");
  final_.source_lang = src_lang;
  final_.target_lang = tgt_lang;
  final_.average_last = r.integer("eval.average_last");
  final_.decoding = eval::recipe_translator_options(r);  // also what `cmha translate` uses on this run's checkpoints
  // Checked now, not after hours of training.
  eval::check_decoding_budget(std::max(final_.decoding.search.beam, valid_beam_), final_.decoding.max_tokens,
                        final_.decoding.max_source_tokens);
  if (!final_.test_prefix.empty()) {  // checked now: a missing test set should not surface after hours of training
    for (const std::string& lang : {src_lang, tgt_lang}) {
      const std::string path = data::corpus_path(final_.test_prefix, lang);
      CMHA_CHECK(fs::is_regular_file(path), "data.test_prefix: the test corpus file '" + path + "' does not exist");
    }
    // Honest model selection: validation BLEU and checkpoint_best must not see the test split.
    std::error_code ec;
    const std::string valid_file = data::corpus_path(r.string("data.valid_prefix"), tgt_lang),
                      test_file = data::corpus_path(final_.test_prefix, tgt_lang);
    CMHA_CHECK(!fs::equivalent(valid_file, test_file, ec) || r.boolean("data.valid_is_test"),
               "data.valid_prefix and data.test_prefix are the same corpus ('" + test_file +
                   "'): checkpoints would be chosen on the test split; give a separate validation corpus or set "
                   "data.valid_is_test: true to accept it");
  }

  data::SentencePieceOptions so;
  so.vocab_size = r.integer("model.vocab_size");
  so.model_type = r.string("data.spm_model_type");
  so.sample_sentences = r.integer("data.spm_sample_sentences");
  so.seed = seed;
  so.num_threads = omp_get_max_threads();
  const std::string spm_path = (fs::path(save_dir) / "spm.model").string();
  spm_path_ = spm_path;
  // A model trained from a checkpoint (train.init_from: a fine-tune, a compressed model) keeps its pieces:
  // a new SentencePiece model would give its embedding rows to other pieces.
  if (const std::string init = r.string("train.init_from"); rank == 0 && !init.empty() && !fs::exists(spm_path))
    CMHA_CHECK(run::copy_spm_model_beside(init, save_dir),
               "train.init_from: checkpoint '" + init + "' has no spm.model beside it, so its vocabulary is unknown "
               "(a new SentencePiece model would misplace its embeddings); copy the spm.model of the run that "
               "trained it next to it");
  if (rank != 0) data::wait_for_rank0([&] { return fs::exists(spm_path); }, "the SentencePiece model " + spm_path);
  const bool had_model = fs::exists(spm_path);
  data::ParallelCorpus train;  // read only to train the model
  std::vector<const std::string*> joint;
  if (!had_model) {
    train = data::read_parallel_corpus(r.string("data.train_prefix"), src_lang, tgt_lang);
    joint.reserve(2 * train.size());
    for (const auto& s : train.source) joint.push_back(&s);
    for (const auto& s : train.target) joint.push_back(&s);
  }
  const auto t0 = std::chrono::steady_clock::now();
  vocab_ = std::make_unique<data::SentencePieceVocab>(data::SentencePieceVocab::load_or_train(spm_path, so, joint));
  if (verbose && !had_model)
    std::fprintf(stderr, "data: trained a joint %s SentencePiece model of %lld pieces on %lld of %zu sentences in %.1f s: %s\n",
                 so.model_type.c_str(), static_cast<long long>(vocab_->size()),
                 static_cast<long long>(so.sample_sentences > 0 ? std::min<int64_t>(so.sample_sentences, joint.size())
                                                                : static_cast<int64_t>(joint.size())),
                 joint.size(), seconds_since(t0), spm_path.c_str());
  joint = {};  // the corpus is not kept: the token caches are what training reads
  train = {};
  CMHA_CHECK(vocab_->size() == cfg.src_vocab, "SentencePiece model '" + spm_path + "' has " +
                                                  std::to_string(vocab_->size()) + " pieces but model.vocab_size is " +
                                                  std::to_string(cfg.src_vocab));

  const std::string cache_dir = (fs::path(save_dir) / "cache").string();
  data::ParallelTokenCaches tc =
      data::load_or_encode_parallel(train_src, train_tgt, *vocab_, kCacheRecipe, cache_dir, "train", verbose);
  data::ParallelTokenCaches vc =
      data::load_or_encode_parallel(valid_src, valid_tgt, *vocab_, kCacheRecipe, cache_dir, "valid", verbose);
  encoded_ = tc.encoded || vc.encoded;
  rehashed_ = tc.rehashed || vc.rehashed;
  train_src_ = std::move(tc.src);
  train_tgt_ = std::move(tc.tgt);
  valid_src_ = std::move(vc.src);
  valid_tgt_ = std::move(vc.tgt);

  data::BatchingOptions bo;
  bo.max_tokens = r.integer("data.max_tokens");
  bo.max_len = r.integer("data.max_len");
  bo.shuffle_window = r.integer("data.shuffle_window");
  bo.seed = seed;
  bo.rank = rank;
  bo.world = world;
  CMHA_CHECK(cfg.positions != "learned" || bo.max_len <= cfg.max_positions,
             "data.max_len " + std::to_string(bo.max_len) + " is longer than model.max_positions " +
                 std::to_string(cfg.max_positions) + " of the learned position embeddings");
  // The lengths come from the caches' offsets, read in chunks (data/token_batches.h).
  const auto batcher_start = std::chrono::steady_clock::now();
  train_batcher_ = std::make_unique<data::TokenBatcher>(train_src_, train_tgt_, bo);
  const double batcher_seconds = seconds_since(batcher_start);
  data::BatchingOptions vo = bo;
  vo.rank = 0;
  vo.world = 1;
  const data::TokenBatcher valid_batcher(valid_src_, valid_tgt_, vo);
  valid_batches_ = valid_batcher.sorted_batches();
  if (verbose) {
    std::fprintf(stderr, "data: train %lld of %lld pairs, valid %lld of %lld (dropped %lld and %lld longer than data.max_len %lld)\n",
                 static_cast<long long>(train_batcher_->kept()), static_cast<long long>(train_batcher_->pairs()),
                 static_cast<long long>(valid_batcher.kept()), static_cast<long long>(valid_batcher.pairs()),
                 static_cast<long long>(train_batcher_->dropped()), static_cast<long long>(valid_batcher.dropped()),
                 static_cast<long long>(bo.max_len));
  }
  CMHA_CHECK(valid_batcher.kept() > 0, "no validation pair of '" + valid_src + "' is within data.max_len " +
                                           std::to_string(bo.max_len));
  if (r.boolean("eval.valid_bleu")) {  // the raw sentences, as BLEU needs them (a validation set is small)
    const data::ParallelCorpus valid = data::read_parallel_corpus(r.string("data.valid_prefix"), src_lang, tgt_lang);
    const int64_t limit = r.integer("eval.valid_sentences");
    const size_t n = limit > 0 ? std::min<size_t>(valid.size(), static_cast<size_t>(limit)) : valid.size();
    bleu_sources_.assign(valid.source.begin(), valid.source.begin() + static_cast<std::ptrdiff_t>(n));
    bleu_references_.assign(valid.target.begin(), valid.target.begin() + static_cast<std::ptrdiff_t>(n));
    valid_beam_ = r.integer("eval.valid_beam");
  }
  const auto plan_start = std::chrono::steady_clock::now();
  start_epoch(0);  // batches_per_epoch() is known before training starts
  if (verbose)
    std::fprintf(stderr, "data: lengths of %lld pairs read in %.2f s, epoch 0 planned in %.2f s (%lld batches a rank)\n",
                 static_cast<long long>(train_batcher_->pairs()), batcher_seconds, seconds_since(plan_start),
                 static_cast<long long>(batches_.size()));
  CMHA_CHECK(!batches_.empty(), "the training data make fewer batches than the " + std::to_string(world) +
                                    " ranks (" + std::to_string(train_batcher_->kept()) + " pairs kept)");
  model_ = std::make_shared<nn::Transformer>(cfg, init_gen);
  // Initialised on the CPU (the same numbers on every device), then moved.
  device_ = run::recipe_device(r);
  model_->to(device_);
}

namespace {
// The batch's tensors on `device` (ids, masks); the CPU batch keeps the host
// copy. They go through page-locked memory, so the copies do not make the
// host wait for the GPU.
data::TranslationBatch on_device(const data::TranslationBatch& b, Device device) {
  if (device.is_cpu()) return b;
  data::TranslationBatch d = b;
  d.src = b.src.pinned().to(device);
  d.src_pad = b.src_pad.pinned().to(device);
  d.tgt_in = b.tgt_in.pinned().to(device);
  d.tgt_out = b.tgt_out.pinned().to(device);
  return d;
}

// Correct top-1 predictions over the non-padding targets. pred [N] (any
// device), targets [N] host i64.
double count_correct(const Tensor& pred, const Tensor& targets) {
  const auto p = pred.to_i64_vector();
  const int64_t* y = targets.data<int64_t>();
  double correct = 0;
  for (size_t i = 0; i < p.size(); ++i) correct += y[i] != data::SentencePieceVocab::kPad && p[i] == y[i];
  return correct;
}
}  // namespace

void TranslationTask::start_epoch(int64_t epoch) {
  if (epoch != epoch_) batches_ = train_batcher_->epoch_batches(epoch);
  epoch_ = epoch;
  position_ = 0;
  ahead_.reset();
}

TranslationTask::BatchAhead TranslationTask::make_training_batch(int64_t position) const {
  BatchAhead b;
  b.epoch = epoch_;
  b.position = position;
  b.host = data::make_batch(train_src_, train_tgt_, batches_[position],
                            data::SentencePieceVocab::kPad, data::SentencePieceVocab::kBos,
                            data::SentencePieceVocab::kEos);
  b.device = on_device(b.host, device_);
  return b;
}

BatchLoss TranslationTask::next_batch_loss() {
  CMHA_CHECK(has_next_batch(), "TranslationTask: no batch left in epoch " + std::to_string(epoch_));
  const int64_t at = position_++;
  const bool was_ahead = ahead_ && ahead_->epoch == epoch_ && ahead_->position == at;
  const BatchAhead batch = was_ahead ? std::move(*ahead_) : make_training_batch(at);
  ahead_.reset();
  if (was_ahead) await_copies_ahead(device_);
  const data::TranslationBatch& b = batch.device;
  model_->train();
  Tensor states = model_->forward_states(b.src, b.src_pad, b.tgt_in);  // [B, T, D]
  // The output projection and the loss in one op: no [B·T, V] logits stored.
  const LinearCrossEntropy fused =
      linear_cross_entropy(states.reshape({-1, states.size(2)}), model_->output_weight, b.tgt_out.reshape({-1}),
                           label_smoothing_, data::SentencePieceVocab::kPad, Reduction::sum);
  BatchLoss out;
  out.loss_sum = fused.loss;
  out.units = b.tgt_tokens;
  // Of the [B·T] predictions, counted on the device and read at the trainer's log cadence.
  out.correct_count = cmha::count_correct(fused.predictions, b.tgt_out.reshape({-1}), data::SentencePieceVocab::kPad);
  // The forward pass is queued: make and send the next batch while the GPU runs it.
  if (!device_.is_cpu() && has_next_batch()) {
    CopyAheadScope ahead;
    ahead_ = make_training_batch(position_);
  }
  return out;
}

std::map<std::string, double> TranslationTask::validate() {
  autograd::NoGradGuard no_grad;
  model_->eval();
  double loss = 0, nll = 0, tokens = 0, correct = 0;
  for (const data::Batch idx : valid_batches_) {
    const data::TranslationBatch host = data::make_batch(valid_src_, valid_tgt_, idx, data::SentencePieceVocab::kPad,
                                                         data::SentencePieceVocab::kBos, data::SentencePieceVocab::kEos);
    const data::TranslationBatch b = on_device(host, device_);
    Tensor logits = model_->forward(b.src, b.src_pad, b.tgt_in);
    const int64_t V = logits.size(2);
    Tensor flat = logits.reshape({-1, V});
    Tensor target = b.tgt_out.reshape({-1});
    nll += cross_entropy(flat, target, 0.0f, data::SentencePieceVocab::kPad, Reduction::sum).item();
    loss += label_smoothing_ > 0
                ? cross_entropy(flat, target, label_smoothing_, data::SentencePieceVocab::kPad, Reduction::sum).item()
                : 0.0;
    tokens += static_cast<double>(b.tgt_tokens);
    correct += count_correct(argmax(flat, 1), host.tgt_out.reshape({-1}));
  }
  if (label_smoothing_ <= 0) loss = nll;
  const double n = std::max(tokens, 1.0);
  std::map<std::string, double> metrics{{"loss", loss / n},
                                        {"nll_loss", nll / n},
                                        {"perplexity", std::exp(nll / n)},
                                        {"top1", 100.0 * correct / n}};
  if (!bleu_sources_.empty()) {
    eval::TranslatorOptions o;
    o.spm_path = spm_path_;
    o.search.beam = valid_beam_;
    o.max_tokens = final_.decoding.max_tokens;
    o.max_source_tokens = final_.decoding.max_source_tokens;
    eval::Translator translator(*model_, o);
    metrics["bleu"] = eval::corpus_bleu(translator.translate(bleu_sources_), bleu_references_).score;
  }
  model_->train();
  return metrics;
}

namespace {

// `checkpoint` translated from <test_prefix>.<source> with `decoding` (its spm_path set) into
// out_dir/test.<target>.hyp, and scored against <test_prefix>.<target>: sacreBLEU and the paper's tokenized BLEU.
nlohmann::json score_test_split(const std::string& test_prefix, const std::string& source_lang,
                                const std::string& target_lang, const eval::TranslatorOptions& decoding,
                                const std::string& checkpoint, const std::string& out_dir) {
  const auto t0 = std::chrono::steady_clock::now();
  const data::ParallelCorpus test = data::read_parallel_corpus(test_prefix, source_lang, target_lang);
  eval::Translator translator(checkpoint, decoding);
  const std::vector<std::string> hyps = translator.translate(test.source, {}, "'" + test.source_path + "'");
  fs::create_directories(out_dir);
  const std::string hyp_path = (fs::path(out_dir) / ("test." + target_lang + ".hyp")).string();
  {
    AtomicFile out(hyp_path);
    for (const std::string& h : hyps) out.write(h + '\n');
    out.commit();
  }
  const eval::BleuScore sacre = eval::corpus_bleu(hyps, test.target);
  eval::BleuOptions compound;  // the paper's tokenized BLEU: ##AT## compound split, no smoothing
  compound.compound_split = true;
  compound.smooth = "none";
  const eval::BleuScore tokenized = eval::corpus_bleu(hyps, test.target, compound);
  const double seconds = seconds_since(t0);
  std::fprintf(stderr, "eval: %zu test sentences of %s translated (beam %lld, lenpen %g) into %s in %.1f s\n",
               hyps.size(), test.source_path.c_str(), static_cast<long long>(decoding.search.beam),
               decoding.search.lenpen, hyp_path.c_str(), seconds);
  // The lines `cmha bleu REF -i HYP` prints (without and with --compound-split -s none).
  const std::string sacre_line = sacre.result().text();
  const std::string tokenized_line = tokenized.result().text();
  std::fprintf(stderr, "eval: %s\n", sacre_line.c_str());
  std::fprintf(stderr, "eval: tokenized BLEU with compound splitting: %s\n", tokenized_line.c_str());
  return {{"bleu", sacre.score},
          {"bleu_compound", tokenized.score},
          {"bleu_line", sacre_line},
          {"bleu_compound_line", tokenized_line},
          {"test_sentences", hyps.size()},
          {"test_source", test.source_path},
          {"hypotheses", hyp_path},
          {"beam", decoding.search.beam},
          {"lenpen", decoding.search.lenpen},
          {"seconds", seconds}};
}

}  // namespace

nlohmann::json TranslationTask::final_evaluation(const std::string& run_dir) {
  if (final_.test_prefix.empty()) return nlohmann::json::object();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> paths = run::update_checkpoints(run_dir);
  CMHA_CHECK(!paths.empty(), "final evaluation: run directory '" + run_dir + "' holds no checkpoint_<update>.safetensors");
  if (static_cast<int64_t>(paths.size()) > final_.average_last) paths.erase(paths.begin(), paths.end() - final_.average_last);
  const std::string averaged = (fs::path(run_dir) / "checkpoint_average.safetensors").string();
  run::save_checkpoint(averaged, run::average_checkpoints(paths));
  std::fprintf(stderr, "eval: averaged %zu checkpoints (%s ... %s) into %s\n", paths.size(),
               fs::path(paths.front()).filename().c_str(), fs::path(paths.back()).filename().c_str(), averaged.c_str());
  eval::TranslatorOptions o = final_.decoding;
  o.spm_path = spm_path_;
  nlohmann::json out =
      score_test_split(final_.test_prefix, final_.source_lang, final_.target_lang, o, averaged, run_dir);
  out["checkpoints_averaged"] = paths.size();
  out["averaged_checkpoint"] = averaged;
  out["seconds"] = seconds_since(t0);
  return out;
}

nlohmann::json score_translation_checkpoint(const std::string& checkpoint, const std::string& out_dir) {
  const run::Recipe r = run::Recipe::parse_stored(run::load_checkpoint(checkpoint).recipe, checkpoint + " (recipe)");
  const std::string test_prefix = r.string("data.test_prefix");
  CMHA_CHECK(!test_prefix.empty(), "the recipe of '" + checkpoint +
                                       "' names no test split (data.test_prefix is empty), so there is no BLEU to "
                                       "score; give data.test_prefix=PREFIX");
  return score_test_split(test_prefix, r.string("data.source_lang"), r.string("data.target_lang"),
                          eval::recipe_translator_options(r), checkpoint, out_dir);
}

nlohmann::json TranslationTask::data_state() const {
  return {{"epoch", epoch_}, {"position", position_}, {"batches", batches_.size()},
          {"world", world_}};
}

void TranslationTask::restore_data_state(const nlohmann::json& s) {
  start_epoch(s.at("epoch").get<int64_t>());
  int64_t position = s.at("position").get<int64_t>();
  const int64_t saved_world = s.value("world", int64_t{1});
  if (saved_world != world_) {
    // Batches are dealt round-robin from one global order: `position` batches on each of
    // saved_world ranks is position·saved_world of them, re-dealt to this world.
    position = position * saved_world / world_;
  } else if (s.contains("batches") && s.at("batches").get<int64_t>() != batches_.size() &&
             rank_ == 0)
    std::fprintf(stderr,
                 "data: warning: the checkpoint's epoch %lld had %lld batches, this recipe makes %lld (data.max_tokens, "
                 "data.max_len, the corpus or the ranks changed): the resume is not exact\n",
                 static_cast<long long>(epoch_), static_cast<long long>(s.at("batches").get<int64_t>()),
                 static_cast<long long>(batches_.size()));
  position_ = std::min<int64_t>(position, batches_.size());
  ahead_.reset();
}

}  // namespace cmha::train
