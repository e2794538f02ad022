// Concat → collaborative conversion: at full rank the converted layer has the
// original attention probabilities and outputs, and whole models (ViT,
// transformer with chosen places) their outputs; the content bias matches the
// original scores up to a per-row constant; the recipe records type, D̃k and
// the original scale; bad --layers choices are one sentence.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "compress/convert_attention.h"
#include "nn/attention/collaborative.h"
#include "nn/attention/concat.h"
#include "nn/transformer.h"
#include "nn/vit.h"
#include "run/model_config.h"
#include "support/check.h"

using namespace cmha;
using test::error_of;
using namespace cmha::compress;

namespace {

std::map<std::string, Tensor> weights_of(const nn::Module& m) {
  std::map<std::string, Tensor> w;
  for (auto& [name, p] : m.named_parameters()) w[name] = p.detach().clone();
  return w;
}

void randomise(nn::Module& m, uint64_t seed) {
  autograd::NoGradGuard ng;
  Generator gen(seed);
  for (auto& [name, p] : m.named_parameters()) uniform_(p, gen, -0.5f, 0.5f);
}

void load_weights(nn::Module& m, const std::map<std::string, Tensor>& w) {
  std::map<std::string, Tensor> params;
  for (auto& [name, p] : m.named_parameters()) params[name] = p;
  run::restore_weights("converted", w, params);  // every name and shape must match
}

// Pre-softmax scores [B, H, Tq, Tk] of each layer, from its parameters.
Tensor concat_scores(nn::ConcatAttention& a, const Tensor& x, const Tensor& y) {
  const int64_t H = a.config().heads;
  Tensor q = nn::split_heads(a.query_proj->forward(x), H), k = nn::split_heads(a.key_proj->forward(y), H);
  return mul_scalar(matmul(q, k.transpose(-1, -2)), a.scale());
}
Tensor collaborative_scores(nn::CollaborativeAttention& a, const Tensor& x, const Tensor& y) {
  const int64_t H = a.config().heads, R = a.shared_dim(), B = x.size(0), Tq = x.size(1), Tk = y.size(1);
  Tensor q = mul(a.query_proj->forward(x).view({B, 1, Tq, R}), a.mixing.view({1, H, 1, R}));  // [B, H, Tq, R]
  Tensor k = a.key_proj->forward(y).view({B, 1, Tk, R});
  Tensor bias = a.content_bias->forward(y).transpose(1, 2).reshape({B, H, 1, Tk});  // c_h · y
  return mul_scalar(add(matmul(q, k.transpose(-1, -2)), bias), a.scale());
}

struct LayerPair {
  std::shared_ptr<nn::ConcatAttention> concat;
  std::shared_ptr<nn::CollaborativeAttention> collab;
};

// A random concat layer (D = 16, H = 4, D_k = 24) and its conversion to width `shared`.
LayerPair converted_pair(int64_t shared) {
  Generator gen(1);
  nn::AttentionConfig c;
  c.heads = 4;
  c.key_dim = 24;
  LayerPair p;
  p.concat = std::make_shared<nn::ConcatAttention>(c, 16, gen);
  randomise(*p.concat, 2);
  auto w = weights_of(*p.concat);
  const LayerReport rep = convert_layer(w, "", 4, shared, CpOptions{});
  c.type = "collaborative";
  c.key_dim = rep.shared_dim;
  c.scale = p.concat->scale();
  p.collab = std::make_shared<nn::CollaborativeAttention>(c, 16, gen);
  load_weights(*p.collab, w);
  return p;
}

run::Recipe vit_recipe(const std::string& attention_type = "concat") {
  return run::Recipe::parse(
      "model: {kind: vit, image_size: 8, patch_size: 4, channels: 1, num_classes: 3, d_model: 16, depth: 2,\n"
      "        ffn_dim: 32, dropout: 0.0, drop_path: 0.0,\n"
      "        attention: {type: " + attention_type + ", heads: 4, key_dim: 24, mixing_init: normal}}\n");
}

run::Checkpoint checkpoint_of(const nn::Module& m, const run::Recipe& r) {
  run::Checkpoint c;
  c.weights = weights_of(m);
  c.recipe = r.dump();
  c.trainer = {{"update", 7}};
  return c;
}

}  // namespace

