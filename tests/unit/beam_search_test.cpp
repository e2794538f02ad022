// Beam search and greedy decoding (eval/beam_search), the translator
// (eval/translator) and the `cmha translate` command (`cmha bleu`: bleu_cli_test.cpp).
#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "eval/beam_search.h"
#include "eval/translator.h"
#include "run/checkpoint.h"
#include "run/model_config.h"
#include "run/recipe.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"

// Exported by libsentencepiece but declared in no installed header.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
int GetMinLogLevel();
}  // namespace sentencepiece::logging

using namespace cmha;
using namespace cmha::eval;
using cmha::eval::Translator;  // the translator is the training side's (it loads checkpoints)
using cmha::eval::TranslatorOptions;
using nn::AttentionConfig;
using nn::Transformer;
using nn::TransformerConfig;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kVocab = 13;

AttentionConfig tiny_attention(const std::string& type) {
  AttentionConfig c;
  c.type = type;
  c.heads = 2;
  c.key_dim = type == "collaborative" ? 6 : 8;
  c.value_dim = 8;
  c.kv_heads = 1;
  if (type == "talking_heads") c.talking_init = "normal";
  if (type == "collaborative") c.mixing_init = "normal";
  return c;
}

TransformerConfig tiny_config(const std::string& enc, const std::string& dec, const std::string& cross,
                              bool pre_norm = false, const std::string& positions = "sinusoidal") {
  TransformerConfig c;
  c.src_vocab = c.tgt_vocab = kVocab;
  c.d_model = 8;
  c.ffn_dim = 16;
  c.encoder_layers = c.decoder_layers = 2;
  c.pre_norm = pre_norm;
  c.encoder_final_norm = c.decoder_final_norm = pre_norm;
  c.dropout = 0.0f;
  c.positions = positions;
  c.max_positions = 64;
  c.encoder_attention = tiny_attention(enc);
  c.decoder_attention = tiny_attention(dec);
  c.cross_attention = tiny_attention(cross);
  return c;
}

struct NamedModel {
  std::unique_ptr<Transformer> net;
  std::string name;
};

// Every attention type in every place at least once; both norms; both position kinds.
std::vector<NamedModel> tiny_models() {
  struct Spec {
    const char *enc, *dec, *cross;
    bool pre_norm;
    const char* positions;
  };
  const Spec specs[] = {{"concat", "concat", "concat", false, "sinusoidal"},
                        {"collaborative", "collaborative", "collaborative", false, "sinusoidal"},
                        {"talking_heads", "grouped", "collaborative", true, "learned"},
                        {"grouped", "collaborative", "talking_heads", false, "sinusoidal"}};
  std::vector<NamedModel> out;
  uint64_t seed = 11;
  for (const Spec& s : specs) {
    Generator gen(seed++);
    NamedModel m{std::make_unique<Transformer>(tiny_config(s.enc, s.dec, s.cross, s.pre_norm, s.positions), gen),
            std::string(s.enc) + "/" + s.dec + "/" + s.cross};
    // Sharper output distributions than the initialisation's near-uniform
    // ones, so that the search has real choices to make.
    {
      autograd::NoGradGuard no_grad;
      Tensor w = m.net->output_weight;
      w.copy_(mul_scalar(w, 4.0f));
    }
    m.net->eval();
    out.push_back(std::move(m));
  }
  return out;
}

// Source sentences: ids in [3, kVocab), each ending with EOS (2).
std::vector<std::vector<int64_t>> sources() {
  return {{3, 4, 5, 2}, {7, 8, 9, 10, 11, 12, 2}, {6, 2}, {12, 3, 9, 4, 10, 2}, {5, 5, 8, 2}};
}

// Pads sentences into src [B, S] (padding id 1) and src_pad b8 [B, S].
std::pair<Tensor, Tensor> batch_of(const std::vector<std::vector<int64_t>>& sents) {
  const int64_t B = static_cast<int64_t>(sents.size());
  int64_t S = 0;
  for (const auto& s : sents) S = std::max<int64_t>(S, static_cast<int64_t>(s.size()));
  std::vector<int64_t> ids(static_cast<size_t>(B * S), 1);
  Tensor pad = Tensor::ones({B, S}, DType::b8);
  for (int64_t b = 0; b < B; ++b)
    for (size_t j = 0; j < sents[b].size(); ++j) {
      ids[b * S + static_cast<int64_t>(j)] = sents[b][j];
      pad.data<bool>()[b * S + static_cast<int64_t>(j)] = false;
    }
  return {Tensor::from_vector_i64(ids, {B, S}), pad};
}

