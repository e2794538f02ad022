// Head ablation: nn/head_mask.h on attention layers, eval/head_importance.h,
// and cmha eval --mask-heads / cmha heads --importance on a tiny trained ViT
// (with the budget its results.json and cmha info carry).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "compress/head_telemetry.h"
#include "nn/attention/collaborative.h"
#include "nn/attention/concat.h"
#include "nn/head_mask.h"
#include "nn/transformer.h"
#include "support/check.h"
#include "support/text.h"
#include "support/tiny_images.h"
#include "eval/head_importance.h"
#include "run/run_results.h"

using namespace cmha;
using namespace cmha::nn;
using test::error_of;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;

float max_abs_diff(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  float m = 0;
  for (int64_t i = 0; i < x.numel(); ++i) m = std::max(m, std::abs(x.data<float>()[i] - y.data<float>()[i]));
  return m;
}

AttentionConfig config(const std::string& type, int64_t key_dim) {
  AttentionConfig c;
  c.type = type;
  c.heads = 4;
  c.key_dim = key_dim;
  c.mixing_init = "normal";
  return c;
}

}  // namespace

TEST(HeadMask, AMaskedHeadIsAHeadWithZeroValues) {
  Generator gen(3);
  auto a = make_attention(config("concat", 16), 16, gen);
  Tensor x = test::random_tensor({2, 5, 16}, 4);
  const Tensor before = a->forward(x, x, {});
  a->mask_heads({2});
  const Tensor masked = a->forward(x, x, {});
  EXPECT_GT(max_abs_diff(before, masked), 1e-3f);
  // Head 2 reads value rows 8..11 (value_dim 16, 4 per head): zeroing them is the same ablation.
  a->mask_heads({});
  EXPECT_EQ(max_abs_diff(before, a->forward(x, x, {})), 0.0f);
  for (int64_t r = 8; r < 12; ++r) {
    for (int64_t c = 0; c < 16; ++c) a->value_proj->weight.data<float>()[r * 16 + c] = 0.0f;
    a->value_proj->bias.data<float>()[r] = 0.0f;
  }
  EXPECT_LT(max_abs_diff(masked, a->forward(x, x, {})), 1e-6f);
}

TEST(HeadMask, AMaskedSharedDimensionIsAZeroMixingColumn) {
  Generator gen(3);
  auto a = std::dynamic_pointer_cast<CollaborativeAttention>(make_attention(config("collaborative", 6), 16, gen));
  ASSERT_TRUE(a);
  Tensor x = test::random_tensor({2, 5, 16}, 4);
  const Tensor before = a->forward(x, x, {});
  a->mask_shared_dims({1, 4});
  const Tensor masked = a->forward(x, x, {});
  EXPECT_GT(max_abs_diff(before, masked), 1e-4f);
  a->mask_shared_dims({});
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t j : {1, 4}) a->mixing.data<float>()[h * 6 + j] = 0.0f;
  EXPECT_LT(max_abs_diff(masked, a->forward(x, x, {})), 1e-6f);
  EXPECT_EQ(error_of([&] { a->mask_shared_dims({6}); }),
            "attention: there is no shared dimension 6 (D~k is 6, 0 to 5)");
}

TEST(HeadMask, ItemsNameWhatExists) {
  TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 11;
  c.d_model = 8;
  c.ffn_dim = 8;
  c.encoder_layers = 2;
  c.decoder_layers = 1;
  c.encoder_attention = config("concat", 8);
  c.decoder_attention = c.cross_attention = config("collaborative", 4);
  Generator gen(1);
  Transformer m(c, gen);
  apply_head_mask(m, parse_head_mask("encoder.1:3,cross.0:0,decoder.0:d3,encoder_attention.0:1"));
  EXPECT_EQ(m.encoder_layers[1]->self_attn->masked_heads(), std::vector<int64_t>{3});
  EXPECT_EQ(m.encoder_layers[0]->self_attn->masked_heads(), std::vector<int64_t>{1});
  EXPECT_EQ(m.decoder_layers[0]->cross_attn->masked_heads(), std::vector<int64_t>{0});
  const std::pair<std::string, std::string> cases[] = {
      {"encoder.0:4", "--mask-heads encoder.0:4: there is no head 4 (encoder.0 has 4 heads, 0 to 3)"},
      {"encoder.2:0", "--mask-heads encoder.2:0: there is no layer 2 (encoder has 2 layers, 0 to 1)"},
      {"vit.0:0", "--mask-heads vit.0:0: this model has no attention place 'vit' (it has: encoder, decoder, cross)"},
      {"encoder.0:d1", "--mask-heads encoder.0:d1: layer 0 of encoder is concat attention; only a collaborative "
                       "layer has shared dimensions (dJ)"},
      {"cross.0:d4", "--mask-heads cross.0:d4: there is no shared dimension 4 (cross.0 has 4 shared dimensions, 0 to 3)"},
  };
  for (const auto& [item, message] : cases) EXPECT_EQ(error_of([&] { apply_head_mask(m, parse_head_mask(item)); }), message);
  for (const char* bad : {"encoder:1", "encoder.x:1", "encoder.0:", "encoder.0:-1", "encoder.0:dx", ".0:1"})
    EXPECT_NE(error_of([&] { parse_head_mask(bad); }).find("must look like PLACE.LAYER:HEAD"), std::string::npos) << bad;
  EXPECT_EQ(error_of([] { parse_head_mask(","); }), "--mask-heads needs heads, e.g. --mask-heads encoder.0:3,decoder.1:0");
}

