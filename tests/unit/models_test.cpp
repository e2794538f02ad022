// The attention family, the transformer and the vision transformer against
// the PyTorch reference models in tests/reference/reference_models.py:
// outputs and the gradient of every parameter and input.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "nn/attention/collaborative.h"
#include "nn/attention/concat.h"
#include "nn/transformer.h"
#include "nn/vit.h"
#include "support/check.h"

using namespace cmha;
using namespace cmha::nn;
using cmha::test::all_close;

namespace {

const char* kTypes[] = {"concat", "collaborative", "talking_heads", "grouped"};

AttentionConfig attention_config(const std::string& type) {
  AttentionConfig c;
  c.type = type;
  c.heads = 4;
  c.key_dim = type == "collaborative" ? 8 : 16;
  c.value_dim = 12;
  c.kv_heads = 2;
  return c;
}

std::map<std::string, Tensor> with_prefix(const SafetensorsFile& f, const std::string& prefix) {
  std::map<std::string, Tensor> out;
  for (auto& [k, t] : f.tensors)
    if (k.rfind(prefix, 0) == 0) out[k.substr(prefix.size())] = t;
  return out;
}

// Loads the fixture's parameters into `model` (strictly: names must match),
// runs `run` on the fixture's inputs, and compares the output and every gradient.
void check_against_fixture(Module& model, const std::string& name,
                           const std::function<Tensor(std::map<std::string, Tensor>&)>& run, float tol = 2e-5f) {
  SCOPED_TRACE(name);
  SafetensorsFile f = cmha::test::load_fixture(name);
  model.load_state_dict(with_prefix(f, "param."));
  model.eval();
  std::map<std::string, Tensor> in;
  for (auto& [k, t] : with_prefix(f, "in.")) {
    in[k] = t.detach().clone();
    if (is_floating(t.dtype())) in[k].set_requires_grad(true);
  }
  Tensor out = run(in);
  EXPECT_TRUE(all_close(out, f.tensors.at("out"), tol, 1e-4f));
  out.backward(f.tensors.at("grad_out"));
  int checked = 0;
  for (auto& [pname, p] : model.named_parameters()) {
    SCOPED_TRACE(pname);
    auto it = f.tensors.find("grad.param." + pname);
    ASSERT_NE(it, f.tensors.end()) << "fixture has no gradient for " << pname;
    ASSERT_TRUE(p.grad().defined()) << pname << " received no gradient";
    EXPECT_TRUE(all_close(p.grad(), it->second, tol, 1e-4f));
    ++checked;
  }
  for (auto& [k, t] : in)
    if (t.requires_grad()) EXPECT_TRUE(all_close(t.grad(), f.tensors.at("grad.in." + k), tol, 1e-4f)) << k;
  EXPECT_GT(checked, 0);
}

TransformerConfig small_transformer(bool pre_norm, const std::string& enc, const std::string& dec,
                                    const std::string& cross) {
  TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 11;
  c.d_model = 16;
  c.ffn_dim = 32;
  c.encoder_layers = c.decoder_layers = 2;
  c.pre_norm = pre_norm;
  c.encoder_final_norm = c.decoder_final_norm = true;
  c.dropout = 0.0f;
  c.encoder_attention = attention_config(enc);
  c.decoder_attention = attention_config(dec);
  c.cross_attention = attention_config(cross);
  return c;
}

}  // namespace

TEST(AttentionFamily, EveryTypeMatchesPyTorch) {
  for (const char* type : kTypes) {
    Generator gen(1);
    auto att = make_attention(attention_config(type), 16, gen);
    EXPECT_STREQ(att->type(), type);
    check_against_fixture(*att, std::string("attn_") + type + "_cross", [&](auto& in) {
      AttentionMask mask;
      mask.key_padding = in.at("pad");
      return att->forward(in.at("x"), in.at("y"), mask);
    });
    for (auto& p : att->parameters()) p.zero_grad();
    check_against_fixture(*att, std::string("attn_") + type + "_causal", [&](auto& in) {
      AttentionMask mask;
      mask.causal = true;
      return att->forward(in.at("x"), in.at("x"), mask);
    });
  }
}

TEST(AttentionFamily, CollaborativeParameterCountIsAsInThePaper) {
  Generator gen(1);
  AttentionConfig c = attention_config("collaborative");
  c.bias = false;
  c.key_dim = 24;
  auto att = std::make_shared<CollaborativeAttention>(c, 16, gen);
  const int64_t qk = att->query_proj->weight.numel() + att->key_proj->weight.numel() + att->mixing.numel() +
                     att->content_bias->weight.numel();
  // (2·D_in + H)·D̃k for W̃_Q, W̃_K and M, plus H·D_in for the content bias.
  EXPECT_EQ(qk, (2 * 16 + 4) * 24 + 4 * 16);
}

