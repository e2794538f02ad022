// timm's and Hugging Face's names of a ViT/DeiT (interop/import_export.h). Both are
// cmha's VisionTransformer block for block: pre-norm blocks with GELU, a
// convolution patch embedding (cmha's linear map of flattened C×p×p patches,
// the same numbers), class (and distillation) tokens and learned positions
// covering them; DeiT's two heads averaged at inference.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "interop/mapping.h"
#include "run/model_config.h"

namespace cmha::interop {

namespace {

namespace fs = std::filesystem;

// The names one framework gives a ViT's parts. Block parts follow
// `block` + "<i>.".
struct VitNaming {
  std::string cls, dist, pos, patch;  // patch: the convolution
  std::string block, norm1, norm2, fc1, fc2, proj;
  std::string qkv;                    // timm: one fused projection
  std::string q, k, v;                // Hugging Face: three
  std::string norm, head, head_dist;
};

VitNaming timm_naming() {
  return {"cls_token", "dist_token", "pos_embed", "patch_embed.proj", "blocks.", "norm1", "norm2", "mlp.fc1",
          "mlp.fc2",   "attn.proj",  "attn.qkv",  "",                 "",        "",      "norm",  "head",
          "head_dist"};
}

// ViTForImageClassification ("vit.") or DeiTForImageClassificationWithTeacher ("deit.").
VitNaming hf_naming(bool deit) {
  const std::string p = deit ? "deit." : "vit.";
  return {p + "embeddings.cls_token", p + "embeddings.distillation_token", p + "embeddings.position_embeddings",
          p + "embeddings.patch_embeddings.projection", p + "encoder.layer.", "layernorm_before", "layernorm_after",
          "intermediate.dense", "output.dense", "attention.output.dense", "", "attention.attention.query",
          "attention.attention.key", "attention.attention.value", p + "layernorm",
          deit ? "cls_classifier" : "classifier", "distillation_classifier"};
}

// Every tensor of the model `c` (attention key_dim resolved) under naming `n`.
Links vit_links(const nn::VitConfig& c, const VitNaming& n) {
  Links l;
  const int64_t D = c.d_model, C = c.channels, p = c.patch_size, A = c.attention.key_dim, F = c.ffn_dim,
                K = c.num_classes, tokens = c.num_patches() + (c.distillation_token ? 2 : 1);
  l.one(n.patch + ".weight", {D, C, p, p}, "patch_embed.weight", {D, C * p * p});  // conv [D, C, p, p] = linear [D, C·p·p]
  l.same(n.patch + ".bias", "patch_embed.bias", {D});
  l.same(n.cls, "cls_token", {1, 1, D});
  if (c.distillation_token) l.same(n.dist, "dist_token", {1, 1, D});
  l.same(n.pos, "pos_embed", {1, tokens, D});
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string b = n.block + std::to_string(i) + ".", m = "blocks." + std::to_string(i) + ".";
    l.norm(b + n.norm1, m + "norm1", D);
    if (!n.qkv.empty()) {
      l.fused_qkv(b + n.qkv + ".weight", b + n.qkv + ".bias", m + "attn", A, D);
    } else {
      l.linear(b + n.q, m + "attn.query", A, D);
      l.linear(b + n.k, m + "attn.key", A, D);
      l.linear(b + n.v, m + "attn.value", A, D);
    }
    l.linear(b + n.proj, m + "attn.out", D, A);
    l.norm(b + n.norm2, m + "norm2", D);
    l.linear(b + n.fc1, m + "mlp.fc1", F, D);
    l.linear(b + n.fc2, m + "mlp.fc2", D, F);
  }
  l.norm(n.norm, "norm", D);
  l.linear(n.head, "head", K, D);
  if (c.distillation_token) l.linear(n.head_dist, "head_dist", K, D);
  return l;
}

// The shape of the ViT the tensors of `f` describe (heads, eps and
// activation are not in the tensors: the caller sets them).
nn::VitConfig infer_vit(const ForeignFile& f, const VitNaming& n) {
  nn::VitConfig c;
  const Tensor& patch = f.need(n.patch + ".weight", "'patch_embed.weight'", 4);  // [D, C, p, p]
  c.d_model = patch.size(0);
  c.channels = patch.size(1);
  c.patch_size = patch.size(2);
  CMHA_CHECK(patch.size(3) == c.patch_size, "'" + f.path + "': patches of " + std::to_string(patch.size(2)) + "x" +
                                                std::to_string(patch.size(3)) + " pixels ('" + n.patch +
                                                ".weight'), but cmha's are square");
  const std::string b0 = n.block + "0.";
  f.need(b0 + n.norm1 + ".weight", "'blocks.0.norm1.weight'", 1);
  c.depth = 0;
  while (f.has(n.block + std::to_string(c.depth) + "." + n.norm1 + ".weight")) ++c.depth;
  if (!n.qkv.empty()) {
    const Tensor& qkv = f.need(b0 + n.qkv + ".weight", "'blocks.0.attn.query.weight', 'key.weight', 'value.weight'", 2);
    CMHA_CHECK(qkv.size(0) % 3 == 0, "tensor '" + b0 + n.qkv + ".weight' of '" + f.path + "' has " +
                                         std::to_string(qkv.size(0)) + " rows, not three equal parts q, k, v");
    c.attention.key_dim = qkv.size(0) / 3;
  } else {
    c.attention.key_dim = f.need(b0 + n.q + ".weight", "'blocks.0.attn.query.weight'", 2).size(0);
  }
  c.attention.value_dim = c.attention.key_dim;
  c.ffn_dim = f.need(b0 + n.fc1 + ".weight", "'blocks.0.mlp.fc1.weight'", 2).size(0);
  c.distillation_token = f.has(n.dist);
  const int64_t prefix = c.distillation_token ? 2 : 1;
  const int64_t patches = f.need(n.pos, "'pos_embed'", 3).size(1) - prefix;
  const auto grid = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(std::max<int64_t>(patches, 0)))));
  CMHA_CHECK(patches > 0 && grid * grid == patches,
             "'" + n.pos + "' of '" + f.path + "' holds " + std::to_string(patches) +
                 " patch positions besides the class token(s), not a square grid");
  c.image_size = grid * c.patch_size;
  c.num_classes = f.need(n.head + ".weight", "'head.weight'", 2).size(0);
  return c;
}

