#include "nn/head_mask.h"

#include <map>
#include <sstream>

#include "nn/attention/registry.h"
#include "nn/transformer.h"
#include "nn/vit.h"
#include "tensor/error.h"

namespace cmha::nn {

namespace {

// A whole number from 0 (at most 9 digits), or -1.
int64_t index_of(const std::string& s) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(s);
}

}  // namespace

std::vector<HeadMaskItem> parse_head_mask(const std::string& text) {
  std::vector<HeadMaskItem> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    const std::string form = "--mask-heads: '" + item + "' must look like PLACE.LAYER:HEAD (encoder.3:5) or "
                             "PLACE.LAYER:dJ (a collaborative layer's shared dimension J)";
    const auto colon = item.find(':'), dot = item.rfind('.', colon);
    CMHA_CHECK(colon != std::string::npos && dot != std::string::npos && dot > 0, form);
    HeadMaskItem m;
    m.text = item;
    m.place = item.substr(0, dot);
    m.layer = index_of(item.substr(dot + 1, colon - dot - 1));
    std::string what = item.substr(colon + 1);
    m.shared_dim = !what.empty() && what[0] == 'd';
    m.index = index_of(m.shared_dim ? what.substr(1) : what);
    CMHA_CHECK(m.layer >= 0 && m.index >= 0, form);
    out.push_back(m);
  }
  CMHA_CHECK(!out.empty(), "--mask-heads needs heads, e.g. --mask-heads encoder.0:3,decoder.1:0");
  return out;
}

std::vector<AttentionLayer> attention_layers(Module& model) {
  std::vector<AttentionLayer> out;
  if (auto* t = dynamic_cast<Transformer*>(&model)) {
    for (size_t i = 0; i < t->encoder_layers.size(); ++i)
      out.push_back({"encoder", static_cast<int64_t>(i), t->encoder_layers[i]->self_attn.get()});
    for (size_t i = 0; i < t->decoder_layers.size(); ++i)
      out.push_back({"decoder", static_cast<int64_t>(i), t->decoder_layers[i]->self_attn.get()});
    for (size_t i = 0; i < t->decoder_layers.size(); ++i)
      out.push_back({"cross", static_cast<int64_t>(i), t->decoder_layers[i]->cross_attn.get()});
  } else if (auto* v = dynamic_cast<VisionTransformer*>(&model)) {
    for (size_t i = 0; i < v->blocks.size(); ++i) out.push_back({"attention", static_cast<int64_t>(i), v->blocks[i]->attn.get()});
  } else {
    throw Error("head masks apply to a transformer or a vision transformer");
  }
  return out;
}

void apply_head_mask(Module& model, const std::vector<HeadMaskItem>& items) {
  const std::vector<AttentionLayer> layers = attention_layers(model);
  // The places' names as the registry spells them, each to its short name.
  std::map<std::string, std::string> names;
  std::string known;
  for (const AttentionPlace& p : attention_places()) {
    bool present = false;
    for (const AttentionLayer& l : layers) present = present || l.place == p.short_name;
    if (!present) continue;
    for (const std::string& n : {p.name, p.short_name, p.alias})
      if (!n.empty()) names[n] = p.short_name;
    known += (known.empty() ? "" : ", ") + p.short_name;
  }
  std::map<Attention*, std::vector<int64_t>> heads, dims;
  for (const HeadMaskItem& m : items) {
    const auto name = names.find(m.place);
    CMHA_CHECK(name != names.end(), "--mask-heads " + m.text + ": this model has no attention place '" + m.place +
                                        "' (it has: " + known + ")");
    int64_t count = 0;
    Attention* a = nullptr;
    for (const AttentionLayer& l : layers)
      if (l.place == name->second) {
        ++count;
        if (l.layer == m.layer) a = l.attention;
      }
    CMHA_CHECK(a != nullptr, "--mask-heads " + m.text + ": there is no layer " + std::to_string(m.layer) + " (" +
                                 name->second + " has " +
                                 (count == 1 ? std::string("one layer, 0")
                                             : std::to_string(count) + " layers, 0 to " + std::to_string(count - 1)) +
                                 ")");
    const int64_t limit = m.shared_dim ? a->shared_dims() : a->config().heads;
    CMHA_CHECK(!m.shared_dim || limit > 0, "--mask-heads " + m.text + ": layer " + std::to_string(m.layer) + " of " +
                                               name->second + " is " + a->type() +
                                               " attention; only a collaborative layer has shared dimensions (dJ)");
    CMHA_CHECK(m.index < limit, "--mask-heads " + m.text + ": there is no " +
                                    (m.shared_dim ? "shared dimension " : "head ") + std::to_string(m.index) + " (" +
                                    name->second + "." + std::to_string(m.layer) + " has " + std::to_string(limit) +
                                    (m.shared_dim ? " shared dimensions" : " heads") + ", 0 to " +
                                    std::to_string(limit - 1) + ")");
    (m.shared_dim ? dims : heads)[a].push_back(m.index);
  }
  for (const auto& [a, h] : heads) a->mask_heads(h);
  for (const auto& [a, d] : dims) a->mask_shared_dims(d);
}

}  // namespace cmha::nn