TEST(AttentionFamily, CollaborativeWithConcatenateMixingEqualsConcat) {
  // D̃k = D_k and blocks-of-ones mixing: the same function as concat attention
  // once the query biases become the content bias (c_h = b_Q^(h)ᵀ W_K^(h)).
  Generator gen(3);
  AttentionConfig cc = attention_config("concat");
  auto concat_att = std::make_shared<ConcatAttention>(cc, 16, gen);
  for (auto& [n, p] : concat_att->named_parameters()) cmha::uniform_(p, gen, -0.5f, 0.5f);
  AttentionConfig ck = cc;
  ck.type = "collaborative";
  auto collab = std::make_shared<CollaborativeAttention>(ck, 16, gen);
  ASSERT_FLOAT_EQ(collab->scale(), concat_att->scale());
  {
    autograd::NoGradGuard ng;
    collab->query_proj->weight.copy_(concat_att->query_proj->weight);
    collab->key_proj->weight.copy_(concat_att->key_proj->weight);
    // content_bias[h, :] = Σ_{j in head h} b_Q[j] · W_K[j, :]
    Tensor bq = concat_att->query_proj->bias, wk = concat_att->key_proj->weight;  // [16], [16, 16]
    Tensor per_head = mul(bq.view({16, 1}), wk).view({4, 4, 16});               // [H, dk, D]
    collab->content_bias->weight.copy_(sum(per_head, {1}));
    collab->value_proj->weight.copy_(concat_att->value_proj->weight);
    collab->value_proj->bias.copy_(concat_att->value_proj->bias);
    collab->out_proj->weight.copy_(concat_att->out_proj->weight);
    collab->out_proj->bias.copy_(concat_att->out_proj->bias);
  }
  concat_att->eval();
  collab->eval();
  Tensor x = cmha::test::random_tensor({2, 5, 16}, 4), y = cmha::test::random_tensor({2, 6, 16}, 5);
  AttentionMask mask;
  mask.key_padding = Tensor::from_vector({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 6}).to(DType::b8);
  EXPECT_TRUE(all_close(collab->forward(x, y, mask), concat_att->forward(x, y, mask), 1e-5f, 1e-4f));
}

TEST(AttentionFamily, KeyBiasNeverChangesConcatProbabilities) {
  // Softmax is shift-invariant and the key bias only adds q·b_K to every score of a row.
  Generator gen(5);
  auto att = std::make_shared<ConcatAttention>(attention_config("concat"), 16, gen);
  att->eval();
  Tensor x = cmha::test::random_tensor({2, 5, 16}, 6);
  Tensor before = att->forward(x, x, AttentionMask{});
  {
    autograd::NoGradGuard ng;
    cmha::uniform_(att->key_proj->bias, gen, -3.0f, 3.0f);
  }
  EXPECT_TRUE(all_close(att->forward(x, x, AttentionMask{}), before, 1e-5f, 1e-4f));
}

TEST(AttentionFamily, IncrementalDecodingEqualsFullForward) {
  for (const char* type : kTypes) {
    SCOPED_TRACE(type);
    Generator gen(7);
    auto att = make_attention(attention_config(type), 16, gen);
    att->eval();
    Tensor x = cmha::test::random_tensor({2, 6, 16}, 8);
    AttentionMask causal;
    causal.causal = true;
    Tensor full = att->forward(x, x, causal);
    AttentionCache cache;
    std::vector<Tensor> steps;
    for (int64_t t = 0; t < 6; ++t) {
      Tensor xt = x.slice(1, t, t + 1);
      steps.push_back(att->forward(xt, xt, causal, &cache));
    }
    EXPECT_EQ(cache.length, 6);
    EXPECT_TRUE(all_close(concat(steps, 1), full, 1e-5f, 1e-4f));
    if (std::string(type) == "collaborative")  // ONE key tensor for all heads: [B, T, D̃k + H]
      EXPECT_EQ(cache.key.shape(), (Shape{2, 6, 8 + 4}));
  }
}

TEST(AttentionFamily, ConfigErrorsNameTheKey) {
  Generator gen(1);
  AttentionConfig c = attention_config("concat");
  c.type = "linear";
  EXPECT_THROW(make_attention(c, 16, gen), Error);
  c = attention_config("concat");
  c.key_dim = 10;
  try {
    make_attention(c, 16, gen);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention.key_dim"), std::string::npos) << e.what();
  }
  c = attention_config("grouped");
  c.kv_heads = 3;
  EXPECT_THROW(make_attention(c, 16, gen), Error);
  c = attention_config("collaborative");
  c.key_dim = 6;
  EXPECT_THROW(make_attention(c, 16, gen), Error);  // concatenate init needs key_dim % heads == 0
  c.mixing_init = "normal";
  EXPECT_NO_THROW(make_attention(c, 16, gen));
}