SearchOptions options(int64_t beam, double lenpen, double a, int64_t b, int64_t vocab_limit = 0) {
  SearchOptions o;
  o.vocab_limit = vocab_limit;
  o.beam = beam;
  o.lenpen = lenpen;
  o.max_len_a = a;
  o.max_len_b = b;
  o.bos = 0;  // distinct from EOS, so that banning BOS is exercised
  o.eos = 2;
  o.pad = 1;
  return o;
}

std::string str(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += std::to_string(x) + " ";
  return s;
}

// The same n-best lists: tokens exactly, scores to float precision.
void expect_same(const std::vector<NBest>& actual, const std::vector<NBest>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t s = 0; s < actual.size(); ++s) {
    ASSERT_FALSE(actual[s].empty()) << what << " sentence " << s;
    ASSERT_FALSE(expected[s].empty()) << what << " sentence " << s;
    EXPECT_EQ(actual[s].size(), expected[s].size()) << what << " sentence " << s;
    for (size_t h = 0; h < std::min(actual[s].size(), expected[s].size()); ++h) {
      EXPECT_EQ(str(actual[s][h].tokens), str(expected[s][h].tokens)) << what << " sentence " << s << " hyp " << h;
      EXPECT_NEAR(actual[s][h].score, expected[s][h].score, 1e-4) << what << " sentence " << s << " hyp " << h;
      EXPECT_NEAR(actual[s][h].logprob, expected[s][h].logprob, 1e-4) << what << " sentence " << s << " hyp " << h;
    }
  }
}

// The slow reference: one sentence alone, the whole decoder rerun on every
// prefix at every step (no cache), every candidate scored and sorted.
NBest reference_beam_search(const Transformer& model, const std::vector<int64_t>& src_ids, const SearchOptions& o) {
  autograd::NoGradGuard no_grad;
  const int64_t S = static_cast<int64_t>(src_ids.size()), k = o.beam;
  const Tensor src = Tensor::from_vector_i64(src_ids, {1, S});
  const Tensor pad = Tensor::zeros({1, S}, DType::b8);
  const Tensor memory = model.encode(src, pad);
  const int64_t max_len = max_output_length(S, o, model.config());
  struct Beam {
    std::vector<int64_t> prefix;
    double logprob;
  };
  struct Cand {
    double score;
    int64_t beam, token;
  };
  std::vector<Beam> beams{{{o.bos}, 0.0}};
  NBest finished;
  for (int64_t t = 0;; ++t) {
    const int64_t n = static_cast<int64_t>(beams.size()), T = t + 1;
    std::vector<int64_t> ids;
    for (const Beam& b : beams) ids.insert(ids.end(), b.prefix.begin(), b.prefix.end());
    const Tensor logits = model.decode(Tensor::from_vector_i64(ids, {n, T}), concat(std::vector<Tensor>(n, memory), 0),
                                       concat(std::vector<Tensor>(n, pad), 0));
    const Tensor lp = log_softmax(logits.select(1, T - 1), -1).contiguous();
    const int64_t V = lp.size(1);
    std::vector<Cand> cands;  // in flat order (beam, token): a stable sort breaks ties by it
    for (int64_t b = 0; b < n; ++b)
      for (int64_t v = 0; v < V; ++v) {
        if (t >= max_len && v != o.eos) continue;
        if (v == o.pad || (v == o.bos && o.bos != o.eos) || (o.vocab_limit > 0 && v >= o.vocab_limit)) continue;
        const double x = lp.data<float>()[b * V + v];
        if (std::isinf(x)) continue;
        cands.push_back({beams[b].logprob + x, b, v});
      }
    std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.score > b.score; });
    if (cands.size() > static_cast<size_t>(2 * k)) cands.resize(static_cast<size_t>(2 * k));
    std::vector<Beam> next;
    for (size_t c = 0; c < cands.size(); ++c) {
      const Beam& parent = beams[cands[c].beam];
      if (cands[c].token == o.eos) {
        if (c < static_cast<size_t>(k) && finished.size() < static_cast<size_t>(k)) {
          Hypothesis h;
          h.tokens.assign(parent.prefix.begin() + 1, parent.prefix.end());
          h.logprob = cands[c].score;
          h.score = cands[c].score / std::pow(static_cast<double>(h.tokens.size() + 1), o.lenpen);
          finished.push_back(h);
        }
      } else if (next.size() < static_cast<size_t>(k)) {
        Beam b = parent;
        b.prefix.push_back(cands[c].token);
        b.logprob = cands[c].score;
        next.push_back(b);
      }
    }
    bool done = finished.size() >= static_cast<size_t>(k) || t >= max_len || next.empty();
    if (!done && finished.size() >= static_cast<size_t>(o.nbest)) {
      // The o.nbest-th best finished score against the best any live beam could reach.
      std::vector<double> scores;
      for (const Hypothesis& h : finished) scores.push_back(h.score);
      std::sort(scores.rbegin(), scores.rend());
      double reachable = -INFINITY;
      const double len = o.lenpen >= 0 ? static_cast<double>(max_len + 1) : static_cast<double>(t + 2);
      for (const Beam& b : next) reachable = std::max(reachable, b.logprob / std::pow(len, o.lenpen));
      done = scores[static_cast<size_t>(o.nbest - 1)] >= reachable;
    }
    if (done) break;
    beams = std::move(next);
  }
  std::stable_sort(finished.begin(), finished.end(),
                   [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  return finished;
}

// A scorer with fixed next-token probabilities per prefix (the rest of the
// mass spread evenly over the other tokens).
class TableScorer : public StepScorer {
 public:
  TableScorer(int64_t vocab, std::map<std::vector<int64_t>, std::map<int64_t, double>> table)
      : V_(vocab), table_(std::move(table)) {}
  Tensor next_log_probs(const std::vector<std::vector<int64_t>>& prefixes) override {
    Tensor out = Tensor::empty({static_cast<int64_t>(prefixes.size()), V_});
    for (size_t r = 0; r < prefixes.size(); ++r) {
      std::map<int64_t, double> probs;
      auto it = table_.find(prefixes[r]);
      if (it != table_.end()) probs = it->second;
      double rest = 1.0;
      for (auto& [v, p] : probs) rest -= p;
      const double other = rest / static_cast<double>(V_ - static_cast<int64_t>(probs.size()));
      for (int64_t v = 0; v < V_; ++v)
        out.data<float>()[static_cast<int64_t>(r) * V_ + v] =
            static_cast<float>(std::log(probs.count(v) ? probs[v] : other));
    }
    ++steps;
    return out;
  }
  void select_rows(const std::vector<int64_t>&, bool) override {}
  int64_t steps = 0;

 private:
  int64_t V_;
  std::map<std::vector<int64_t>, std::map<int64_t, double>> table_;
};

}  // namespace

