// Which attention path (cuDNN's fused SDPA or cmha's unfused one) every
// shipped recipe's attention places take on sm_80 and sm_90, training in
// bf16, decided on the CPU by backend/cuda/fused_attention_plan.h: the
// cudnn-frontend's graph validate() with the SM version set, no GPU. Runs in
// CPU CI wherever the CUDA build found cuDNN's header; skips, saying why,
// where libcudnn cannot be loaded.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#if CMHA_WITH_CUDNN
#include "backend/cuda/fused_attention_plan.h"
#include "nn/attention/attention.h"
#include "run/model_config.h"
#include "run/recipe.h"
#include "support/source_paths.h"
#endif

namespace cmha {
namespace {

#if !CMHA_WITH_CUDNN

TEST(FusedAttentionPlan, NeedsTheCudaBuildWithCudnn) {
  GTEST_SKIP() << "built without the CUDA backend or without cudnn.h: there is no fused-attention planner";
}

#else

using cuda::AttentionKind;
using cuda::AttentionPath;
using cuda::FusedAttentionDecision;
using cuda::FusedAttentionRequest;

class FusedAttentionPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = cuda::cudnn_unavailable_reason(); !why.empty())
      GTEST_SKIP() << why << "; the planner runs the cudnn-frontend's checks, which ask libcudnn its version";
  }
};

FusedAttentionRequest concat_request(int64_t heads, int64_t dk, int64_t dv, int sm, bool training) {
  FusedAttentionRequest r;
  r.layout = {AttentionKind::concat, heads, 1, heads * dk, heads * dv, 0.125f};
  r.batch = 4;
  r.tq = r.tk = 128;
  r.training = training;
  r.sm = sm;
  return r;
}

