#pragma once
// Vision transformer as in DeiT (Touvron et al. 2021): patch embedding (a
// linear map of flattened C×p×p patches, the same numbers as timm's
// convolution weight reshaped), class token, optional distillation token,
// learned positions, pre-norm blocks with GELU and drop path, a linear head.
#include <vector>

#include "nn/attention/attention.h"
#include "nn/feed_forward.h"

namespace cmha::nn {

struct VitConfig {
  int64_t image_size = 224, patch_size = 16, channels = 3, num_classes = 1000;
  int64_t d_model = 768, depth = 12, ffn_dim = 3072;
  AttentionConfig attention;
  LayerAttention attention_layers;  // blocks whose attention differs (attention_for_layer)
  float dropout = 0.0f;     // after the position embedding and in the blocks' residual branches
  float drop_path = 0.1f;   // at the last block; linearly increasing from 0 at the first
  bool distillation_token = false;
  float layer_norm_eps = 1e-6f;
  int64_t num_patches() const { return (image_size / patch_size) * (image_size / patch_size); }
};

class VitBlock : public Module {
 public:
  VitBlock(const VitConfig& cfg, int64_t index, float drop_path, Generator& gen);  // index: the block's, from 0
  Tensor forward(const Tensor& x) const;  // [B, N, D] -> [B, N, D]
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Attention> attn;
  std::shared_ptr<FeedForward> mlp;
  std::shared_ptr<DropPath> drop_path;
  std::shared_ptr<Dropout> drop;
};

class VisionTransformer : public Module {
 public:
  VisionTransformer(const VitConfig& cfg, Generator& init_gen);
  // images [B, C, H, W] -> tokens [B, N + 1 (+1), D] after the final norm
  Tensor forward_features(const Tensor& images) const;
  // images -> logits [B, classes]; with a distillation token the mean of both heads.
  Tensor forward(const Tensor& images) const;
  const VitConfig& config() const { return cfg_; }

  std::shared_ptr<Linear> patch_embed, head, head_dist;
  Tensor cls_token, dist_token, pos_embed;
  std::vector<std::shared_ptr<VitBlock>> blocks;
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<Dropout> pos_drop;

 private:
  VitConfig cfg_;
};

}  // namespace cmha::nn
