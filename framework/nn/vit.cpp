#include "nn/vit.h"

#include "autograd/ops.h"
#include "nn/init.h"

namespace cmha::nn {

VitBlock::VitBlock(const VitConfig& cfg, int64_t index, float drop_path_p, Generator& gen) {
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(cfg.d_model, cfg.layer_norm_eps));
  attn = register_module("attn", make_layer_attention(cfg.attention, cfg.attention_layers, index, "ViT self-attention",
                                                      cfg.d_model, gen));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(cfg.d_model, cfg.layer_norm_eps));
  mlp = register_module("mlp", std::make_shared<FeedForward>(cfg.d_model, cfg.ffn_dim, "gelu", cfg.dropout, gen));
  drop_path = register_module("drop_path", std::make_shared<DropPath>(drop_path_p));
  drop = register_module("drop", std::make_shared<Dropout>(cfg.dropout));
}

Tensor VitBlock::forward(const Tensor& x) const {
  Tensor h = norm1->forward(x);
  Tensor y = add(x, drop_path->forward(drop->forward(attn->forward(h, h, AttentionMask{}))));
  return add(y, drop_path->forward(drop->forward(mlp->forward(norm2->forward(y)))));
}

VisionTransformer::VisionTransformer(const VitConfig& cfg, Generator& gen) : cfg_(cfg) {
  CMHA_CHECK(cfg.patch_size > 0 && cfg.image_size % cfg.patch_size == 0,
             "model.image_size (" + std::to_string(cfg.image_size) + ") must be a multiple of model.patch_size (" +
                 std::to_string(cfg.patch_size) + ")");
  const int64_t D = cfg.d_model, tokens = cfg.num_patches() + 1 + (cfg.distillation_token ? 1 : 0);
  patch_embed = register_module("patch_embed",
                                std::make_shared<Linear>(cfg.channels * cfg.patch_size * cfg.patch_size, D, true, gen));
  cls_token = register_parameter("cls_token", Tensor::empty({1, 1, D}));
  init::trunc_normal_(cls_token, gen);
  if (cfg.distillation_token) {
    dist_token = register_parameter("dist_token", Tensor::empty({1, 1, D}));
    init::trunc_normal_(dist_token, gen);
  }
  pos_embed = register_parameter("pos_embed", Tensor::empty({1, tokens, D}));
  init::trunc_normal_(pos_embed, gen);
  pos_drop = register_module("pos_drop", std::make_shared<Dropout>(cfg.dropout));
  for (int64_t i = 0; i < cfg.depth; ++i) {
    // Stochastic depth grows linearly with depth (DeiT).
    const float p = cfg.depth > 1 ? cfg.drop_path * static_cast<float>(i) / static_cast<float>(cfg.depth - 1) : cfg.drop_path;
    blocks.push_back(register_module("blocks." + std::to_string(i), std::make_shared<VitBlock>(cfg, i, p, gen)));
  }
  norm = register_module("norm", std::make_shared<LayerNorm>(D, cfg.layer_norm_eps));
  head = register_module("head", std::make_shared<Linear>(D, cfg.num_classes, true, gen));
  init::trunc_normal_(head->weight, gen);
  if (cfg.distillation_token) {
    head_dist = register_module("head_dist", std::make_shared<Linear>(D, cfg.num_classes, true, gen));
    init::trunc_normal_(head_dist->weight, gen);
  }
}

Tensor VisionTransformer::forward_features(const Tensor& images) const {
  CMHA_CHECK(images.dim() == 4 && images.size(1) == cfg_.channels && images.size(2) == cfg_.image_size &&
                 images.size(3) == cfg_.image_size,
             "vision transformer: expected images [B, " + std::to_string(cfg_.channels) + ", " +
                 std::to_string(cfg_.image_size) + ", " + std::to_string(cfg_.image_size) + "], got " +
                 images.describe());
  const int64_t B = images.size(0), C = cfg_.channels, p = cfg_.patch_size, g = cfg_.image_size / p;
  // [B, C, g·p, g·p] -> [B, C, g, p, g, p] -> [B, g, g, C, p, p] -> [B, N, C·p·p]
  Tensor patches = images.view({B, C, g, p, g, p}).permute({0, 2, 4, 1, 3, 5}).reshape({B, g * g, C * p * p});
  // The residual stream is f32 (the cls and position embeddings are): a bf16
  // patch embedding under autocast joins it cast up.
  Tensor x = patch_embed->forward(patches).to(DType::f32);  // [B, N, D]
  std::vector<Tensor> parts{cls_token.expand({B, 1, cfg_.d_model})};
  if (dist_token.defined()) parts.push_back(dist_token.expand({B, 1, cfg_.d_model}));
  parts.push_back(x);
  x = pos_drop->forward(add(concat(parts, 1), pos_embed));  // [B, N + 1 (+1), D]
  for (auto& block : blocks) x = block->forward(x);
  return norm->forward(x);
}

Tensor VisionTransformer::forward(const Tensor& images) const {
  Tensor x = forward_features(images);
  Tensor logits = head->forward(x.select(1, 0));  // [B, classes]
  if (!head_dist) return logits;
  return mul_scalar(add(logits, head_dist->forward(x.select(1, 1))), 0.5f);
}

}  // namespace cmha::nn
