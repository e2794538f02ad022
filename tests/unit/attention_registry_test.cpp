// The attention registry (nn/attention/registry.h) and what reads it: the
// recipe keys, make_attention, the places and their weight names; and the
// mask and random kernels that took nn/'s element loops.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "backend/kernels.h"
#include "nn/attention/registry.h"
#include "nn/init.h"
#include "nn/positional.h"
#include "nn/transformer.h"
#include "nn/vit.h"
#include "run/model_config.h"
#include "run/options.h"
#include "support/check.h"

using namespace cmha;
using cmha::test::error_of;

TEST(AttentionRegistry, TypesAndKeysInRecipeOrder) {
  std::vector<std::string> types;
  for (const auto& t : nn::attention_types()) types.push_back(t.name);
  EXPECT_EQ(types, (std::vector<std::string>{"concat", "collaborative", "talking_heads", "grouped"}));
  EXPECT_EQ(nn::attention_type_list(), "concat, collaborative, talking_heads or grouped");
  std::vector<std::string> keys, init_only;
  for (const auto& k : nn::attention_keys()) {
    keys.push_back(k.name);
    if (k.init_only) init_only.push_back(k.name);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"type", "heads", "key_dim", "value_dim", "bias", "dropout", "scale",
                                            "mixing_init", "mixing_std", "talking_init", "talking_std", "kv_heads"}));
  EXPECT_EQ(init_only, (std::vector<std::string>{"mixing_init", "mixing_std", "talking_init", "talking_std"}));
  const nn::AttentionKey* type = nn::find_attention_key("type");
  ASSERT_NE(type, nullptr);
  EXPECT_EQ(type->default_value, "concat");
  EXPECT_EQ(type->choices, types);
}

TEST(AttentionRegistry, EveryPlaceHasEveryKeyInTheOptionRegistry) {
  for (const auto& place : nn::attention_places())
    for (const auto& k : nn::attention_keys()) {
      const run::OptionSpec* spec = run::find_option("model." + place.name + "." + k.name);
      ASSERT_NE(spec, nullptr) << place.name << "." << k.name;
      EXPECT_EQ(spec->choices, k.choices);
      EXPECT_EQ(spec->min, k.min.value_or(-run::kUnbounded));
      EXPECT_EQ(spec->max, k.max.value_or(run::kUnbounded));
      if (place.inherits.empty()) {
        EXPECT_EQ(spec->default_value, k.default_value);
        EXPECT_EQ(spec->help, k.help);
      } else {
        EXPECT_EQ(spec->inherit_from, "model." + place.inherits + "." + k.name);
        EXPECT_EQ(spec->help, k.help + " (" + place.role + "; inherits model.attention)");
      }
    }
}

TEST(AttentionRegistry, RecipeKeysReachTheConfig) {
  const run::Recipe r = run::Recipe::parse(
      "model: {attention: {type: grouped, heads: 6, kv_heads: 3, dropout: 0.25, bias: false, mixing_init: uniform},\n"
      "        cross_attention: {type: talking_heads, talking_init: normal, talking_std: 0.5}}\n");
  const nn::AttentionConfig enc = run::attention_config(r, "model.encoder_attention");
  EXPECT_EQ(enc.type, "grouped");
  EXPECT_EQ(enc.heads, 6);
  EXPECT_EQ(enc.kv_heads, 3);
  EXPECT_EQ(enc.dropout, 0.25f);
  EXPECT_FALSE(enc.bias);
  EXPECT_EQ(enc.mixing_init, "uniform");
  EXPECT_TRUE(enc.extra.empty());
  const nn::AttentionConfig cross = run::attention_config(r, "model.cross_attention");
  EXPECT_EQ(cross.type, "talking_heads");
  EXPECT_EQ(cross.talking_init, "normal");
  EXPECT_EQ(cross.talking_std, 0.5f);
  EXPECT_EQ(cross.heads, 6);  // inherited
}

TEST(AttentionRegistry, KeysWithoutAMemberLiveInExtra) {
  nn::AttentionKey k{.name = "window", .type = nn::AttentionKeyType::integer, .default_value = "4"};
  nn::AttentionConfig c;
  nn::set_attention_key(c, k, int64_t{7});
  EXPECT_EQ(c.extra_value<int64_t>("window"), 7);
  EXPECT_NE(error_of([&] { nn::set_attention_key(c, k, 1.5); }).find("a value of another type"), std::string::npos);
  EXPECT_NE(error_of([&] { c.extra_value<double>("window"); }).find("another type"), std::string::npos);
  // Not set and not registered: no default to fall back on.
  EXPECT_NE(error_of([&] { nn::AttentionConfig().extra_value<int64_t>("window"); }).find("no key 'window'"),
            std::string::npos);
  EXPECT_EQ(std::get<double>(nn::default_attention_value(*nn::find_attention_key("mixing_std"))), 1.0);
}