TEST(BeamSearch, GreedyEqualsBeamOne) {
  auto [src, pad] = batch_of(sources());
  for (const NamedModel& m : tiny_models()) {
    for (double lenpen : {0.0, 1.0}) {
      const SearchOptions o = options(1, lenpen, 1.0, 4);
      const auto greedy = greedy_search(*m.net, src, pad, o);
      const auto beam1 = beam_search(*m.net, src, pad, o);
      expect_same(greedy, beam1, m.name + " lenpen " + std::to_string(lenpen));
      for (const NBest& n : greedy) EXPECT_EQ(n.size(), 1u);
    }
  }
}

TEST(BeamSearch, CachedBatchedSearchMatchesUncachedReference) {
  const auto sents = sources();
  auto [src, pad] = batch_of(sents);
  int64_t longer_than_one = 0;
  for (const NamedModel& m : tiny_models()) {
    // The last: 3 tokens besides EOS for 5 beams, so some beams stay empty.
    for (const SearchOptions& o : {options(4, 0.6, 1.0, 3), options(3, 1.0, 0.0, 9), options(2, -0.5, 0.5, 2),
                                   options(5, 0.0, 0.0, 6, /*vocab_limit=*/6)}) {
      const auto actual = beam_search(*m.net, src, pad, o);
      std::vector<NBest> expected;
      for (const auto& s : sents) expected.push_back(reference_beam_search(*m.net, s, o));
      expect_same(actual, expected, m.name + " beam " + std::to_string(o.beam));
      for (const NBest& n : actual) longer_than_one += n.front().tokens.size() > 1;
    }
  }
  EXPECT_GT(longer_than_one, 10);  // the searches did search
}

