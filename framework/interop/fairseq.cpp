// fairseq's names of an encoder-decoder transformer (interop/import_export.h).
// fairseq's TransformerModel is cmha's Transformer layer for layer once
// three things agree: positions start at padding_idx + 1 = 2
// (model.position_offset; a learned table keeps fairseq's two leading rows),
// pre-norm models end each stack with a LayerNorm (model.*_final_norm), and
// the source and target share one vocabulary size (model.vocab_size).
#include <cmath>

#include "interop/mapping.h"
#include "run/model_config.h"

namespace cmha::interop {

namespace {

constexpr int64_t kPositionOffset = 2;  // fairseq's make_positions: padding_idx (1) + 1

// Where a fairseq state dict keeps what a layout choice moved.
struct FairseqLayout {
  bool fused_in_proj = false;                              // in_proj_weight/in_proj_bias (fairseq before 2019)
  std::string output = "decoder.output_projection.weight"; // or "decoder.embed_out"; "" = decoder.embed_tokens
};

void attention_links(Links& l, const std::string& foreign, const std::string& cmha, int64_t d, bool fused) {
  if (fused) {
    l.fused_qkv(foreign + ".in_proj_weight", foreign + ".in_proj_bias", cmha, d, d);
  } else {
    l.linear(foreign + ".q_proj", cmha + ".query", d, d);
    l.linear(foreign + ".k_proj", cmha + ".key", d, d);
    l.linear(foreign + ".v_proj", cmha + ".value", d, d);
  }
  l.linear(foreign + ".out_proj", cmha + ".out", d, d);
}

Links fairseq_links(const nn::TransformerConfig& c, const FairseqLayout& layout) {
  Links l;
  const int64_t D = c.d_model, V = c.src_vocab, F = c.ffn_dim;
  if (c.share_all_embeddings) {
    TensorLink tied{{"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}, {V, D}, {{"src_embed.weight", {V, D}}}};
    if (!layout.output.empty()) tied.foreign.push_back(layout.output);
    l.list.push_back(tied);
  } else {
    l.same("encoder.embed_tokens.weight", "src_embed.weight", {V, D});
    l.same("decoder.embed_tokens.weight", "tgt_embed.weight", {V, D});
    l.same(layout.output.empty() ? "decoder.embed_tokens.weight" : layout.output, "output.weight", {V, D});
  }
  if (c.positions == "learned") {
    const Shape table{c.max_positions + c.position_offset, D};
    l.same("encoder.embed_positions.weight", "src_positions.weight", table);
    l.same("decoder.embed_positions.weight", "tgt_positions.weight", table);
  }
  for (int64_t i = 0; i < c.encoder_layers; ++i) {
    const std::string e = "encoder.layers." + std::to_string(i);
    attention_links(l, e + ".self_attn", e + ".self_attn", D, layout.fused_in_proj);
    l.norm(e + ".self_attn_layer_norm", e + ".self_attn_norm", D);
    l.linear(e + ".fc1", e + ".ffn.fc1", F, D);
    l.linear(e + ".fc2", e + ".ffn.fc2", D, F);
    l.norm(e + ".final_layer_norm", e + ".ffn_norm", D);
  }
  for (int64_t i = 0; i < c.decoder_layers; ++i) {
    const std::string d = "decoder.layers." + std::to_string(i);
    attention_links(l, d + ".self_attn", d + ".self_attn", D, layout.fused_in_proj);
    l.norm(d + ".self_attn_layer_norm", d + ".self_attn_norm", D);
    attention_links(l, d + ".encoder_attn", d + ".cross_attn", D, layout.fused_in_proj);
    l.norm(d + ".encoder_attn_layer_norm", d + ".cross_attn_norm", D);
    l.linear(d + ".fc1", d + ".ffn.fc1", F, D);
    l.linear(d + ".fc2", d + ".ffn.fc2", D, F);
    l.norm(d + ".final_layer_norm", d + ".ffn_norm", D);
  }
  if (c.encoder_final_norm) l.norm("encoder.layer_norm", "encoder.norm", D);
  if (c.decoder_final_norm) l.norm("decoder.layer_norm", "decoder.norm", D);
  return l;
}

int64_t count_layers(const ForeignFile& f, const std::string& stack) {
  int64_t n = 0;
  while (f.has(stack + ".layers." + std::to_string(n) + ".self_attn_layer_norm.weight")) ++n;
  return n;
}

// The fairseq command-line settings of a model, as a note.
std::string fairseq_settings(const nn::TransformerConfig& c) {
  const auto i = [](int64_t v) { return std::to_string(v); };
  std::string s = "fairseq: --arch transformer --encoder-embed-dim " + i(c.d_model) + " --decoder-embed-dim " + i(c.d_model) +
                  " --encoder-ffn-embed-dim " + i(c.ffn_dim) + " --decoder-ffn-embed-dim " + i(c.ffn_dim) +
                  " --encoder-layers " + i(c.encoder_layers) + " --decoder-layers " + i(c.decoder_layers) +
                  " --encoder-attention-heads " + i(c.encoder_attention.heads) + " --decoder-attention-heads " +
                  i(c.decoder_attention.heads) + " --activation-fn " + c.activation;
  if (c.share_all_embeddings) s += " --share-all-embeddings";
  if (c.pre_norm) s += " --encoder-normalize-before --decoder-normalize-before";
  if (c.positions == "learned")
    s += " --encoder-learned-pos --decoder-learned-pos --max-source-positions " + i(c.max_positions) +
         " --max-target-positions " + i(c.max_positions);
  if (!c.scale_embedding) s += " --no-scale-embedding";
  return s + " (a .pt of {'model': state_dict} for fairseq's loaders)";
}

}  // namespace

ImportPlan plan_fairseq_import(const ForeignFile& f, const ImportOptions& opt) {
  const Tensor& src = f.need("encoder.embed_tokens.weight", "'src_embed.weight'", 2);  // [V, D]
  const int64_t V = src.size(0), D = src.size(1);
  const Tensor& tgt = f.need("decoder.embed_tokens.weight", "'tgt_embed.weight', or 'src_embed.weight' when shared", 2);
  CMHA_CHECK(tgt.size(0) == V && tgt.size(1) == D,
             "'" + f.path + "' has source embeddings " + shape_str(src.shape()) + " and target embeddings " +
                 shape_str(tgt.shape()) + ", but cmha's model.vocab_size and d_model are one size for both");
  f.need("encoder.layers.0.self_attn_layer_norm.weight", "'encoder.layers.0.self_attn_norm.weight'", 1);
  const int64_t enc = count_layers(f, "encoder"), dec = count_layers(f, "decoder");
  FairseqLayout layout;
  layout.fused_in_proj = f.has("encoder.layers.0.self_attn.in_proj_weight");
  const int64_t F = f.need("encoder.layers.0.fc1.weight", "'encoder.layers.0.ffn.fc1.weight'", 2).size(0);
  const bool pre = f.has("encoder.layer_norm.weight");
  CMHA_CHECK(pre == f.has("decoder.layer_norm.weight"),
             "'" + f.path + "' has a " + (pre ? "pre" : "post") + "-norm encoder and a " + (pre ? "post" : "pre") +
                 "-norm decoder ('" + (pre ? "encoder" : "decoder") + ".layer_norm' only), but cmha's model.pre_norm is one setting for both");
  const bool learned = f.has("encoder.embed_positions.weight");
  int64_t max_positions = 1024;
  if (learned) {
    const Tensor& table = f.need("encoder.embed_positions.weight", "'src_positions.weight'", 2);  // [max + 2, D]
    CMHA_CHECK(table.size(0) > kPositionOffset, "'encoder.embed_positions.weight' of '" + f.path + "' has " +
                                                    std::to_string(table.size(0)) + " rows, not padding_idx + 1 = 2 and more");
    max_positions = table.size(0) - kPositionOffset;
  }
  CMHA_CHECK(learned == f.has("decoder.embed_positions.weight"),
             "'" + f.path + "': the encoder's positions are " + (learned ? "learned" : "sinusoidal") + " and the decoder's not, "
             "but cmha's model.positions is one setting for both");
  if (f.has("decoder.output_projection.weight")) layout.output = "decoder.output_projection.weight";
  else if (f.has("decoder.embed_out")) layout.output = "decoder.embed_out";
  else layout.output = "";
  const bool tied_output = layout.output.empty() || f.equal(layout.output, "decoder.embed_tokens.weight");
  const bool share_all = f.equal("encoder.embed_tokens.weight", "decoder.embed_tokens.weight") && tied_output;

  ImportPlan p;
  const int64_t heads = resolve_heads(f, opt, D, D, 0, p.notes);
  const std::string activation = opt.activation.empty() ? "relu" : opt.activation;
  CMHA_CHECK(activation == "relu" || activation == "gelu", "--activation is relu or gelu, not '" + activation + "'");
  const auto i = [](int64_t v) { return std::to_string(v); };
  const std::string yes_no_pre = pre ? "true" : "false";
  p.recipe = {"model.kind=transformer", "model.vocab_size=" + i(V), "model.d_model=" + i(D), "model.ffn_dim=" + i(F),
              "model.encoder_layers=" + i(enc), "model.decoder_layers=" + i(dec), "model.pre_norm=" + yes_no_pre,
              "model.encoder_final_norm=" + yes_no_pre, "model.decoder_final_norm=" + yes_no_pre,
              std::string("model.share_all_embeddings=") + (share_all ? "true" : "false"),
              std::string("model.scale_embedding=") + (opt.scale_embedding ? "true" : "false"),
              std::string("model.positions=") + (learned ? "learned" : "sinusoidal"),
              "model.max_positions=" + i(max_positions), "model.position_offset=" + i(kPositionOffset),
              "model.layer_norm_eps=1e-5", "model.activation=" + activation, "model.attention.type=concat",
              "model.attention.heads=" + i(heads), "model.attention.key_dim=" + i(D), "model.attention.value_dim=" + i(D),
              "model.attention.bias=true", "train.task=translation"};
  p.summary = std::string("fairseq transformer: d_model ") + i(D) + ", " + i(enc) + "+" + i(dec) + " layers, " + i(heads) +
              " heads, ffn " + i(F) + ", vocabulary " + i(V) + (share_all ? " shared" : "") + ", " +
              (pre ? "pre" : "post") + "-norm, " + (learned ? "learned" : "sinusoidal") + " positions, " + activation;
  p.notes.push_back("positions from padding_idx + 1 = 2 as fairseq's make_positions (model.position_offset 2)");
  p.notes.push_back("activation " + activation + (opt.activation.empty() ? " (fairseq's default; --activation gelu for models trained with it)" : ""));
  p.notes.push_back(std::string("embeddings ") + (opt.scale_embedding ? "scaled by sqrt(d_model) (--no-scale-embedding for models trained without)" : "not scaled"));
  if (!share_all && tied_output)
    p.notes.push_back("the output projection is the target embedding in fairseq; cmha ties all three embeddings or none, "
                      "so it becomes an untied copy");
  p.notes.push_back("token ids are those of the model's fairseq dictionary (cmha's translation task uses its own "
                    "SentencePiece vocabulary)");
  nn::TransformerConfig c = run::transformer_config(run::Recipe::parse("", f.path + " (imported recipe)", p.recipe));
  p.links = fairseq_links(c, layout);
  for (const char* stack : {"encoder", "decoder"})
    for (const char* name : {".version", ".embed_positions._float_tensor", ".embed_positions.weights"})
      p.ignorable.push_back(stack + std::string(name));
  return p;
}

ExportPlan plan_fairseq_export(const run::Recipe& r) {
  CMHA_CHECK(r.string("model.kind") == "transformer", "the checkpoint's model.kind is '" + r.string("model.kind") +
                                                          "', but fairseq holds encoder-decoder transformers");
  nn::TransformerConfig c = run::transformer_config(r);
  c.encoder_attention = exportable_attention(r, "model.encoder_attention", "fairseq", true);
  c.decoder_attention = exportable_attention(r, "model.decoder_attention", "fairseq", true);
  c.cross_attention = exportable_attention(r, "model.cross_attention", "fairseq", true);
  CMHA_CHECK(c.cross_attention.heads == c.decoder_attention.heads,
             "model.cross_attention.heads (" + std::to_string(c.cross_attention.heads) + ") differs from model.decoder_attention.heads (" +
                 std::to_string(c.decoder_attention.heads) + "), but fairseq's decoder layers have one number of heads");
  CMHA_CHECK(c.encoder_final_norm == c.pre_norm && c.decoder_final_norm == c.pre_norm,
             std::string("model.encoder_final_norm and model.decoder_final_norm differ from model.pre_norm (") +
                 (c.pre_norm ? "true" : "false") + "), but fairseq ends a stack with a LayerNorm exactly when it is pre-norm");
  CMHA_CHECK(c.position_offset == kPositionOffset,
             "model.position_offset is " + std::to_string(c.position_offset) +
                 ", but fairseq's positions start at padding_idx + 1 = 2 (a model trained with model.position_offset=2 exports)");
  ExportPlan p;
  p.links = fairseq_links(c, FairseqLayout{});
  // fairseq upgrades (and drops the final LayerNorms of) a stack without version 3.
  for (const char* name : {"encoder.version", "decoder.version"}) p.extra[name] = Tensor::from_vector({3.0f}, {1});
  p.notes.push_back(fairseq_settings(c));
  const double eps = r.real("model.layer_norm_eps");
  if (std::fabs(eps - 1e-5) > 1e-12)
    p.notes.push_back("fairseq's LayerNorms use eps 1e-5, this model " + number(eps) + " (model.layer_norm_eps)");
  return p;
}

}  // namespace cmha::interop