TEST(TransformerModel, MatchesPyTorch) {
  struct Case {
    const char* label;
    const char *enc, *dec, *cross;
  } cases[] = {{"concat", "concat", "concat", "concat"},
               {"collaborative", "collaborative", "collaborative", "collaborative"},
               {"mixed", "collaborative", "talking_heads", "grouped"}};
  for (bool pre : {false, true})
    for (auto& c : cases) {
      Generator gen(2);
      Transformer model(small_transformer(pre, c.enc, c.dec, c.cross), gen);
      check_against_fixture(model, std::string("transformer_") + (pre ? "pre_" : "post_") + c.label, [&](auto& in) {
        return model.forward(in.at("src"), in.at("src_pad"), in.at("tgt"));
      }, 5e-5f);
    }
}

TEST(TransformerModel, IncrementalDecodingEqualsFullForward) {
  Generator gen(4);
  Transformer model(small_transformer(false, "collaborative", "collaborative", "collaborative"), gen);
  model.eval();
  Tensor src = Tensor::from_vector_i64({3, 4, 5, 6, 7, 8, 9, 10, 1, 1}, {2, 5});
  Tensor pad = Tensor::from_vector({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 5}).to(DType::b8);
  Tensor tgt = Tensor::from_vector_i64({2, 5, 6, 7, 2, 9, 4, 3}, {2, 4});
  Tensor memory = model.encode(src, pad);
  Tensor full = model.decode(tgt, memory, pad);
  DecoderCache cache = model.new_cache();
  std::vector<Tensor> steps;
  for (int64_t t = 0; t < 4; ++t) steps.push_back(model.decode(tgt.slice(1, t, t + 1), memory, pad, &cache));
  EXPECT_TRUE(all_close(concat(steps, 1), full, 1e-4f, 1e-4f));
  EXPECT_EQ(cache.steps, 4);
}

TEST(TransformerModel, SharedEmbeddingIsOneParameter) {
  Generator gen(1);
  Transformer model(small_transformer(false, "concat", "concat", "concat"), gen);
  int embeddings = 0;
  for (auto& [name, p] : model.named_parameters())
    if (p.shape() == Shape{11, 16}) ++embeddings;
  EXPECT_EQ(embeddings, 1);
  EXPECT_TRUE(model.output_weight.same(model.src_embed->weight));
  EXPECT_TRUE(model.state_dict().count("decoder.layers.1.cross_attn.query.weight"));
}

TEST(VisionTransformerModel, MatchesPyTorch) {
  for (const char* type : kTypes) {
    VitConfig c;
    c.image_size = 8;
    c.patch_size = 4;
    c.channels = 3;
    c.num_classes = 5;
    c.d_model = 16;
    c.depth = 2;
    c.ffn_dim = 32;
    c.distillation_token = std::string(type) == "concat";
    c.attention = attention_config(type);
    Generator gen(3);
    VisionTransformer model(c, gen);
    check_against_fixture(model, std::string("vit_") + type, [&](auto& in) { return model.forward(in.at("images")); });
  }
}

TEST(VisionTransformerModel, RejectsWrongImageShape) {
  VitConfig c;
  c.image_size = 8;
  c.patch_size = 4;
  c.d_model = 16;
  c.depth = 1;
  c.ffn_dim = 32;
  c.attention = attention_config("concat");
  Generator gen(1);
  VisionTransformer model(c, gen);
  EXPECT_THROW(model.forward(Tensor::zeros({2, 3, 9, 9})), Error);
  c.patch_size = 3;
  EXPECT_THROW(VisionTransformer(c, gen), Error);
}

TEST(Modules, StateDictErrorsListNames) {
  Generator gen(1);
  Linear l(3, 2, true, gen);
  try {
    l.load_state_dict({{"weight", Tensor::zeros({2, 4})}, {"extra", Tensor::zeros({1})}});
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("missing parameters: bias"), std::string::npos) << m;
    EXPECT_NE(m.find("weight (have [2, 3], got [2, 4])"), std::string::npos) << m;
    EXPECT_NE(m.find("unexpected parameters: extra"), std::string::npos) << m;
  }
}

TEST(Modules, DropoutNeedsAGeneratorAndEvalIsIdentity) {
  Dropout d(0.5f);
  Tensor x = Tensor::ones({4, 4});
  EXPECT_THROW(d.forward(x), Error);
  d.set_generator(std::make_shared<Generator>(1));
  EXPECT_FALSE(all_close(d.forward(x), x));
  d.eval();
  EXPECT_TRUE(d.forward(x).same(x));
}