// Exhaustive search: every output over a 3-token vocabulary (plus EOS) of at
// most 3 tokens, 40 in all, scored by the uncached model; a beam wide enough
// to keep them all must return the best of them.
TEST(BeamSearch, WideBeamFindsTheBruteForceBest) {
  const auto sents = sources();
  auto [src, pad] = batch_of(sents);
  for (const NamedModel& m : tiny_models()) {
    for (double lenpen : {0.0, 1.0}) {
      const SearchOptions o = options(64, lenpen, 0.0, 3, /*vocab_limit=*/6);  // tokens 3, 4, 5 and EOS
      const std::vector<NBest> found = beam_search(*m.net, src, pad, o);
      for (size_t s = 0; s < sents.size(); ++s) {
        autograd::NoGradGuard no_grad;
        const int64_t S = static_cast<int64_t>(sents[s].size());
        const Tensor one_src = Tensor::from_vector_i64(sents[s], {1, S});
        const Tensor one_pad = Tensor::zeros({1, S}, DType::b8);
        const Tensor memory = m.net->encode(one_src, one_pad);
        std::vector<std::vector<int64_t>> outputs{{}};
        for (size_t i = 0; i < outputs.size(); ++i)
          if (outputs[i].size() < 3)
            for (int64_t v : {3, 4, 5}) {
              outputs.push_back(outputs[i]);
              outputs.back().push_back(v);
            }
        ASSERT_EQ(outputs.size(), 40u);
        double best = -INFINITY;
        std::vector<int64_t> best_tokens;
        for (const auto& y : outputs) {
          std::vector<int64_t> in{o.bos};
          in.insert(in.end(), y.begin(), y.end());
          const int64_t T = static_cast<int64_t>(in.size());
          const Tensor lp = log_softmax(m.net->decode(Tensor::from_vector_i64(in, {1, T}), memory, one_pad), -1)
                                .contiguous();  // [1, T, V]
          const int64_t V = lp.size(2);
          double logprob = 0;
          for (int64_t t = 0; t < T; ++t)
            logprob += lp.data<float>()[t * V + (t + 1 < T ? y[static_cast<size_t>(t)] : o.eos)];
          const double score = length_penalized(logprob, T, lenpen);
          if (score > best) best = score, best_tokens = y;
        }
        EXPECT_EQ(str(found[s].front().tokens), str(best_tokens)) << m.name << " lenpen " << lenpen << " sentence " << s;
        EXPECT_NEAR(found[s].front().score, best, 1e-4) << m.name << " lenpen " << lenpen << " sentence " << s;
      }
    }
  }
}

// --nbest N: the early stop waits until no live beam can enter the N best,
// so every sentence gets N hypotheses (the top N exactly as a search without
// early stop ranks them) and the 1-best never changes.
TEST(BeamSearch, NbestWaitsForThatManyFinishedHypotheses) {
  const auto sents = sources();
  auto [src, pad] = batch_of(sents);
  for (const NamedModel& m : tiny_models()) {
    const std::vector<NBest> one = beam_search(*m.net, src, pad, options(4, 0.6, 1.0, 5));
    for (int64_t n : {2, 4}) {
      SearchOptions o = options(4, 0.6, 1.0, 5);
      o.nbest = n;
      const std::vector<NBest> actual = beam_search(*m.net, src, pad, o);
      std::vector<NBest> expected;
      for (const auto& s : sents) expected.push_back(reference_beam_search(*m.net, s, o));
      expect_same(actual, expected, m.name + " nbest " + std::to_string(n));
      for (size_t s = 0; s < actual.size(); ++s) {
        EXPECT_GE(actual[s].size(), static_cast<size_t>(n)) << m.name << " sentence " << s;
        EXPECT_EQ(str(actual[s].front().tokens), str(one[s].front().tokens)) << m.name << " sentence " << s;
      }
    }
  }
  // The table of LengthPenaltyChangesTheRanking, α = 0: alone, the empty output stops the search after
  // one step; an n-best list of 2 waits for "a" to finish too.
  const std::map<std::vector<int64_t>, std::map<int64_t, double>> table = {
      {{0}, {{1, 0.5}, {2, 0.45}, {3, 0.05}}}, {{0, 2}, {{1, 0.9}, {2, 0.05}, {3, 0.05}}}};
  SearchOptions o;
  o.beam = 2;
  o.bos = 0;
  o.eos = 1;
  o.pad = -1;
  o.lenpen = 0.0;
  o.nbest = 2;
  TableScorer scorer(4, table);
  const auto out = beam_search(scorer, {10}, o);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_GE(out[0].size(), 2u);
  EXPECT_TRUE(out[0][0].tokens.empty()) << str(out[0][0].tokens);
  EXPECT_EQ(str(out[0][1].tokens), "2 ");
  EXPECT_NEAR(out[0][1].logprob, std::log(0.45) + std::log(0.9), 1e-6);
  EXPECT_GT(scorer.steps, 1);
  // More than the beam, or a list from greedy search, is one sentence.
  o.nbest = 3;
  TableScorer again(4, table);
  EXPECT_NE(test::error_of([&] { beam_search(again, {10}, o); }).find("between 1 and the beam size 2"), std::string::npos);
  o.nbest = 2;
  EXPECT_NE(test::error_of([&] { greedy_search(again, {10}, o); }).find("not an n-best list of 2"), std::string::npos);
}