std::string list_of(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + number(v[i]);
  return s + "]";
}

const std::vector<double> kImagenetMean{0.485, 0.456, 0.406}, kImagenetStd{0.229, 0.224, 0.225};

// The recipe lines of an imported ViT: the model, and ImageFolder data
// normalised by `mean`/`std` (3 channels; others keep the IDX defaults).
ImportPlan vit_plan(const nn::VitConfig& c, double eps, const std::string& family, const std::vector<double>& mean,
                    const std::vector<double>& std) {
  ImportPlan p;
  const auto i = [](int64_t v) { return std::to_string(v); };
  p.recipe = {"model.kind=vit", "model.image_size=" + i(c.image_size), "model.patch_size=" + i(c.patch_size),
              "model.channels=" + i(c.channels), "model.num_classes=" + i(c.num_classes), "model.d_model=" + i(c.d_model),
              "model.depth=" + i(c.depth), "model.ffn_dim=" + i(c.ffn_dim),
              std::string("model.distillation_token=") + (c.distillation_token ? "true" : "false"),
              "model.layer_norm_eps=" + number(eps), "model.dropout=0.0", "model.attention.type=concat",
              "model.attention.heads=" + i(c.attention.heads), "model.attention.key_dim=" + i(c.attention.key_dim),
              "model.attention.value_dim=" + i(c.attention.value_dim), "model.attention.bias=true",
              "train.task=image_classification"};
  if (c.channels == 3)
    p.recipe.insert(p.recipe.end(), {"data.format=image_folder", "data.root=data/imagenet",
                                     "data.channel_mean=" + list_of(mean), "data.channel_std=" + list_of(std)});
  p.summary = family + (c.distillation_token ? " with a distillation token" : "") + ": d_model " + i(c.d_model) + ", " +
              i(c.depth) + " blocks, " + i(c.attention.heads) + " heads, ffn " + i(c.ffn_dim) + ", " + i(c.image_size) +
              " px in patches of " + i(c.patch_size) + ", " + i(c.channels) + " channels, " + i(c.num_classes) +
              " classes";
  if (c.attention.key_dim != c.d_model) p.summary += ", attention " + i(c.attention.key_dim) + " wide";
  return p;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  CMHA_CHECK(in.good(), "cannot read '" + path + "'");
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    CMHA_CHECK(j.is_object(), "'" + path + "' is not a JSON object");
    return j;
  } catch (const nlohmann::json::exception& e) {
    throw Error("'" + path + "' is not valid JSON: " + e.what());
  }
}

