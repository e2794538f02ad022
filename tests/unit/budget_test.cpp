// run/budget.h on models small enough to count by hand.
#include <gtest/gtest.h>

#include "run/budget.h"
#include "run/recipe.h"

using namespace cmha;
using namespace cmha::run;
using cmha::run::Recipe;

namespace {

// d_model 4, ffn 8, vocabulary 10 (shared), one encoder and one decoder layer,
// 2 heads, sentences of 3 source and 2 target tokens.
const char* kTinyTransformer =
    "model: {d_model: 4, ffn_dim: 8, vocab_size: 10, encoder_layers: 1, decoder_layers: 1, attention: {heads: 2}}\n"
    "bench: {src_len: 3, tgt_len: 2}\n";

}  // namespace

TEST(Budget, ConcatTransformerCountedByHand) {
  const ModelBudget b = model_budget(Recipe::parse(kTinyTransformer, "tiny"));
  // Embedding 10·4 = 40 (shared with the output). An attention layer: query,
  // key, value, out, each 4·4 + 4 = 20 -> 80. Feed-forward 4·8 + 8 + 8·4 + 4 = 76.
  // LayerNorm 8. Encoder 80 + 76 + 2·8 = 172; decoder 2·80 + 76 + 3·8 = 260.
  EXPECT_EQ(b.parameters, 40 + 172 + 260);
  EXPECT_EQ(b.attention_parameters, 3 * 80);
  EXPECT_EQ(b.key_query_parameters, 3 * 40);
  // Attention forward (q queries, k keys): projections 2q·16 (query) + 2k·16
  // (key) + 2k·16 (value) + 2q·16 (out), scores 2qk·4, values 2qk·4
  // = 64q + 64k + 16qk. Encoder self (3, 3): 528; its feed-forward 2·3·64 = 384.
  // Decoder self (2, 2): 320; cross (2, 3): 416; feed-forward 2·2·64 = 256.
  // Output layer 2·2·40 = 160. Forward 2064; training 3× per target token: 3096.
  EXPECT_DOUBLE_EQ(b.train_flops, 3096.0);
  // Decoding: the decoder's one self-attention layer caches 4 keys and 4 values (f32) per token.
  EXPECT_EQ(b.cache_key_bytes, 16);
  EXPECT_EQ(b.cache_value_bytes, 16);
  EXPECT_EQ(b.cross_cache_key_bytes, 16);
  const auto j = budget_json(b);
  EXPECT_EQ(j["kv_cache_bytes_per_token"], 32);
  EXPECT_EQ(j["kv_cache_key_bytes_per_token"], 16);
  EXPECT_EQ(j["train_flops_per_token"], 3096.0);
  EXPECT_FALSE(j.contains("train_flops_per_image"));
}

TEST(Budget, CollaborativeCachesOneSharedKeyTensor) {
  const ModelBudget b = model_budget(Recipe::parse(
      kTinyTransformer, "tiny", {"model.attention.type=collaborative", "model.attention.key_dim=2"}));
  // A collaborative layer, D~k 2: query 2·4, key 2·4 (no biases), mixing 2·2,
  // content bias 2·4: 28 query/key; value and out 20 each: 68.
  EXPECT_EQ(b.attention_parameters, 3 * 68);
  EXPECT_EQ(b.key_query_parameters, 3 * 28);
  EXPECT_EQ(b.parameters, 40 + (172 - 12) + (260 - 24));
  // Forward: query 2q·8, key and content bias 2k·16, mixing q·2·2, scores
  // 2qk·2·(2 + 2), values as concat (2k·16 + 2q·16 + 2qk·4) = 52q + 64k + 24qk.
  // Encoder (3, 3) 564 + 384; decoder self (2, 2) 328 + cross (2, 3) 440 + 256; output 160.
  EXPECT_DOUBLE_EQ(b.train_flops, 3.0 * (564 + 384 + 328 + 440 + 256 + 160) / 2.0);
  // One key tensor for both heads: D~k 2 keys plus 2 content biases per token.
  EXPECT_EQ(b.cache_key_bytes, 4 * 4);
  EXPECT_EQ(b.cache_value_bytes, 4 * 4);
}

TEST(Budget, PerLayerSettingsCountAsTheyAre) {
  const ModelBudget b = model_budget(Recipe::parse(
      kTinyTransformer, "tiny", {"model.encoder_attention.layers={0: {type: collaborative, key_dim: 2}}"}));
  EXPECT_EQ(b.attention_parameters, 68 + 2 * 80);
  EXPECT_EQ(b.key_query_parameters, 28 + 2 * 40);
  EXPECT_EQ(b.cache_key_bytes, 16);  // the decoder's is concat
}

TEST(Budget, VitPerImageCountedByHand) {
  const ModelBudget b = model_budget(Recipe::parse(
      "model: {kind: vit, image_size: 4, patch_size: 2, channels: 1, num_classes: 3, d_model: 4, depth: 1,\n"
      "        ffn_dim: 8, attention: {heads: 2}}\n"
      "train: {task: image_classification}\n",
      "vit"));
  // Patch embedding 4·4 + 4 = 20, class token 4, positions 5·4 = 20, the block
  // 8 + 80 + 8 + 76 = 172, final norm 8, head 4·3 + 3 = 15.
  EXPECT_EQ(b.parameters, 20 + 4 + 20 + 172 + 8 + 15);
  EXPECT_EQ(b.attention_parameters, 80);
  // 4 patches + the class token = 5 tokens: patch embedding 2·4·16 = 128,
  // attention (5, 5) 64·5 + 64·5 + 16·25 = 1040, feed-forward 2·5·64 = 640, head 2·12 = 24.
  EXPECT_DOUBLE_EQ(b.train_flops, 3.0 * (128 + 1040 + 640 + 24));
  const auto j = budget_json(b);
  EXPECT_TRUE(j.contains("train_flops_per_image"));
  EXPECT_FALSE(j.contains("kv_cache_bytes_per_token"));
}