TEST(BeamSearch, BatchOfDifferentLengthsEqualsEachSentenceAlone) {
  const auto sents = sources();
  auto [src, pad] = batch_of(sents);
  for (const NamedModel& m : tiny_models()) {
    for (int64_t beam : {1, 4}) {
      const SearchOptions o = options(beam, 0.6, 1.0, 5);
      const auto batched = generate(*m.net, src, pad, o);
      std::vector<NBest> alone;
      for (const auto& s : sents) {
        auto [one, one_pad] = batch_of({s});
        alone.push_back(generate(*m.net, one, one_pad, o).front());
      }
      expect_same(batched, alone, m.name + " beam " + std::to_string(beam));
    }
  }
}

TEST(BeamSearch, LengthPenaltyChangesTheRanking) {
  // Tokens: 0 BOS, 1 EOS, 2 "a", 3 "b". After BOS: EOS 0.5, "a" 0.45;
  // after "a": EOS 0.9. Raw log-probabilities prefer the empty output
  // (log 0.5 = -0.69 > log 0.45 + log 0.9 = -0.90); normalised by length
  // (α = 1: -0.69 / 1 < -0.90 / 2) the longer one wins.
  const std::map<std::vector<int64_t>, std::map<int64_t, double>> table = {
      {{0}, {{1, 0.5}, {2, 0.45}, {3, 0.05}}}, {{0, 2}, {{1, 0.9}, {2, 0.05}, {3, 0.05}}}};
  SearchOptions o;
  o.beam = 2;
  o.bos = 0;
  o.eos = 1;
  o.pad = -1;
  for (double lenpen : {0.0, 1.0}) {
    o.lenpen = lenpen;
    TableScorer scorer(4, table);
    const auto out = beam_search(scorer, {10}, o);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_FALSE(out[0].empty());
    const Hypothesis& best = out[0].front();
    if (lenpen == 0.0) {
      EXPECT_TRUE(best.tokens.empty()) << str(best.tokens);
      EXPECT_NEAR(best.score, std::log(0.5), 1e-6);
      EXPECT_EQ(scorer.steps, 1);  // "a" (-0.80) can no longer beat -0.69: stopped early
    } else {
      EXPECT_EQ(str(best.tokens), "2 ");
      EXPECT_NEAR(best.logprob, std::log(0.45) + std::log(0.9), 1e-6);
      EXPECT_NEAR(best.score, (std::log(0.45) + std::log(0.9)) / 2, 1e-6);
      ASSERT_GE(out[0].size(), 2u);
      EXPECT_TRUE(out[0][1].tokens.empty());  // the empty output ranks second now
      EXPECT_NEAR(out[0][1].score, std::log(0.5), 1e-6);
    }
  }
  EXPECT_DOUBLE_EQ(length_penalized(-3.0, 4, 0.5), -1.5);
  EXPECT_DOUBLE_EQ(length_penalized(-3.0, 4, 0.0), -3.0);
}

TEST(BeamSearch, FewerContinuationsThanBeams) {
  // Tokens 0 BOS, 1 EOS, 2 "a", all equally likely: one continuation per
  // step for 4 beams. Every length up to the limit finishes once, and with
  // α = 1 all score log(1/3).
  SearchOptions o;
  o.beam = 4;
  o.lenpen = 1.0;
  o.bos = 0;
  o.eos = 1;
  o.pad = -1;
  TableScorer scorer(3, {});
  const auto out = beam_search(scorer, {3}, o);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out[0][i].tokens, std::vector<int64_t>(i, 2));
    EXPECT_NEAR(out[0][i].score, std::log(1.0 / 3), 1e-6);
  }
}