TEST(HeadMask, ImportanceMasksOneHeadAtATime) {
  TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 11;
  c.d_model = 8;
  c.ffn_dim = 8;
  c.encoder_layers = 1;
  c.decoder_layers = 1;
  c.encoder_attention = c.decoder_attention = c.cross_attention = config("concat", 8);
  c.cross_attention.heads = 2;
  Generator gen(1);
  Transformer m(c, gen);
  apply_head_mask(m, parse_head_mask("encoder.0:1"));  // cleared first
  // The "loss": 1 + the number of masked heads, + 10 × the masked head of the cross-attention.
  auto loss = [&] {
    double v = 1;
    for (const AttentionLayer& l : attention_layers(m)) {
      v += static_cast<double>(l.attention->masked_heads().size());
      if (l.place == "cross" && !l.attention->masked_heads().empty()) v += 10.0 * l.attention->masked_heads()[0];
    }
    return v;
  };
  int64_t calls = 0;
  const eval::HeadImportance imp = eval::head_importance(m, loss, [&](const eval::LayerImportance&, int64_t) { ++calls; });
  EXPECT_EQ(calls, 4 + 4 + 2);
  EXPECT_DOUBLE_EQ(imp.base_loss, 1.0);
  ASSERT_EQ(imp.layers.size(), 3u);
  EXPECT_EQ(imp.layers[2].place, "cross");
  EXPECT_EQ(imp.layers[2].increase, (std::vector<double>{1.0, 11.0}));
  EXPECT_EQ(imp.layers[0].loss, (std::vector<double>{2.0, 2.0, 2.0, 2.0}));
  for (const AttentionLayer& l : attention_layers(m)) EXPECT_TRUE(l.attention->masked_heads().empty());
}

TEST(HeadTelemetry, CountsDirectionsAndTheMixingMatrixRank) {
  TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 11;
  c.d_model = 4;
  c.ffn_dim = 4;
  c.encoder_layers = 1;
  c.decoder_layers = 0;
  c.encoder_attention = config("concat", 2);
  c.encoder_attention.heads = 2;  // one query/key dimension per head
  Generator gen(1);
  Transformer m(c, gen);
  // Both heads' query is e_0: the stacked products [T_1 T_2] have rank 1.
  auto* a = dynamic_cast<ConcatAttention*>(m.encoder_layers[0]->self_attn.get());
  ASSERT_TRUE(a);
  for (int64_t i = 0; i < 8; ++i) a->query_proj->weight.data<float>()[i] = (i % 4 == 0) ? 1.0f : 0.0f;
  nlohmann::json row = compress::head_telemetry(m);
  EXPECT_EQ(row.at("encoder.0/qk90"), 1);
  EXPECT_EQ(row.at("encoder.0/qk99"), 1);

  c.encoder_attention = config("collaborative", 4);
  c.encoder_attention.heads = 2;
  c.encoder_attention.mixing_init = "concatenate";  // [[1 1 0 0], [0 0 1 1]]: singular values √2, √2
  Transformer collab(c, gen);
  row = compress::head_telemetry(collab);
  EXPECT_NEAR(row.at("encoder.0/mixing_erank").get<double>(), 2.0, 1e-9);
  EXPECT_EQ(row.at("encoder.0/mixing_norms"), (std::vector<double>{1.0, 1.0, 1.0, 1.0}));
  EXPECT_EQ(row.at("encoder.0/mixing_norm_min"), 1.0);
  EXPECT_TRUE(row.contains("encoder.0/q90") && row.contains("encoder.0/k99"));
  EXPECT_FALSE(row.contains("encoder.0/qk90"));
}

