#include "eval/translator.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "run/checkpoint.h"
#include "run/model_config.h"
#include "run/recipe.h"
#include "tensor/error.h"

namespace cmha::eval {

namespace fs = std::filesystem;

int64_t source_token_limit(const run::Recipe& recipe) {
  int64_t limit = recipe.integer("eval.max_source_tokens");
  if (limit == 0) limit = 4 * recipe.integer("data.max_len");
  if (recipe.string("model.positions") == "learned") limit = std::min(limit, recipe.integer("model.max_positions"));
  return limit;
}

TranslatorOptions recipe_translator_options(const run::Recipe& recipe, const DecodingOverrides& given) {
  TranslatorOptions o;
  o.spm_path = given.spm_path;
  o.search.beam = given.beam.value_or(recipe.integer("eval.beam"));
  o.search.lenpen = given.lenpen.value_or(recipe.real("eval.lenpen"));
  o.search.max_len_a = given.max_len_a.value_or(recipe.real("eval.max_len_a"));
  o.search.max_len_b = given.max_len_b.value_or(recipe.integer("eval.max_len_b"));
  o.search.nbest = given.nbest;
  o.max_tokens = given.max_tokens.value_or(recipe.integer("eval.max_tokens"));
  o.max_source_tokens = given.max_source_tokens.value_or(source_token_limit(recipe));
  return o;
}

void check_decoding_budget(int64_t beam, int64_t max_tokens, int64_t max_source_tokens) {
  const int64_t positions = beam * std::max(max_tokens, max_source_tokens);
  CMHA_CHECK(positions <= kMaxDecoderPositions,
             "beam " + std::to_string(beam) + " × " + std::to_string(std::max(max_tokens, max_source_tokens)) +
                 " tokens per batch is " + std::to_string(positions) + " decoder positions, more than the " +
                 std::to_string(kMaxDecoderPositions) + " that decoding holds in memory: lower the beam "
                 "(--beam, eval.beam), the tokens per batch (--max-tokens, eval.max_tokens) or the longest source "
                 "(--max-source-tokens, eval.max_source_tokens)");
}

std::string Translator::default_spm_path(const std::string& checkpoint) {
  const fs::path dir = fs::path(checkpoint).parent_path();
  return (dir.empty() ? fs::path("spm.model") : dir / "spm.model").string();
}

Translator::Translator(const std::string& checkpoint, const TranslatorOptions& options)
    : Translator(checkpoint, options.spm_path, [&](const run::Recipe&) { return options; }) {}

Translator::Translator(const std::string& checkpoint, const DecodingOverrides& overrides)
    : Translator(checkpoint, overrides.spm_path,
                 [&](const run::Recipe& recipe) { return recipe_translator_options(recipe, overrides); }) {}

Translator::Translator(const std::string& checkpoint, const std::string& spm_path,
                       const std::function<TranslatorOptions(const run::Recipe&)>& options_of) {
  std::error_code ec;
  CMHA_CHECK(fs::exists(checkpoint, ec) && !fs::is_directory(checkpoint, ec),
             fs::is_directory(checkpoint, ec) ? "checkpoint '" + checkpoint + "' is a directory, not a checkpoint file"
                                              : "checkpoint '" + checkpoint + "' does not exist");
  const std::string spm = spm_path.empty() ? default_spm_path(checkpoint) : spm_path;
  CMHA_CHECK(fs::is_regular_file(spm, ec),
             "SentencePiece model '" + spm + "' does not exist (training writes spm.model next to the checkpoints; "
             "pass --spm FILE to use another)");

  const run::Checkpoint ckpt = run::load_checkpoint(checkpoint);
  const run::Recipe recipe = run::Recipe::parse_stored(ckpt.recipe, checkpoint + " (recipe)");
  const std::string kind = recipe.string("model.kind");
  CMHA_CHECK(kind == "transformer", "checkpoint '" + checkpoint + "' holds a " + kind +
                                        " model, but translation needs a transformer (model.kind: transformer)");
  options_ = options_of(recipe);
  options_.spm_path = spm;
  CMHA_CHECK(options_.max_tokens >= 1, "translate: the token budget per batch must be at least 1");
  nn::TransformerConfig cfg = run::transformer_config(recipe);
  Generator gen(0);  // every weight is overwritten below
  owned_model_ = std::make_unique<nn::Transformer>(cfg, gen);
  model_ = owned_model_.get();
  std::map<std::string, Tensor> params;
  for (auto& [name, p] : model_->named_parameters()) params[name] = p;
  run::restore_weights(checkpoint, ckpt.weights, params);
  model_->eval();
  for (Tensor& p : model_->parameters()) p.set_requires_grad(false);
  load_vocabulary("checkpoint '" + checkpoint + "'");
  settle_limits(source_token_limit(recipe));
}

Translator::Translator(nn::Transformer& model, const TranslatorOptions& options) : options_(options), model_(&model) {
  CMHA_CHECK(!options_.spm_path.empty(), "a translator over a model in memory needs the SentencePiece model's path");
  CMHA_CHECK(std::filesystem::is_regular_file(options_.spm_path),
             "SentencePiece model '" + options_.spm_path + "' does not exist");
  CMHA_CHECK(options_.max_tokens >= 1, "translate: the token budget per batch must be at least 1");
  load_vocabulary("the model in training");
  settle_limits(model.config().positions == "learned" ? model.config().max_positions : kDefaultSourceTokens);
}

void Translator::settle_limits(int64_t fallback) {
  int64_t& limit = options_.max_source_tokens;
  CMHA_CHECK(limit >= 0, "translate: the source token limit must be at least 1, got " + std::to_string(limit));
  if (limit == 0) limit = fallback;
  if (model_->config().positions == "learned") limit = std::min(limit, model_->config().max_positions);
  limit = std::max<int64_t>(limit, 1);  // the EOS alone
  options_.search.max_len_cap = limit;  // the output is bounded like the source
  const eval::SearchOptions& s = options_.search;
  CMHA_CHECK(s.nbest >= 1 && s.nbest <= s.beam,
             "translate: an n-best list of " + std::to_string(s.nbest) + " (--nbest) needs a beam of at least that, " +
                 "but the beam is " + std::to_string(s.beam) + " (--beam, eval.beam)");
  check_decoding_budget(options_.search.beam, options_.max_tokens, limit);
}

void Translator::load_vocabulary(const std::string& model_name) {
  const std::string& spm = options_.spm_path;
  const nn::TransformerConfig& cfg = model_->config();
  sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = sp_->Load(spm);
  CMHA_CHECK(status.ok(), "SentencePiece model '" + spm + "' cannot be loaded: " + status.ToString());
  const int64_t pieces = sp_->GetPieceSize();
  CMHA_CHECK(pieces <= cfg.tgt_vocab, "SentencePiece model '" + spm + "' has " + std::to_string(pieces) +
                                          " pieces but " + model_name + " has a vocabulary of " +
                                          std::to_string(cfg.tgt_vocab) + ": they do not belong together");
  CMHA_CHECK(sp_->eos_id() >= 0, "SentencePiece model '" + spm + "' has no end-of-sentence piece (eos_id = -1)");
  eval::SearchOptions& s = options_.search;
  s.eos = sp_->eos_id();
  s.bos = sp_->bos_id() >= 0 ? sp_->bos_id() : s.eos;
  s.pad = sp_->pad_id();
  s.vocab_limit = pieces;
}

Translator::~Translator() = default;

std::vector<int64_t> Translator::encode(const std::string& line) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(line, &ids);
  CMHA_CHECK(status.ok(), "SentencePiece cannot encode a line: " + status.ToString());
  std::vector<int64_t> out(ids.begin(), ids.end());
  out.push_back(options_.search.eos);
  return out;
}