TEST(CompressConvert, FullRankLayerHasTheOriginalProbabilitiesAndOutputs) {
  autograd::NoGradGuard ng;
  for (int64_t shared : {24, 40}) {  // D̃k = D_k, and larger (capped at D_k)
    LayerPair p = converted_pair(shared);
    EXPECT_EQ(p.collab->shared_dim(), 24);
    const Tensor x = test::random_tensor({2, 5, 16}, 3), y = test::random_tensor({2, 7, 16}, 4);
    EXPECT_TRUE(test::all_close(softmax(collaborative_scores(*p.collab, x, y), -1),
                                softmax(concat_scores(*p.concat, x, y), -1), 1e-5f, 0));
    nn::AttentionMask mask;
    mask.key_padding = Tensor::zeros({2, 7}, DType::b8);
    mask.key_padding.data<bool>()[13] = true;  // the second sequence's last key is padding
    EXPECT_TRUE(test::all_close(p.collab->forward(x, y, mask), p.concat->forward(x, y, mask), 1e-5f, 0));
    mask = {};
    mask.causal = true;
    EXPECT_TRUE(test::all_close(p.collab->forward(y, y, mask), p.concat->forward(y, y, mask), 1e-5f, 0));
  }
}

TEST(CompressConvert, ContentBiasMatchesTheScoresUpToAPerRowConstant) {
  autograd::NoGradGuard ng;
  LayerPair p = converted_pair(24);
  const Tensor x = test::random_tensor({2, 5, 16}, 5), y = test::random_tensor({2, 7, 16}, 6);
  // The difference is x·W_Q b_K + b_Q·b_K per query (the dropped key bias):
  // constant along the keys, but not zero.
  const Tensor diff = sub(collaborative_scores(*p.collab, x, y), concat_scores(*p.concat, x, y));  // [B, H, Tq, Tk]
  const Tensor first = diff.slice(3, 0, 1).contiguous();
  EXPECT_TRUE(test::all_close(diff, first.expand(diff.shape()), 1e-5f, 0));
  float largest = 0;
  for (float v : first.to_float_vector()) largest = std::max(largest, std::abs(v));
  EXPECT_GT(largest, 1e-2f);
}

TEST(CompressConvert, LowRankLayerIsCollaborativeOfTheAskedWidth) {
  autograd::NoGradGuard ng;
  Generator gen(1);
  nn::AttentionConfig c;
  c.heads = 4;
  c.key_dim = 24;
  nn::ConcatAttention concat(c, 16, gen);
  auto w = weights_of(concat);
  CpOptions o;
  o.max_iters = 20;
  const LayerReport rep = convert_layer(w, "", 4, 10, o);
  EXPECT_FALSE(rep.exact);
  EXPECT_EQ(rep.shared_dim, 10);
  EXPECT_GT(rep.error, 0.0);
  EXPECT_LT(rep.error, 1.0);
  EXPECT_EQ(w.at("query.weight").shape(), (Shape{10, 16}));
  EXPECT_EQ(w.at("mixing").shape(), (Shape{4, 10}));
  EXPECT_EQ(w.at("content_bias.weight").shape(), (Shape{4, 16}));
  EXPECT_EQ(w.count("query.bias") + w.count("key.bias"), 0u);
}