// Field `key` of a Hugging Face config, of JSON type `kind`, or `fallback` when absent.
template <typename T>
T config_value(const nlohmann::json& j, const std::string& path, const char* key, T fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error("'" + path + "': " + key + " is " + j[key].dump() + ", not the kind of value it should be");
  }
}

// timm's constructor for the exported model, as a note.
std::string timm_constructor(const nn::VitConfig& c) {
  const auto i = [](int64_t v) { return std::to_string(v); };
  std::string s = std::string("timm: ") + (c.distillation_token ? "VisionTransformerDistilled" : "VisionTransformer") +
                  "(img_size=" + i(c.image_size) + ", patch_size=" + i(c.patch_size) + ", in_chans=" + i(c.channels) +
                  ", num_classes=" + i(c.num_classes) + ", embed_dim=" + i(c.d_model) + ", depth=" + i(c.depth) +
                  ", num_heads=" + i(c.attention.heads) +
                  ", mlp_ratio=" + number(static_cast<double>(c.ffn_dim) / static_cast<double>(c.d_model)) +
                  ", qkv_bias=True";
  s += "), then load_state_dict";
  if (c.attention.key_dim != c.d_model)
    s += " (its attention is " + i(c.attention.key_dim) + " wide: blocks of timm's Attention(attn_dim=" +
         i(c.attention.key_dim) + "))";
  return s;
}

nn::VitConfig exportable_vit(const run::Recipe& r, const std::string& format, bool full_width) {
  CMHA_CHECK(r.string("model.kind") == "vit", "the checkpoint's model.kind is '" + r.string("model.kind") + "', but " +
                                                  format + " holds vision transformers (ViT, DeiT)");
  nn::VitConfig c = run::vit_config(r);
  c.attention = exportable_attention(r, "model.attention", format, full_width);
  return c;
}

}  // namespace

ImportPlan plan_timm_import(const ForeignFile& f, const ImportOptions& opt) {
  const VitNaming n = timm_naming();
  nn::VitConfig c = infer_vit(f, n);
  std::vector<std::string> notes;
  c.attention.heads = resolve_heads(f, opt, c.d_model, c.attention.key_dim, 0, notes);
  const double eps = 1e-6;  // timm's ViT blocks
  ImportPlan p = vit_plan(c, eps, c.distillation_token ? "timm DeiT" : "timm ViT", kImagenetMean, kImagenetStd);
  p.notes = notes;
  p.notes.push_back("LayerNorm eps 1e-6 and exact GELU, as timm's VisionTransformer");
  if (c.channels == 3)
    p.notes.push_back("data normalised with ImageNet's mean and std as DeiT (a ViT trained with mean = std = 0.5 needs "
                      "data.channel_mean=[0.5,0.5,0.5] data.channel_std=[0.5,0.5,0.5])");
  p.links = vit_links(c, n);
  return p;
}

ExportPlan plan_timm_export(const run::Recipe& r) {
  const nn::VitConfig c = exportable_vit(r, "timm", false);
  ExportPlan p;
  p.links = vit_links(c, timm_naming());
  p.notes.push_back(timm_constructor(c));
  const double eps = r.real("model.layer_norm_eps");
  if (std::fabs(eps - 1e-6) > 1e-12)
    p.notes.push_back("timm's blocks use LayerNorm eps 1e-6, this model " + number(eps) +
                      " (model.layer_norm_eps): pass norm_layer=partial(nn.LayerNorm, eps=" + number(eps) +
                      ") for the same function");
  return p;
}