std::string Translator::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> v;
  v.reserve(ids.size());
  for (int64_t id : ids) v.push_back(static_cast<int>(id));
  return sp_->DecodeIds(v);
}

std::vector<eval::Hypothesis> Translator::translate_ids(const std::vector<std::vector<int64_t>>& sources) {
  std::vector<eval::Hypothesis> out;
  for (eval::NBest& n : search_ids(sources)) out.push_back(n.empty() ? eval::Hypothesis{} : std::move(n.front()));
  return out;
}

std::vector<eval::NBest> Translator::search_ids(const std::vector<std::vector<int64_t>>& sources) {
  autograd::NoGradGuard no_grad;
  if (sources.empty()) return {};
  const int64_t B = static_cast<int64_t>(sources.size());
  int64_t S = 1;
  for (const auto& s : sources) S = std::max<int64_t>(S, static_cast<int64_t>(s.size()));
  const int64_t pad_id = options_.search.pad >= 0 ? options_.search.pad : options_.search.eos;
  std::vector<int64_t> ids(static_cast<size_t>(B * S), pad_id);
  Tensor pad = Tensor::ones({B, S}, DType::b8);
  bool* p = pad.data<bool>();
  for (int64_t b = 0; b < B; ++b)
    for (size_t j = 0; j < sources[b].size(); ++j) {
      ids[b * S + static_cast<int64_t>(j)] = sources[b][j];
      p[b * S + static_cast<int64_t>(j)] = false;
    }
  return eval::generate(*model_, Tensor::from_vector_i64(ids, {B, S}), pad, options_.search);
}

