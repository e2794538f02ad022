#pragma once
// What each format of interop/import_export.h fills in (interop_vit.cpp,
// interop_fairseq.cpp) and the generic code applies (interop.cpp): which
// foreign tensor holds which cmha tensors, and the recipe of the model.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "interop/import_export.h"
#include "nn/attention/attention.h"
#include "run/recipe.h"

namespace cmha::interop {

// One foreign tensor and the cmha tensors it holds: its elements, in order,
// are theirs one after another (a fused qkv [3A, D] holds query, key and
// value [A, D]; a convolution [D, C, p, p] holds a linear weight [D, C·p·p]).
// Several foreign names are copies of one tensor (tied embeddings): an
// import reads the first and checks that the others are equal to it, an
// export writes them all.
struct TensorLink {
  std::vector<std::string> foreign;
  Shape foreign_shape;
  std::vector<std::pair<std::string, Shape>> cmha;
};

struct Links {
  std::vector<TensorLink> list;
  // A foreign tensor holding one cmha tensor (the shapes may differ, not the element count).
  void one(const std::string& foreign, const Shape& foreign_shape, const std::string& cmha, const Shape& cmha_shape) {
    list.push_back({{foreign}, foreign_shape, {{cmha, cmha_shape}}});
  }
  void same(const std::string& foreign, const std::string& cmha, const Shape& shape) { one(foreign, shape, cmha, shape); }
  // A linear layer: weight [out, in] and bias [out] under each prefix.
  void linear(const std::string& foreign, const std::string& cmha, int64_t out, int64_t in) {
    same(foreign + ".weight", cmha + ".weight", {out, in});
    same(foreign + ".bias", cmha + ".bias", {out});
  }
  // A LayerNorm of width d: weight and bias.
  void norm(const std::string& foreign, const std::string& cmha, int64_t d) {
    same(foreign + ".weight", cmha + ".weight", {d});
    same(foreign + ".bias", cmha + ".bias", {d});
  }
  // Query, key and value [a, d] of the concat attention under `cmha`
  // ("blocks.0.attn"), fused in foreign `weight` [3a, d] and `bias` [3a].
  void fused_qkv(const std::string& weight, const std::string& bias, const std::string& cmha, int64_t a, int64_t d) {
    list.push_back({{weight}, {3 * a, d}, {{cmha + ".query.weight", {a, d}}, {cmha + ".key.weight", {a, d}},
                                          {cmha + ".value.weight", {a, d}}}});
    list.push_back({{bias}, {3 * a}, {{cmha + ".query.bias", {a}}, {cmha + ".key.bias", {a}}, {cmha + ".value.bias", {a}}}});
  }
};

// The foreign file being imported, with the checks every format needs.
struct ForeignFile {
  std::string path;
  std::string format;  // as the user typed it ("timm")
  std::map<std::string, Tensor> tensors;
  bool has(const std::string& name) const { return tensors.count(name) > 0; }
  // Tensor `name` with `dims` dimensions, or a cmha::Error naming it and
  // `maps_to`, what it becomes in cmha.
  const Tensor& need(const std::string& name, const std::string& maps_to, int64_t dims) const;
  // Whether two tensors of the file hold the same shape and bytes.
  bool equal(const std::string& a, const std::string& b) const;
};

struct ImportPlan {
  std::vector<std::string> recipe;     // key=value lines: the model, the task, the data's normalisation
  std::string summary;
  std::vector<std::string> notes;
  Links links;
  std::vector<std::string> ignorable;  // names that may be there and hold nothing a cmha model uses
};

struct ExportPlan {
  Links links;
  std::map<std::string, Tensor> extra;              // f32 tensors the format keeps besides (fairseq's version)
  std::vector<std::string> notes;
  std::map<std::string, std::string> side_files;
};

ImportPlan plan_timm_import(const ForeignFile& f, const ImportOptions& opt);
ExportPlan plan_timm_export(const run::Recipe& r);
ImportPlan plan_hf_vit_import(const ForeignFile& f, const ImportOptions& opt);
ExportPlan plan_hf_vit_export(const run::Recipe& r);
ImportPlan plan_fairseq_import(const ForeignFile& f, const ImportOptions& opt);
ExportPlan plan_fairseq_export(const run::Recipe& r);

// The heads of an imported model: --heads, else `config_heads` (from a
// config file; 0 = none), else a known model name (the option, then the
// file's name). Checks that they divide key_dim; notes where they came from.
int64_t resolve_heads(const ForeignFile& f, const ImportOptions& opt, int64_t d_model, int64_t key_dim,
                      int64_t config_heads, std::vector<std::string>& notes);

// The attention at recipe place `place` ("model.attention") when `format`
// can hold it: concat with biases and the default scale; key_dim == value_dim
// (and == d_model when `full_width`). Returns it with key/value_dim resolved.
nn::AttentionConfig exportable_attention(const run::Recipe& r, const std::string& place, const std::string& format,
                                         bool full_width);

// "%.9g" of a number, for recipe lines and notes.
std::string number(double v);

}  // namespace cmha::interop