TEST(CompressConvert, VitCheckpointKeepsItsOutputsAndScale) {
  autograd::NoGradGuard ng;
  const run::Recipe r = vit_recipe();
  Generator gen(4);
  nn::VisionTransformer model(run::vit_config(r), gen);
  randomise(model, 5);
  model.eval();
  CompressOptions opt;
  opt.shared_dim = 24;
  std::vector<LayerReport> reports;
  const run::Checkpoint out =
      compress_checkpoint(checkpoint_of(model, r), "in.safetensors", opt, [&](const LayerReport& l) { reports.push_back(l); });
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].prefix, "blocks.1.attn.");
  EXPECT_TRUE(reports[0].exact);
  EXPECT_TRUE(out.optimizer.empty());
  EXPECT_EQ(out.trainer.at("compressed_from"), "in.safetensors");
  const run::Recipe r2 = run::Recipe::parse(out.recipe);
  EXPECT_EQ(r2.string("model.attention.type"), "collaborative");
  EXPECT_EQ(r2.integer("model.attention.key_dim"), 24);
  EXPECT_NEAR(r2.real("model.attention.scale"), 1.0 / std::sqrt(6.0), 1e-8);  // concat's 1/√(D_k/H), kept
  nn::VisionTransformer converted(run::vit_config(r2), gen);
  load_weights(converted, out.weights);
  converted.eval();
  const Tensor images = test::random_tensor({3, 1, 8, 8}, 6);
  EXPECT_TRUE(test::all_close(converted.forward(images), model.forward(images), 1e-4f, 0));

  opt.shared_dim = 12;  // half: a recipe and weights that still build and load
  const run::Checkpoint half = compress_checkpoint(checkpoint_of(model, r), "in.safetensors", opt);
  const run::Recipe r3 = run::Recipe::parse(half.recipe);
  EXPECT_EQ(r3.integer("model.attention.key_dim"), 12);
  nn::VisionTransformer small(run::vit_config(r3), gen);
  load_weights(small, half.weights);
}

TEST(CompressConvert, TransformerPlacesAreChosenAndOutputsKept) {
  autograd::NoGradGuard ng;
  const run::Recipe r = run::Recipe::parse(
      "model: {kind: transformer, vocab_size: 11, d_model: 16, ffn_dim: 32, encoder_layers: 2, decoder_layers: 1,\n"
      "        dropout: 0.0, attention: {type: concat, heads: 4, key_dim: 24}}\n");
  Generator gen(7);
  nn::Transformer model(run::transformer_config(r), gen);
  randomise(model, 8);
  model.eval();
  CompressOptions opt;
  opt.shared_dim = 24;
  opt.places = {"encoder", "cross"};
  std::vector<std::string> prefixes;
  const run::Checkpoint out = compress_checkpoint(checkpoint_of(model, r), "t.safetensors", opt,
                                                    [&](const LayerReport& l) { prefixes.push_back(l.prefix); });
  EXPECT_EQ(prefixes, (std::vector<std::string>{"encoder.layers.0.self_attn.", "encoder.layers.1.self_attn.",
                                                "decoder.layers.0.cross_attn."}));
  const run::Recipe r2 = run::Recipe::parse(out.recipe);
  EXPECT_EQ(r2.string("model.encoder_attention.type"), "collaborative");
  EXPECT_EQ(r2.string("model.decoder_attention.type"), "concat");
  EXPECT_EQ(r2.string("model.cross_attention.type"), "collaborative");
  nn::Transformer converted(run::transformer_config(r2), gen);
  load_weights(converted, out.weights);
  converted.eval();
  const Tensor src = Tensor::from_vector_i64({1, 2, 3, 4, 5, 6, 7, 0}, {2, 4});
  Tensor pad = Tensor::zeros({2, 4}, DType::b8);
  pad.data<bool>()[7] = true;
  const Tensor tgt = Tensor::from_vector_i64({2, 3, 4, 5, 6, 7}, {2, 3});
  EXPECT_TRUE(test::all_close(converted.forward(src, pad, tgt), model.forward(src, pad, tgt), 1e-4f, 0));
}

TEST(CompressConvert, BadPlaceChoicesAreOneSentence) {
  const run::Recipe vit = vit_recipe();
  EXPECT_NE(error_of([&] { select_places(vit, {"cross"}); }).find("has no attention place 'cross' (it has: attention)"),
            std::string::npos);
  EXPECT_EQ(select_places(vit, {"vit"}).front().name, "attention");
  EXPECT_NE(error_of([&] { select_places(vit_recipe("collaborative"), {}); }).find("no concat attention layer"),
            std::string::npos);
  EXPECT_NE(error_of([&] { select_places(vit_recipe("grouped"), {"attention"}); })
                .find("model.attention.type is grouped; only concat attention can be compressed"),
            std::string::npos);
  EXPECT_NE(error_of([&] { select_places(vit, {"attention", "vit"}); }).find("twice"), std::string::npos);
  std::map<std::string, Tensor> w;
  EXPECT_NE(error_of([&] { convert_layer(w, "blocks.0.attn.", 4, 8, {}); })
                .find("no tensor 'blocks.0.attn.query.weight'"),
            std::string::npos);
}