// The frontend's own backward limits (scaled_dot_product_flash_attention.h,
// CompositeSDPABackwardNode::pre_validate_node): d <= 256 on sm_9x, <= 128
// elsewhere; forward d <= 256 (cuDNN's support matrix, checked by the planner).
TEST_F(FusedAttentionPlan, HeadSizeLimitsPerSmVersion) {
  EXPECT_EQ(cuda::plan_fused_attention(concat_request(8, 128, 128, 80, true)).path, AttentionPath::fused);
  const FusedAttentionDecision a = cuda::plan_fused_attention(concat_request(8, 136, 136, 80, true));
  EXPECT_EQ(a.path, AttentionPath::unfused);
  EXPECT_NE(a.reason.find("backward"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find("128"), std::string::npos) << a.reason;
  EXPECT_EQ(cuda::plan_fused_attention(concat_request(8, 136, 136, 80, false)).path, AttentionPath::fused);
  EXPECT_EQ(cuda::plan_fused_attention(concat_request(8, 256, 64, 90, true)).path, AttentionPath::fused);
  const FusedAttentionDecision b = cuda::plan_fused_attention(concat_request(8, 320, 64, 90, true));
  EXPECT_EQ(b.path, AttentionPath::unfused);
  EXPECT_NE(b.reason.find("sm_90"), std::string::npos) << b.reason;
  EXPECT_NE(b.reason.find("320"), std::string::npos) << b.reason;
  const FusedAttentionDecision c = cuda::plan_fused_attention(concat_request(8, 320, 64, 90, false));
  EXPECT_EQ(c.path, AttentionPath::unfused) << "the forward limit of the support matrix: " << c.reason;
  // Blackwell: backward d <= 128 (cuDNN >= 9.11), forward as elsewhere.
  EXPECT_EQ(cuda::plan_fused_attention(concat_request(8, 128, 128, 100, true)).path, AttentionPath::fused);
  EXPECT_EQ(cuda::plan_fused_attention(concat_request(8, 256, 64, 100, true)).path, AttentionPath::unfused);
  EXPECT_EQ(cuda::plan_fused_attention(concat_request(8, 256, 64, 100, false)).path, AttentionPath::fused);
  // Head sizes must be multiples of 8 (sdpa_support_surface.h).
  EXPECT_EQ(cuda::plan_fused_attention(concat_request(8, 12, 64, 90, false)).path, AttentionPath::unfused);
}

TEST_F(FusedAttentionPlan, MasksDropoutAndDtypes) {
  FusedAttentionRequest r = concat_request(8, 64, 64, 90, true);
  r.causal = true;
  EXPECT_EQ(cuda::plan_fused_attention(r).path, AttentionPath::fused) << cuda::plan_fused_attention(r).reason;
  r.causal = false;
  r.key_padding = true;
  EXPECT_EQ(cuda::plan_fused_attention(r).path, AttentionPath::fused) << cuda::plan_fused_attention(r).reason;
  r.dropout = 0.1f;
  EXPECT_EQ(cuda::plan_fused_attention(r).path, AttentionPath::fused) << cuda::plan_fused_attention(r).reason;
  // Blackwell's deterministic backward refuses dropout (the frontend's check).
  r.sm = 100;
  EXPECT_EQ(cuda::plan_fused_attention(r).path, AttentionPath::unfused);
  r.deterministic = false;
  EXPECT_EQ(cuda::plan_fused_attention(r).path, AttentionPath::fused) << cuda::plan_fused_attention(r).reason;
  r.dtype = DType::f16;
  EXPECT_EQ(cuda::plan_fused_attention(r).path, AttentionPath::fused);
  r.dtype = DType::f32;
  EXPECT_EQ(cuda::plan_fused_attention(r).path, AttentionPath::unfused);
}

TEST_F(FusedAttentionPlan, AttentionTypeMapping) {
  // grouped: native GQA.
  cuda::SdpaShape g = cuda::sdpa_shape({AttentionKind::grouped, 8, 2, 512, 512, 0.125f}, 2, 10, 12);
  EXPECT_EQ(g.heads_q, 8);
  EXPECT_EQ(g.heads_k, 2);
  EXPECT_EQ(g.heads_v, 2);
  EXPECT_EQ(g.qk_dim, 64);
  // collaborative: one key head of width D̃k + H (padded to 8), scale 1.
  cuda::SdpaShape c = cuda::sdpa_shape({AttentionKind::collaborative, 8, 1, 128, 512, 0.125f}, 2, 10, 12);
  EXPECT_EQ(c.heads_q, 8);
  EXPECT_EQ(c.heads_k, 1);
  EXPECT_EQ(c.heads_v, 8);
  EXPECT_EQ(c.qk_dim_used, 136);
  EXPECT_EQ(c.qk_dim, 136);
  EXPECT_EQ(c.v_dim, 64);
  EXPECT_EQ(c.scale, 1.0f);
  EXPECT_EQ(cuda::sdpa_shape({AttentionKind::collaborative, 12, 1, 96, 768, 0.125f}, 2, 10, 12).qk_dim, 112);
  FusedAttentionRequest t;
  t.layout = {AttentionKind::talking_heads, 8, 1, 512, 512, 0.125f};
  const FusedAttentionDecision d = cuda::plan_fused_attention(t);
  EXPECT_EQ(d.path, AttentionPath::unfused);
  EXPECT_NE(d.reason.find("talking-heads"), std::string::npos) << d.reason;
  EXPECT_THROW(cuda::attention_kind("linear"), Error);
}

// --- every shipped recipe -----------------------------------------------------

struct Place {
  std::string name;
  nn::AttentionConfig config;
  int64_t d_model, batch, tq, tk;
  bool causal, key_padding;
};

std::vector<Place> places(const run::Recipe& r) {
  if (r.string("model.kind") == "vit") {
    const nn::VitConfig v = run::vit_config(r);
    const int64_t tokens = v.num_patches() + 1 + (v.distillation_token ? 1 : 0);
    return {{"attention", v.attention, v.d_model, r.integer("data.batch_size"), tokens, tokens, false, false}};
  }
  const nn::TransformerConfig t = run::transformer_config(r);
  const int64_t T = r.integer("data.max_len"), B = std::max<int64_t>(1, r.integer("data.max_tokens") / T);
  return {{"encoder", t.encoder_attention, t.d_model, B, T, T, false, true},
          {"decoder", t.decoder_attention, t.d_model, B, T, T, true, false},
          {"cross", t.cross_attention, t.d_model, B, T, T, false, true}};
}

// recipe (relative to recipes/):place -> the path on sm_80 and sm_90, training
// in bf16 (f fused, u unfused; the test prints the reasons). The rules behind
// them: head sizes multiples of 8; backward d <= 128 on sm_80, <= 256 on sm_90
// (the frontend's checks); forward d <= 256 (cuDNN's support matrix).
// Collaborative's qk head size is D̃k + H rounded up to 8.
const std::map<std::string, std::map<int, char>>& expected_paths() {
  static const std::map<std::string, std::map<int, char>> table = {
      // collaborative H 4, D̃k 64: qk 72, v 64
      {"bench/transformer_small_collab_dk64.yaml:encoder", {{80, 'f'}, {90, 'f'}}},
      {"bench/transformer_small_collab_dk64.yaml:decoder", {{80, 'f'}, {90, 'f'}}},
      {"bench/transformer_small_collab_dk64.yaml:cross", {{80, 'f'}, {90, 'f'}}},
      // concat H 4, Dk 256: qk 64, v 64
      {"bench/transformer_small_concat_dk256.yaml:encoder", {{80, 'f'}, {90, 'f'}}},
      {"bench/transformer_small_concat_dk256.yaml:decoder", {{80, 'f'}, {90, 'f'}}},
      {"bench/transformer_small_concat_dk256.yaml:cross", {{80, 'f'}, {90, 'f'}}},
      // DeiT-B3 (H 12, d_model 768, v 64). collaborative: qk 112, 208, 400, 784
      {"deit_b3_imagenet/collaborative_dk96.yaml:attention", {{80, 'f'}, {90, 'f'}}},
      {"deit_b3_imagenet/collaborative_dk192.yaml:attention", {{80, 'u'}, {90, 'f'}}},
      {"deit_b3_imagenet/collaborative_dk384.yaml:attention", {{80, 'u'}, {90, 'u'}}},
      {"deit_b3_imagenet/collaborative_dk768.yaml:attention", {{80, 'u'}, {90, 'u'}}},
      // concat: qk 8, 16, 32, 64; the base recipe is concat at D_k = d_model
      {"deit_b3_imagenet/concat_dk96.yaml:attention", {{80, 'f'}, {90, 'f'}}},
      {"deit_b3_imagenet/concat_dk192.yaml:attention", {{80, 'f'}, {90, 'f'}}},
      {"deit_b3_imagenet/concat_dk384.yaml:attention", {{80, 'f'}, {90, 'f'}}},
      {"deit_b3_imagenet/concat_dk768.yaml:attention", {{80, 'f'}, {90, 'f'}}},
      {"deit_b3_imagenet/deit_b3_imagenet.yaml:attention", {{80, 'f'}, {90, 'f'}}},
      // the DeiT-Ti-size benchmark ViT (H 3, d_model 192): qk 64, v 64
      {"bench/deit_tiny_vit.yaml:attention", {{80, 'f'}, {90, 'f'}}},
      // collaborative H 4, D̃k 128: qk 136 > 128 for the sm_80 backward
      {"local/en_de_transformer_small.yaml:encoder", {{80, 'u'}, {90, 'f'}}},
      {"local/en_de_transformer_small.yaml:decoder", {{80, 'u'}, {90, 'f'}}},
      {"local/en_de_transformer_small.yaml:cross", {{80, 'u'}, {90, 'f'}}},
      // collaborative H 4, D̃k 32: qk 40, v 16
      {"local/fashion_mnist_vit.yaml:attention", {{80, 'f'}, {90, 'f'}}},
      // concat H 4, Dk 64: qk 16, v 16
      {"local/fashion_mnist_vit_concat.yaml:attention", {{80, 'f'}, {90, 'f'}}},
      // WMT14 (H 8, d_model 512, v 64); the base recipe: concat at D_k = 512, qk 64
      {"wmt14_en_de/base.yaml:encoder", {{80, 'f'}, {90, 'f'}}},
      {"wmt14_en_de/base.yaml:decoder", {{80, 'f'}, {90, 'f'}}},
      {"wmt14_en_de/base.yaml:cross", {{80, 'f'}, {90, 'f'}}},
      // collaborative: qk 72
      {"wmt14_en_de/collaborative_dk64.yaml:encoder", {{80, 'f'}, {90, 'f'}}},
      {"wmt14_en_de/collaborative_dk64.yaml:decoder", {{80, 'f'}, {90, 'f'}}},
      {"wmt14_en_de/collaborative_dk64.yaml:cross", {{80, 'f'}, {90, 'f'}}},
      // qk 136: over 128 (sm_80 backward)
      {"wmt14_en_de/collaborative_dk128.yaml:encoder", {{80, 'u'}, {90, 'f'}}},
      {"wmt14_en_de/collaborative_dk128.yaml:decoder", {{80, 'u'}, {90, 'f'}}},
      {"wmt14_en_de/collaborative_dk128.yaml:cross", {{80, 'u'}, {90, 'f'}}},
      // qk 264: over 256 (forward)
      {"wmt14_en_de/collaborative_dk256.yaml:encoder", {{80, 'u'}, {90, 'u'}}},
      {"wmt14_en_de/collaborative_dk256.yaml:decoder", {{80, 'u'}, {90, 'u'}}},
      {"wmt14_en_de/collaborative_dk256.yaml:cross", {{80, 'u'}, {90, 'u'}}},
      // qk 520
      {"wmt14_en_de/collaborative_dk512.yaml:encoder", {{80, 'u'}, {90, 'u'}}},
      {"wmt14_en_de/collaborative_dk512.yaml:decoder", {{80, 'u'}, {90, 'u'}}},
      {"wmt14_en_de/collaborative_dk512.yaml:cross", {{80, 'u'}, {90, 'u'}}},
      // concat: qk 8, 16, 32, 64
      {"wmt14_en_de/concat_dk64.yaml:encoder", {{80, 'f'}, {90, 'f'}}},
      {"wmt14_en_de/concat_dk64.yaml:decoder", {{80, 'f'}, {90, 'f'}}},
      {"wmt14_en_de/concat_dk64.yaml:cross", {{80, 'f'}, {90, 'f'}}},
      // qk 16
      {"wmt14_en_de/concat_dk128.yaml:encoder", {{80, 'f'}, {90, 'f'}}},
      {"wmt14_en_de/concat_dk128.yaml:decoder", {{80, 'f'}, {90, 'f'}}},
      {"wmt14_en_de/concat_dk128.yaml:cross", {{80, 'f'}, {90, 'f'}}},
      // qk 32
      {"wmt14_en_de/concat_dk256.yaml:encoder", {{80, 'f'}, {90, 'f'}}},
      {"wmt14_en_de/concat_dk256.yaml:decoder", {{80, 'f'}, {90, 'f'}}},
      {"wmt14_en_de/concat_dk256.yaml:cross", {{80, 'f'}, {90, 'f'}}},
      // qk 64
      {"wmt14_en_de/concat_dk512.yaml:encoder", {{80, 'f'}, {90, 'f'}}},
      {"wmt14_en_de/concat_dk512.yaml:decoder", {{80, 'f'}, {90, 'f'}}},
      {"wmt14_en_de/concat_dk512.yaml:cross", {{80, 'f'}, {90, 'f'}}},
  };
  return table;
}

std::vector<std::string> shipped_recipes() {
  std::vector<std::string> out;
  const std::filesystem::path root = std::filesystem::path(CMHA_SOURCE_DIR) / "recipes";
  for (auto& e : std::filesystem::recursive_directory_iterator(root))
    if (e.path().extension() == ".yaml") out.push_back(std::filesystem::relative(e.path(), root).string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(FusedAttentionPlan, EveryShippedRecipeOnSm80AndSm90) {
  std::ostringstream table;
  table << "recipe:place | type H Dk Dv | SDPA Hq/Hk/Hv dqk dv | sm_80 | sm_90\n";
  const auto& expected = expected_paths();
  size_t checked = 0;
  for (const std::string& file : shipped_recipes()) {
    const run::Recipe r = run::Recipe::load(std::string(CMHA_SOURCE_DIR) + "/recipes/" + file);
    for (const Place& p : places(r)) {
      Generator gen(1);
      const auto layer = nn::make_attention(p.config, p.d_model, gen);  // resolves key_dim/value_dim 0 and the scale
      const nn::AttentionConfig& c = layer->config();
      FusedAttentionRequest q;
      q.layout = {cuda::attention_kind(c.type), c.heads, c.kv_heads, c.key_dim, c.value_dim, layer->scale()};
      q.batch = p.batch;
      q.tq = p.tq;
      q.tk = p.tk;
      q.causal = p.causal;
      q.key_padding = p.key_padding;
      q.dropout = c.dropout;
      q.training = true;
      q.dtype = DType::bf16;
      const std::string key = file + ":" + p.name;
      table << key << " | " << c.type << " " << c.heads << " " << c.key_dim << " " << c.value_dim;
      bool first = true;
      for (int sm : {80, 90}) {
        q.sm = sm;
        const FusedAttentionDecision d = cuda::plan_fused_attention(q);
        if (first) {
          table << " | " << d.shape.heads_q << "/" << d.shape.heads_k << "/" << d.shape.heads_v << " "
                << d.shape.qk_dim << " " << d.shape.v_dim;
          first = false;
        }
        const char got = d.path == AttentionPath::fused ? 'f' : 'u';
        table << " | " << (got == 'f' ? "fused" : "unfused: " + d.reason);
        auto row = expected.find(key);
        if (row == expected.end()) {
          ADD_FAILURE() << key << " is not in expected_paths(): add it (sm_" << sm << " plans " << got << ": "
                        << d.reason << ")";
          continue;
        }
        EXPECT_EQ(got, row->second.at(sm)) << key << " on sm_" << sm << ": " << d.reason;
        ++checked;
      }
      table << "\n";
    }
  }
  std::cout << table.str();
  EXPECT_EQ(checked, 2 * expected.size()) << "a row of expected_paths() names no shipped recipe's place";
}

#endif  // CMHA_WITH_CUDNN

}  // namespace
}  // namespace cmha