ImportPlan plan_hf_vit_import(const ForeignFile& f, const ImportOptions& opt) {
  const bool deit = f.has("deit.embeddings.cls_token");
  CMHA_CHECK(deit || f.has("vit.embeddings.cls_token"),
             "'" + f.path + "' has neither 'vit.embeddings.cls_token' nor 'deit.embeddings.cls_token' (cmha's "
             "'cls_token'): is it a Hugging Face ViT or DeiT state dict?");
  const VitNaming n = hf_naming(deit);
  nn::VitConfig c = infer_vit(f, n);
  CMHA_CHECK(!deit || c.distillation_token, "'" + f.path + "' is a DeiT without 'deit.embeddings.distillation_token' (cmha's 'dist_token')");
  std::vector<std::string> notes;
  // config.json and preprocessor_config.json beside the weights, as from_pretrained finds them.
  const fs::path dir = fs::path(f.path).parent_path();
  const std::string config = !opt.config_path.empty() ? opt.config_path : (dir / "config.json").string();
  int64_t config_heads = 0;
  double eps = 1e-12;  // Hugging Face's ViTConfig and DeiTConfig default
  if (!opt.config_path.empty() || fs::exists(config)) {
    const nlohmann::json j = read_json(config);
    config_heads = config_value<int64_t>(j, config, "num_attention_heads", 0);
    eps = config_value<double>(j, config, "layer_norm_eps", 1e-12);
    const auto act = config_value<std::string>(j, config, "hidden_act", "gelu");
    CMHA_CHECK(act == "gelu", "'" + config + "': hidden_act is '" + act + "', but cmha's ViT blocks use exact GELU ('gelu')");
    const auto width = config_value<int64_t>(j, config, "hidden_size", c.d_model);
    CMHA_CHECK(width == c.d_model, "'" + config + "': hidden_size is " + std::to_string(width) + ", but the weights of '" +
                                       f.path + "' are " + std::to_string(c.d_model) + " wide");
    notes.push_back("LayerNorm eps " + number(eps) + " from '" + config + "'");
  } else {
    notes.push_back("LayerNorm eps 1e-12 (Hugging Face's default; no config.json beside the weights)");
  }
  c.attention.heads = resolve_heads(f, opt, c.d_model, c.attention.key_dim, config_heads, notes);
  std::vector<double> mean = kImagenetMean, std = kImagenetStd;
  const fs::path pre = dir / "preprocessor_config.json";
  if (c.channels == 3 && fs::exists(pre)) {
    const nlohmann::json j = read_json(pre.string());
    mean = config_value<std::vector<double>>(j, pre.string(), "image_mean", mean);
    std = config_value<std::vector<double>>(j, pre.string(), "image_std", std);
    CMHA_CHECK(mean.size() == 3 && std.size() == 3, "'" + pre.string() + "': image_mean and image_std need 3 values each");
    notes.push_back("data normalisation from '" + pre.string() + "'");
  }
  ImportPlan p = vit_plan(c, eps, deit ? "Hugging Face DeiT" : "Hugging Face ViT", mean, std);
  p.notes = notes;
  p.links = vit_links(c, n);
  return p;
}

ExportPlan plan_hf_vit_export(const run::Recipe& r) {
  const nn::VitConfig c = exportable_vit(r, "hf-vit", true);
  const bool deit = c.distillation_token;
  ExportPlan p;
  p.links = vit_links(c, hf_naming(deit));
  nlohmann::ordered_json j;
  j["architectures"] = {deit ? "DeiTForImageClassificationWithTeacher" : "ViTForImageClassification"};
  j["model_type"] = deit ? "deit" : "vit";
  j["hidden_size"] = c.d_model;
  j["num_hidden_layers"] = c.depth;
  j["num_attention_heads"] = c.attention.heads;
  j["intermediate_size"] = c.ffn_dim;
  j["hidden_act"] = "gelu";
  j["hidden_dropout_prob"] = 0.0;
  j["attention_probs_dropout_prob"] = 0.0;
  j["layer_norm_eps"] = r.real("model.layer_norm_eps");
  j["image_size"] = c.image_size;
  j["patch_size"] = c.patch_size;
  j["num_channels"] = c.channels;
  j["qkv_bias"] = true;
  nlohmann::ordered_json labels = nlohmann::ordered_json::object();
  for (int64_t k = 0; k < c.num_classes; ++k) labels[std::to_string(k)] = "LABEL_" + std::to_string(k);
  j["id2label"] = labels;
  p.side_files["config.json"] = j.dump(2) + "\n";
  p.notes.push_back(std::string("Hugging Face: ") + (deit ? "DeiTForImageClassificationWithTeacher" : "ViTForImageClassification") +
                    ".from_pretrained(DIR) reads DIR/config.json (written beside) and DIR/model.safetensors");
  return p;
}

}  // namespace cmha::interop
