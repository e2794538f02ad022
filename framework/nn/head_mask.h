#pragma once
// Head ablation (Michel et al. 2019): which attention heads of a model to
// silence, as `cmha eval|score|translate --mask-heads` and `cmha heads
// --importance` name them. An item is PLACE.LAYER:HEAD (head HEAD of layer
// LAYER at PLACE, both from 0) or PLACE.LAYER:dJ (shared query/key dimension J
// of a collaborative layer); PLACE is a place's short name of
// nn/attention/registry.h (encoder, decoder, cross; attention or vit).
#include <string>
#include <vector>

#include "nn/attention/attention.h"

namespace cmha::nn {

struct HeadMaskItem {
  std::string text;          // as given, for errors: "encoder.3:5"
  std::string place;         // as given: "encoder"
  int64_t layer = 0;
  bool shared_dim = false;   // dJ: a collaborative layer's shared dimension
  int64_t index = 0;         // the head, or the dimension
};

// "encoder.0:1,cross.2:d7": a malformed item is a cmha::Error quoting it.
std::vector<HeadMaskItem> parse_head_mask(const std::string& text);

// One attention layer of a model, where `cmha` names it.
struct AttentionLayer {
  std::string place;   // the place's short name: "encoder"
  int64_t layer = 0;
  Attention* attention = nullptr;
};
// Every attention layer of a Transformer or VisionTransformer, place by
// place in model order (another module is a cmha::Error).
std::vector<AttentionLayer> attention_layers(Module& model);

// Silences the items' heads and dimensions (replacing any earlier mask of
// those layers). A place the model lacks, a layer or a head it does not have,
// or a dimension of a layer that is not collaborative is one cmha::Error
// naming the item and what exists.
void apply_head_mask(Module& model, const std::vector<HeadMaskItem>& items);

}  // namespace cmha::nn