TEST(HeadMaskCli, EvalMasksHeadsAndHeadsRanksThem) {
  const std::string dir = test::temp_dir("head_mask_cli");
  test::write_tiny_fashion_mnist(dir, 48, 24);
  const std::string run = dir + "/run";
  test::CommandResult r = test::run_cmha("train --threads 1 " + test::tiny_run(dir, run) + " train.max_epochs=1");
  ASSERT_EQ(r.code, 0) << r.output;
  // The budget beside the scores: d_model 16, one collaborative block of 2 heads, D~k 8, value_dim 16:
  // query and key 8·16 each, mixing 2·8, content bias 2·16; value and out 16·16 + 16 each.
  const nlohmann::json results = run::read_run_results(run);
  EXPECT_EQ(results.at("attention_parameters"), 2 * 8 * 16 + 2 * 8 + 2 * 16 + 2 * (16 * 16 + 16));
  EXPECT_EQ(results.at("key_query_parameters"), 2 * 8 * 16 + 2 * 8 + 2 * 16);
  EXPECT_TRUE(results.at("train_flops_per_image").is_number());
  const std::string ckpt = run + "/checkpoint_best.safetensors";
  // Head telemetry at each validation: a row of split "heads" per validation row.
  {
    std::ifstream metrics(run + "/metrics.jsonl");
    int valid = 0, heads = 0;
    for (std::string line; std::getline(metrics, line);) {
      const nlohmann::json row = nlohmann::json::parse(line);
      if (row.at("split") == "valid") ++valid;
      if (row.at("split") != "heads") continue;
      ++heads;
      EXPECT_TRUE(row.contains("attention.0/q90") && row.contains("attention.0/k99")) << line;
      EXPECT_GE(row.at("attention.0/q90").get<int>(), 1);
      EXPECT_TRUE(row.at("attention.0/mixing_erank").is_number()) << line;
      EXPECT_TRUE(row.at("seconds").is_number());
    }
    EXPECT_GE(valid, 1);
    EXPECT_EQ(heads, valid);
  }
  if (std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") == 0) {
    r = test::run_cmha("plot " + run + " --heads -o " + dir + "/heads.png");
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_TRUE(fs::is_regular_file(dir + "/heads.png")) << r.output;
  }

  r = test::run_cmha("info " + ckpt);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "  attention             0   collaborative     2       8        16   default")) << r.output;
  EXPECT_TRUE(has(r.output, "budget: ")) << r.output;
  EXPECT_TRUE(has(r.output, "FLOPs per image")) << r.output;

  r = test::run_cmha("eval --json " + ckpt);
  ASSERT_EQ(r.code, 0) << r.output;
  const double base = nlohmann::json::parse(r.output).at("loss").get<double>();
  r = test::run_cmha("eval --json --mask-heads attention.0:1 " + ckpt);
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json masked = nlohmann::json::parse(r.output);
  EXPECT_NE(masked.at("loss").get<double>(), base);
  EXPECT_EQ(masked.at("masked_heads"), "attention.0:1");

  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"eval --mask-heads attention.0:2 " + ckpt, "--mask-heads attention.0:2: there is no head 2 (attention.0 has 2 heads, 0 to 1)"},
           {"eval --mask-heads attention.1:0 " + ckpt, "there is no layer 1 (attention has one layer, 0)"},
           {"eval --mask-heads encoder.0:0 " + ckpt, "this model has no attention place 'encoder' (it has: attention)"},
           {"eval --mask-heads 0.attention:1 " + ckpt, "must look like PLACE.LAYER:HEAD"},
           {"heads --importance", "needs a checkpoint"},
           {"heads --data x " + ckpt, "--data goes with --importance"},
           {"heads --importance --data " + dir + "/none " + ckpt, "--data '" + dir + "/none' is not a directory"},
       }) {
    r = test::run_cmha(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, message)) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }

  const std::string out = dir + "/importance";
  r = test::run_cmha("heads --importance --no-plot --threads 1 --output-dir " + out + " " + ckpt);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "attention.0")) << r.output;
  // Not on a terminal: the progress is whole lines, no carriage returns.
  EXPECT_TRUE(has(r.output, "cmha heads: attention.0 head 1 masked: loss ")) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  std::ifstream in(out + "/importance.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_NEAR(doc.at("base_loss").get<double>(), base, 1e-6);
  ASSERT_EQ(doc.at("layers").size(), 1u);
  EXPECT_NEAR(doc["layers"][0]["loss"][1].get<double>(), masked.at("loss").get<double>(), 1e-6);
  EXPECT_NEAR(doc["layers"][0]["increase"][1].get<double>(), masked.at("loss").get<double>() - base, 1e-6);
  if (std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") == 0) {
    r = test::run_cmha("heads --importance --threads 1 --output-dir " + out + " " + ckpt);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_TRUE(fs::is_regular_file(out + "/attention.0.png")) << r.output;
  }
  fs::remove_all(dir);
}

// train.head_telemetry_every: a "heads" row every N updates as well, one per update at most (update 6 is
// both the second epoch's validation and a multiple of 2).
TEST(HeadTelemetry, EveryNUpdatesBesidesTheValidations) {
  const std::string dir = test::temp_dir("head_telemetry_every");
  test::write_tiny_fashion_mnist(dir, 48, 24);  // 3 updates an epoch (batches of 16)
  const std::string run = dir + "/run";
  const test::CommandResult r = test::run_cmha("train --threads 1 " + test::tiny_run(dir, run) +
                                               " train.max_epochs=2 train.head_telemetry_every=2");
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream metrics(run + "/metrics.jsonl");
  std::vector<int64_t> updates;
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    if (row.at("split") == "heads") updates.push_back(row.at("update").get<int64_t>());
  }
  EXPECT_EQ(updates, (std::vector<int64_t>{2, 3, 4, 6}));
  const test::CommandResult bad = test::run_cmha("train --threads 1 " + test::tiny_run(dir, dir + "/bad") +
                                                 " train.head_telemetry_every=-1");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_TRUE(has(bad.output, "train.head_telemetry_every")) << bad.output;
  fs::remove_all(dir);
}
