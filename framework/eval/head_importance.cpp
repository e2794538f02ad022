#include "eval/head_importance.h"

#include "nn/head_mask.h"

namespace cmha::eval {

HeadImportance head_importance(nn::Module& model, const std::function<double()>& loss,
                               const std::function<void(const LayerImportance&, int64_t head)>& on_head) {
  const std::vector<nn::AttentionLayer> layers = nn::attention_layers(model);
  for (const nn::AttentionLayer& l : layers) {
    l.attention->mask_heads({});
    if (l.attention->shared_dims() > 0) l.attention->mask_shared_dims({});
  }
  HeadImportance out;
  out.base_loss = loss();
  for (const nn::AttentionLayer& l : layers) {
    LayerImportance li{l.place, l.layer, l.attention->type(), {}, {}};
    for (int64_t h = 0; h < l.attention->config().heads; ++h) {
      l.attention->mask_heads({h});
      const double masked = loss();
      li.loss.push_back(masked);
      li.increase.push_back(masked - out.base_loss);
      if (on_head) on_head(li, h);
    }
    l.attention->mask_heads({});
    out.layers.push_back(std::move(li));
  }
  return out;
}

}  // namespace cmha::eval