TEST(BeamSearch, MaximumLengthIsRespected) {
  // EOS is very unlikely everywhere: every hypothesis runs to its limit, where EOS is forced.
  SearchOptions o;
  o.bos = 0;
  o.eos = 1;
  o.pad = -1;
  const std::map<std::vector<int64_t>, std::map<int64_t, double>> table;  // uniform...
  struct NoEos : TableScorer {
    using TableScorer::TableScorer;
    Tensor next_log_probs(const std::vector<std::vector<int64_t>>& p) override {
      Tensor t = TableScorer::next_log_probs(p);
      for (int64_t r = 0; r < t.size(0); ++r) t.data<float>()[r * t.size(1) + 1] = -30.0f;
      return t;
    }
  };
  for (int64_t beam : {1, 3}) {
    o.beam = beam;
    NoEos scorer(5, table);
    const auto out = beam_search(scorer, {0, 3, 5}, o);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].front().tokens.size(), 0u);
    EXPECT_EQ(out[1].front().tokens.size(), 3u);
    EXPECT_EQ(out[2].front().tokens.size(), 5u);
    NoEos greedy_scorer(5, table);
    const auto greedy = greedy_search(greedy_scorer, {0, 3, 5}, o);
    EXPECT_EQ(greedy[1].front().tokens.size(), 3u);
    EXPECT_EQ(greedy[2].front().tokens.size(), 5u);
  }
  // On the models: ⌊a·src_len + b⌋ with src_len counting the source EOS.
  const auto sents = sources();
  auto [src, pad] = batch_of(sents);
  for (const NamedModel& m : tiny_models())
    for (int64_t beam : {1, 4}) {
      const SearchOptions mo = options(beam, 1.0, 0.5, 1);
      const auto out = generate(*m.net, src, pad, mo);
      for (size_t s = 0; s < sents.size(); ++s)
        for (const Hypothesis& h : out[s])
          EXPECT_LE(static_cast<int64_t>(h.tokens.size()), static_cast<int64_t>(0.5 * sents[s].size() + 1))
              << m.name << " sentence " << s;
    }
  TransformerConfig learned = tiny_config("concat", "concat", "concat", false, "learned");
  EXPECT_EQ(max_output_length(10, options(4, 1, 1.2, 3), learned), 15);
  EXPECT_EQ(max_output_length(100, options(4, 1, 1.0, 50), learned), 63);  // max_positions 64 - 1
  EXPECT_EQ(max_output_length(100, options(4, 1, 1.0, 50), tiny_config("concat", "concat", "concat")), 150);
}

TEST(BeamSearch, ReorderCacheMovesEveryTensorAlongTheBatch) {
  autograd::NoGradGuard no_grad;
  for (const NamedModel& m : tiny_models()) {
    auto [src, pad] = batch_of({{3, 4, 2}, {5, 6, 7, 2}, {8, 2}});
    const Tensor memory = m.net->encode(src, pad);
    nn::DecoderCache cache = m.net->new_cache();
    m.net->decode(Tensor::from_vector_i64({0, 0, 0}, {3, 1}), memory, pad, &cache);
    m.net->decode(Tensor::from_vector_i64({4, 5, 6}, {3, 1}), memory, pad, &cache);
    const nn::DecoderCache before = cache;
    const std::vector<int64_t> rows = {2, 0, 2};
    reorder_cache(cache, rows, /*include_static=*/false);
    int64_t checked = 0;
    for (size_t l = 0; l < cache.self_attn.size(); ++l) {
      for (auto [now, old, moved] : {std::tuple{&cache.self_attn[l], &before.self_attn[l], true},
                                     std::tuple{&cache.cross_attn[l], &before.cross_attn[l], false}}) {
        EXPECT_EQ(now->length, old->length);
        for (auto [a, b] : {std::pair{now->key, old->key}, std::pair{now->value, old->value}}) {
          ASSERT_EQ(a.defined(), b.defined());
          if (!a.defined()) continue;
          if (!moved) {
            EXPECT_TRUE(a.same(b)) << m.name;
            continue;
          }
          for (size_t i = 0; i < rows.size(); ++i)
            EXPECT_TRUE(test::all_close(a.select(0, static_cast<int64_t>(i)), b.select(0, rows[i]), 0, 0)) << m.name;
          ++checked;
        }
      }
    }
    EXPECT_GE(checked, 4);
    reorder_cache(cache, {1}, true);
    EXPECT_EQ(cache.cross_attn[0].key.size(0), 1);
    EXPECT_TRUE(test::all_close(cache.cross_attn[0].key.select(0, 0), before.cross_attn[0].key.select(0, 1), 0, 0));
  }
}