std::vector<double> Translator::score(const std::vector<std::string>& sources, const std::vector<std::string>& targets,
                                      std::vector<int64_t>* tokens, const std::string& source_name,
                                      const std::string& target_name) {
  CMHA_CHECK(sources.size() == targets.size(), "score: " + std::to_string(sources.size()) + " sources but " +
                                                   std::to_string(targets.size()) + " targets");
  autograd::NoGradGuard no_grad;
  const eval::SearchOptions& so = options_.search;
  const int64_t pad_id = so.pad >= 0 ? so.pad : so.eos;
  std::vector<std::vector<int64_t>> src, tgt;  // tgt: pieces + EOS (the decoder's outputs)
  const int64_t limit = options_.max_source_tokens;
  auto checked = [&](std::vector<int64_t> ids, const std::string& name, size_t line) {
    CMHA_CHECK(static_cast<int64_t>(ids.size()) <= limit,
               name + " line " + std::to_string(line + 1) + " has " + std::to_string(ids.size()) +
                   " pieces (end of sentence included), more than the limit of " + std::to_string(limit) +
                   " (--max-source-tokens, eval.max_source_tokens)");
    return ids;
  };
  for (size_t i = 0; i < sources.size(); ++i) {
    src.push_back(checked(encode(sources[i]), source_name, i));
    tgt.push_back(checked(encode(targets[i]), target_name, i));
  }
  std::vector<double> logprob(sources.size(), 0.0);
  if (tokens) tokens->assign(sources.size(), 0);
  // Longest first; a batch holds at most max_tokens of max(source, target) padded lengths.
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto len = [&](size_t i) { return static_cast<int64_t>(std::max(src[i].size(), tgt[i].size())); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return len(a) > len(b); });
  for (size_t i = 0; i < order.size();) {
    size_t j = i + 1;
    while (j < order.size() && static_cast<int64_t>(j - i + 1) * len(order[i]) <= options_.max_tokens) ++j;
    const int64_t B = static_cast<int64_t>(j - i);
    int64_t S = 1, T = 1;
    for (size_t m = i; m < j; ++m) {
      S = std::max<int64_t>(S, static_cast<int64_t>(src[order[m]].size()));
      T = std::max<int64_t>(T, static_cast<int64_t>(tgt[order[m]].size()));
    }
    std::vector<int64_t> s_ids(static_cast<size_t>(B * S), pad_id), t_in(static_cast<size_t>(B * T), pad_id);
    Tensor src_pad = Tensor::ones({B, S}, DType::b8);
    bool* sp = src_pad.data<bool>();
    for (int64_t b = 0; b < B; ++b) {
      const auto& sv = src[order[i + b]];
      const auto& tv = tgt[order[i + b]];
      for (size_t k = 0; k < sv.size(); ++k) {
        s_ids[b * S + static_cast<int64_t>(k)] = sv[k];
        sp[b * S + static_cast<int64_t>(k)] = false;
      }
      t_in[b * T] = so.bos;  // decoder input: BOS + the target without its EOS
      for (size_t k = 0; k + 1 < tv.size(); ++k) t_in[b * T + static_cast<int64_t>(k) + 1] = tv[k];
    }
    // [B, T, V] log-probabilities of every next piece
    const Device dev = model_->parameters().front().device();
    Tensor lp = log_softmax(model_->forward(Tensor::from_vector_i64(s_ids, {B, S}).to(dev), src_pad.to(dev),
                                            Tensor::from_vector_i64(t_in, {B, T}).to(dev)),
                            -1)
                    .to(Device::cpu())
                    .contiguous();
    const int64_t V = lp.size(2);
    const float* p = lp.data<float>();
    for (int64_t b = 0; b < B; ++b) {
      const size_t idx = order[i + b];
      double sum = 0;
      for (size_t k = 0; k < tgt[idx].size(); ++k) sum += p[(b * T + static_cast<int64_t>(k)) * V + tgt[idx][k]];
      logprob[idx] = sum;
      if (tokens) (*tokens)[idx] = static_cast<int64_t>(tgt[idx].size());
    }
    i = j;
  }
  return logprob;
}