TEST(AttentionRegistry, UnknownTypeNamesTheChoices) {
  Generator gen(1);
  nn::AttentionConfig c;
  c.type = "linear";
  EXPECT_EQ(error_of([&] { nn::make_attention(c, 16, gen); }),
            "attention.type 'linear' is unknown; expected concat, collaborative, talking_heads or grouped");
  for (const auto& t : nn::attention_types()) {
    c.type = t.name;
    c.heads = 4;
    c.key_dim = 16;
    EXPECT_STREQ(nn::make_attention(c, 16, gen)->type(), t.name.c_str());
  }
}

TEST(AttentionRegistry, PlacesNameTheModelsWeights) {
  Generator gen(2);
  nn::TransformerConfig tc;
  tc.src_vocab = tc.tgt_vocab = 11;
  tc.d_model = 16;
  tc.ffn_dim = 32;
  tc.encoder_layers = 2;
  tc.decoder_layers = 1;
  for (auto* a : {&tc.encoder_attention, &tc.decoder_attention, &tc.cross_attention}) a->heads = 4;
  nn::VitConfig vc;
  vc.image_size = 8;
  vc.patch_size = 4;
  vc.channels = 1;
  vc.num_classes = 3;
  vc.d_model = 16;
  vc.depth = 2;
  vc.ffn_dim = 32;
  vc.attention.heads = 4;
  nn::Transformer transformer(tc, gen);
  nn::VisionTransformer vit(vc, gen);
  const std::map<std::string, const nn::Module*> models{{"transformer", &transformer}, {"vit", &vit}};
  const std::map<std::string, int64_t> layers{{"depth", 2}, {"encoder_layers", 2}, {"decoder_layers", 1}};
  std::set<std::string> kinds;
  for (const auto& place : nn::attention_places()) {
    kinds.insert(place.model_kind);
    const auto names = models.at(place.model_kind)->state_dict();
    const int64_t n = layers.at(place.layers);
    const std::string& p = place.weight_prefix;
    for (int64_t i = 0; i <= n; ++i) {
      const std::string name = p.substr(0, p.find('#')) + std::to_string(i) + p.substr(p.find('#') + 1) + "out.weight";
      EXPECT_EQ(names.count(name), i < n ? 1u : 0u) << name;
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"transformer", "vit"}));
  EXPECT_EQ(nn::attention_places("vit").size(), 1u);
  EXPECT_EQ(nn::attention_places("transformer").size(), 3u);
}

TEST(AttentionKernels, CausalMaskAndBlockIdentity) {
  Tensor m = Tensor::empty({3, 5}, DType::b8);
  CMHA_KERNEL(m.device(), mask.causal)(m, 1);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(m.data<bool>()[i * 5 + j], j > i + 1) << i << "," << j;
  Tensor w = Tensor::full({3, 6}, 7.0);
  nn::init::block_identity_(w);
  const std::vector<float> v = w.to_float_vector();
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 6; ++c) EXPECT_EQ(v[r * 6 + c], c / 2 == r ? 1.0f : 0.0f) << r << "," << c;
  Tensor eye = Tensor::empty({4, 4});
  nn::init::block_identity_(eye);
  EXPECT_EQ(eye.to_float_vector(), Tensor::from_vector({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, {4, 4})
                                       .to_float_vector());
  EXPECT_NE(error_of([] {
              Tensor bad = Tensor::empty({4, 6});
              nn::init::block_identity_(bad);
            }).find("block_identity_"),
            std::string::npos);
}

TEST(AttentionKernels, SinusoidalPositionsAreFairseqs) {
  const Tensor pe = nn::sinusoidal_positions(5, 8, 3);
  const std::vector<float> v = pe.to_float_vector();
  const double step = std::log(10000.0) / 3.0;
  for (int64_t t = 0; t < 5; ++t)
    for (int64_t i = 0; i < 4; ++i) {
      const double angle = static_cast<double>(t + 3) * std::exp(-static_cast<double>(i) * step);
      EXPECT_EQ(v[t * 8 + i], static_cast<float>(std::sin(angle)));
      EXPECT_EQ(v[t * 8 + 4 + i], static_cast<float>(std::cos(angle)));
    }
}

TEST(AttentionKernels, RandomFillsAreThePhiloxFormulas) {
  Generator gen(99);
  Tensor u = Tensor::empty({9});
  uniform_(u, gen, -1.0f, 3.0f);
  const auto key = gen.key();
  const std::vector<float> v = u.to_float_vector();
  for (int64_t i = 0; i < 9; ++i)
    EXPECT_FLOAT_EQ(v[i], -1.0f + 4.0f * uint_to_unit(philox_block(static_cast<uint64_t>(i) / 4, key)[i % 4]));
  EXPECT_EQ(gen.offset(), 3u);
  Tensor n = Tensor::empty({5});
  normal_(n, gen);
  EXPECT_EQ(gen.offset(), 3u + 3u);  // 10 values: ceil(10/4) counters
  Tensor t = Tensor::empty({5});
  trunc_normal_(t, gen, 0.0f, 1.0f, -2.0f, 2.0f);
  EXPECT_EQ(gen.offset(), 6u + 5u * kTruncNormalBlocks);
}