TEST(BeamSearch, SelectRowsCopiesRowsOfAnyDtypeAndLayout) {
  Tensor x = Tensor::from_vector({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  Tensor t = x.transpose(0, 1);  // [4, 3], not contiguous
  Tensor r = select_rows(t, {3, 0, 1, 2, 2});
  EXPECT_EQ(r.shape(), (Shape{5, 3}));
  EXPECT_EQ(r.to_float_vector(), (std::vector<float>{3, 7, 11, 0, 4, 8, 1, 5, 9, 2, 6, 10, 2, 6, 10}));
  Tensor b = Tensor::from_vector({1, 0, 0, 1}, {2, 2}).to(DType::b8);
  Tensor rb = select_rows(b, {1, 1, 0});
  EXPECT_EQ(rb.dtype(), DType::b8);
  EXPECT_EQ(rb.to_float_vector(), (std::vector<float>{0, 1, 0, 1, 1, 0}));
  EXPECT_THROW(select_rows(x, {3}), Error);
}

TEST(BeamSearch, RejectsAModelInTrainingMode) {
  Generator gen(1);
  Transformer model(tiny_config("concat", "concat", "concat"), gen);
  auto [src, pad] = batch_of({{3, 2}});
  EXPECT_THROW(beam_search(model, src, pad, options(2, 1, 1, 1)), Error);
}

// ---- the translator and the commands -------------------------------------

namespace {

using Result = test::CommandResult;
using test::read_lines;
using test::run_cmha;
using test::write_file;

using cmha::test::has;

// A tiny SentencePiece model (vocabulary ≤ 60; special ids as the training
// side's: pad 0, unk 1, bos 2, eos 3) trained on synthetic sentences,
// written to dir/spm.model.
void train_tiny_spm(const std::string& dir) {
  const char* words[] = {"the", "house", "is", "small", "a", "green", "tree", "stands", "near", "river",
                         "we", "see", "birds", "and", "old", "bridges", "every", "day", "under", "sky"};
  std::ostringstream text;
  for (int i = 0; i < 400; ++i) {
    const int n = 3 + i % 6;
    for (int w = 0; w < n; ++w) text << (w ? " " : "") << words[(i * 7 + w * 13 + w * w) % 20];
    text << ".\n";
  }
  write_file(dir + "/corpus.txt", text.str());
  const int log_level = sentencepiece::logging::GetMinLogLevel();
  sentencepiece::logging::SetMinLogLevel(1);  // warnings and errors only
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + dir + "/corpus.txt --model_prefix=" + dir + "/spm --vocab_size=60 --model_type=unigram "
      "--character_coverage=1.0 --hard_vocab_limit=false --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3");
  sentencepiece::logging::SetMinLogLevel(log_level);
  ASSERT_TRUE(status.ok()) << status.ToString();
}

const char* kTinyRecipe =
    "model: {kind: transformer, vocab_size: 64, d_model: 16, ffn_dim: 32, encoder_layers: 1, decoder_layers: 2,"
    " dropout: 0.0, attention: {type: collaborative, heads: 2, key_dim: 8}, cross_attention: {type: concat}}";

// A random-weight transformer checkpoint as a training run would save it.
void save_tiny_checkpoint(const std::string& path, const std::string& recipe_text) {
  const run::Recipe recipe = run::Recipe::parse(recipe_text);
  run::Checkpoint c;
  c.recipe = recipe.dump();
  if (recipe.string("model.kind") == "transformer") {
    Generator gen(5);
    Transformer model(run::transformer_config(recipe), gen);
    for (auto& [name, p] : model.named_parameters()) c.weights[name] = p.detach().clone();
  }
  run::save_checkpoint(path, c);
}

}  // namespace

TEST(Translator, TranslatesEveryLineInOrderWhateverTheBatching) {
  const std::string dir = test::temp_dir("translator");
  train_tiny_spm(dir);
  save_tiny_checkpoint(dir + "/checkpoint_1.safetensors", kTinyRecipe);
  TranslatorOptions opt;
  opt.search.max_len_a = 0;
  opt.search.max_len_b = 6;
  Translator big(dir + "/checkpoint_1.safetensors", opt);
  EXPECT_EQ(big.spm_path(), dir + "/spm.model");
  EXPECT_EQ(big.search_options().eos, 3);
  EXPECT_EQ(big.search_options().bos, 2);
  EXPECT_EQ(big.search_options().pad, 0);
  const std::vector<int64_t> enc = big.encode("the house is small.");
  ASSERT_GE(enc.size(), 2u);
  EXPECT_EQ(enc.back(), 3);
  EXPECT_EQ(big.decode({enc.begin(), enc.end() - 1}), "the house is small.");
  const std::vector<std::string> lines = {"the house is small.", "", "we see birds and old bridges every day.",
                                          "a tree.", "the green river stands near the old house under every sky."};
  const auto out = big.translate(lines);
  ASSERT_EQ(out.size(), lines.size());
  opt.max_tokens = 1;  // one sentence per batch
  Translator one(dir + "/checkpoint_1.safetensors", opt);
  size_t batches = 0;
  EXPECT_EQ(one.translate(lines, [&](size_t done, size_t total) {
    ++batches;
    EXPECT_EQ(done, batches);
    EXPECT_EQ(total, lines.size());
  }), out);
  EXPECT_EQ(batches, lines.size());
  fs::remove_all(dir);
}

TEST(Translator, ErrorsNameTheMissingFileOrTheWrongModel) {
  const std::string dir = test::temp_dir("translator_errors");
  try {
    Translator t(dir + "/nothing.safetensors");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "checkpoint '" + dir + "/nothing.safetensors' does not exist")) << e.what();
  }
  save_tiny_checkpoint(dir + "/vit.safetensors", "model: {kind: vit}");
  try {
    Translator t(dir + "/vit.safetensors");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "SentencePiece model '" + dir + "/spm.model' does not exist")) << e.what();
  }
  write_file(dir + "/spm.model", "not a model");
  try {
    Translator t(dir + "/vit.safetensors");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "holds a vit model")) << e.what();
  }
  fs::remove_all(dir);
}