namespace {
constexpr size_t kNamedLines = 5;  // cut lines warned about one by one, then a count
}  // namespace

std::vector<std::string> Translator::translate(const std::vector<std::string>& lines,
                                               const std::function<void(size_t, size_t)>& on_batch,
                                               const std::string& input_name) {
  const std::vector<std::vector<Translation>> nbest = translate_part(lines, 0, input_name, on_batch);
  report_cut_lines(input_name);
  std::vector<std::string> out;
  out.reserve(nbest.size());
  for (const std::vector<Translation>& n : nbest) out.push_back(n.empty() ? std::string() : n.front().text);
  return out;
}

void Translator::report_cut_lines(const std::string& input_name) {
  if (cut_lines_ > kNamedLines)
    std::fprintf(stderr, "translate: %zu lines of %s in all were cut to %lld pieces\n", cut_lines_, input_name.c_str(),
                 static_cast<long long>(options_.max_source_tokens));
  cut_lines_ = 0;
}

std::vector<std::vector<Translation>> Translator::translate_part(const std::vector<std::string>& lines,
                                                                 size_t first_line, const std::string& input_name,
                                                                 const std::function<void(size_t, size_t)>& on_batch) {
  const int64_t limit = options_.max_source_tokens;
  std::vector<std::vector<int64_t>> sources;
  sources.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<int64_t> ids = encode(lines[i]);
    if (static_cast<int64_t>(ids.size()) > limit) {
      if (++cut_lines_ <= kNamedLines)
        std::fprintf(stderr, "translate: %s line %zu has %zu pieces (end of sentence included), more than the limit "
                     "of %lld (--max-source-tokens, eval.max_source_tokens): only its first %lld pieces are translated\n",
                     input_name.c_str(), first_line + i + 1, ids.size(), static_cast<long long>(limit),
                     static_cast<long long>(limit - 1));
      ids.resize(static_cast<size_t>(limit - 1));
      ids.push_back(options_.search.eos);
    }
    sources.push_back(std::move(ids));
  }
  // Longest first, so the largest batch comes first; stable for equal lengths.
  std::vector<size_t> order(lines.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() > sources[b].size(); });
  const size_t nbest = static_cast<size_t>(options_.search.nbest);
  std::vector<std::vector<Translation>> out(lines.size());
  size_t done = 0;
  for (size_t i = 0; i < order.size();) {
    // Sorted longest first: the batch's first sentence sets the padded length
    // and the longest output, so max(both) × sentences bounds the encoder and
    // (× beam) the decoder cache.
    const int64_t longest = static_cast<int64_t>(sources[order[i]].size());
    const int64_t width = std::max(longest, eval::max_output_length(longest, options_.search, model_->config()) + 1);
    size_t j = i + 1;
    while (j < order.size() && static_cast<int64_t>(j - i + 1) * width <= options_.max_tokens) ++j;
    std::vector<std::vector<int64_t>> batch;
    for (size_t m = i; m < j; ++m) batch.push_back(sources[order[m]]);
    const std::vector<eval::NBest> found = search_ids(batch);
    for (size_t m = i; m < j; ++m) {
      std::vector<Translation>& t = out[order[m]];
      for (const eval::Hypothesis& h : found[m - i]) {
        if (t.size() == nbest) break;
        t.push_back({decode(h.tokens), h.score, h.logprob});
      }
    }
    done += j - i;
    i = j;
    if (on_batch) on_batch(done, order.size());
  }
  return out;
}

}  // namespace cmha::eval