TEST(TranslateCommand, TranslatesAFileAndStandardInput) {
  const std::string dir = test::temp_dir("cli_translate");
  train_tiny_spm(dir);
  save_tiny_checkpoint(dir + "/checkpoint_best.safetensors", kTinyRecipe);
  write_file(dir + "/in.txt", "the house is small.\n\nwe see birds.\na green tree stands near the river.\n");
  Result r = run_cmha("translate " + dir + "/checkpoint_best.safetensors --input " + dir + "/in.txt --output " + dir +
                      "/out.txt --beam 3 --lenpen 1 --max-len-a 0.5 --max-len-b 5 --threads 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "cmha translate: 4 sentences")) << r.output;
  const auto out = read_lines(dir + "/out.txt");
  EXPECT_EQ(out.size(), 4u);
  // Standard input to standard output (the summary goes to standard error).
  r = run_cmha("translate " + dir + "/checkpoint_best.safetensors --beam 1 --max-len-b 4 --spm " + dir +
               "/spm.model < " + dir + "/in.txt");
  ASSERT_EQ(r.code, 0) << r.output;
  std::istringstream lines(r.output);
  int translations = 0;
  for (std::string line; std::getline(lines, line);) translations += line.rfind("cmha translate: ", 0) != 0;
  EXPECT_EQ(translations, 4) << r.output;
  EXPECT_TRUE(has(r.output, "cmha translate: 4 sentences")) << r.output;
  fs::remove_all(dir);
}

TEST(TranslateCommand, ErrorsAreOneSentence) {
  const std::string dir = test::temp_dir("cli_translate_errors");
  Result r = run_cmha("translate /nonexistent/checkpoint.safetensors < /dev/null");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output, "cmha: checkpoint '/nonexistent/checkpoint.safetensors' does not exist\n");
  write_file(dir + "/checkpoint_3.safetensors", "whatever");
  r = run_cmha("translate " + dir + "/checkpoint_3.safetensors < /dev/null");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "SentencePiece model '" + dir + "/spm.model' does not exist")) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
  r = run_cmha("translate " + dir + "/checkpoint_3.safetensors --beam 0 < /dev/null");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "option '--beam' needs a whole number from 1 to 1024, not '0'")) << r.output;
  r = run_cmha("translate --help");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "--lenpen")) << r.output;
  fs::remove_all(dir);
}
