// The format-independent half of checkpoint interop: applying the links a
// format plans (interop/mapping.h) in either direction, the checks and
// error sentences, and the table of known model sizes.
#include "interop/import_export.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "interop/mapping.h"
#include "run/model_config.h"
#include "tensor/safetensors.h"

namespace cmha::interop {

namespace {

// Widths and heads of the published models, by the name their files and
// model registries use ('-' reads as '_'). Models whose blocks cmha lacks
// (DeiT-III's LayerScale, ...) are left out: their import fails on the tensor.
struct KnownModel {
  const char* table;  // "vit" (timm and hf-vit) or "fairseq"
  const char* name;
  int64_t d_model, heads;
};
const KnownModel kKnownModels[] = {
    {"vit", "deit_tiny", 192, 3},      {"vit", "deit_small", 384, 6},     {"vit", "deit_base", 768, 12},
    {"vit", "vit_tiny", 192, 3},       {"vit", "vit_small", 384, 6},      {"vit", "vit_medium", 512, 8},
    {"vit", "vit_base", 768, 12},      {"vit", "vit_large", 1024, 16},    {"vit", "vit_huge", 1280, 16},
    {"fairseq", "transformer_iwslt_de_en", 512, 4},
    {"fairseq", "transformer_wmt_en_de", 512, 8},
    {"fairseq", "transformer_wmt_en_de_big", 1024, 16},
    {"fairseq", "transformer_wmt_en_de_big_t2t", 1024, 16},
    {"fairseq", "transformer_vaswani_wmt_en_de_big", 1024, 16},
    {"fairseq", "transformer_vaswani_wmt_en_fr_big", 1024, 16},
};

const char* known_table(const std::string& format) { return format == "fairseq" ? "fairseq" : "vit"; }

std::string known_names(const std::string& format) {
  std::string names;
  for (const KnownModel& m : kKnownModels)
    if (known_table(format) == std::string(m.table)) names += (names.empty() ? "" : ", ") + std::string(m.name);
  return names;
}

std::string joined_cmha_names(const TensorLink& link) {
  std::string s;
  for (const auto& [name, shape] : link.cmha) s += (s.empty() ? "'" : ", '") + name + "'";
  return s;
}

void check_format(const std::string& format, bool cmha_allowed) {
  for (const std::string& f : interop_formats())
    if (f == format) return;
  if (cmha_allowed && format == "cmha") return;
  std::string list;
  for (const std::string& f : interop_formats()) list += (list.empty() ? "" : ", ") + f;
  throw Error("unknown checkpoint format '" + format + "' (cmha knows " + list + (cmha_allowed ? ", cmha" : "") + ")");
}

ImportPlan plan_import(const ForeignFile& f, const ImportOptions& opt) {
  if (f.format == "timm") return plan_timm_import(f, opt);
  if (f.format == "hf-vit") return plan_hf_vit_import(f, opt);
  return plan_fairseq_import(f, opt);
}

ExportPlan plan_export(const std::string& format, const run::Recipe& r) {
  if (format == "timm") return plan_timm_export(r);
  if (format == "hf-vit") return plan_hf_vit_export(r);
  return plan_fairseq_export(r);
}

// An exported tensor in the dtype asked for.
Tensor in_dtype(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }

}  // namespace

const std::vector<std::string>& interop_formats() {
  static const std::vector<std::string> formats{"timm", "hf-vit", "fairseq"};
  return formats;
}

int64_t known_model_heads(const std::string& format, const std::string& name, int64_t d_model, std::string* matched) {
  std::string text = name;
  for (char& c : text) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const KnownModel* best = nullptr;
  for (const KnownModel& m : kKnownModels)
    if (known_table(format) == std::string(m.table) && text.find(m.name) != std::string::npos &&
        (!best || std::string(m.name).size() > std::string(best->name).size()))
      best = &m;
  if (!best || best->d_model != d_model) return 0;
  if (matched) *matched = best->name;
  return best->heads;
}


const Tensor& ForeignFile::need(const std::string& name, const std::string& maps_to, int64_t dims) const {
  auto it = tensors.find(name);
  CMHA_CHECK(it != tensors.end(), "'" + path + "' has no tensor '" + name + "' (cmha's " + maps_to + "): is it a " +
                                      format + " state dict of a model cmha has?");
  CMHA_CHECK(it->second.dim() == dims, "tensor '" + name + "' of '" + path + "' is " + shape_str(it->second.shape()) +
                                           ", but a " + format + " " + name + " has " + std::to_string(dims) +
                                           " dimensions");
  return it->second;
}

bool ForeignFile::equal(const std::string& a, const std::string& b) const {
  const Tensor &x = tensors.at(a), &y = tensors.at(b);
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

int64_t resolve_heads(const ForeignFile& f, const ImportOptions& opt, int64_t d_model, int64_t key_dim,
                      int64_t config_heads, std::vector<std::string>& notes) {
  int64_t heads = 0;
  std::string how;
  std::string matched;
  if (opt.heads > 0) {
    heads = opt.heads;
    how = "given by --heads";
  } else if (config_heads > 0) {
    heads = config_heads;
    how = "from the config file's num_attention_heads";
  } else if (!opt.model_name.empty()) {
    heads = known_model_heads(f.format, opt.model_name, d_model, &matched);
    CMHA_CHECK(heads > 0, "--model '" + opt.model_name + "' is not a known " + f.format + " model " + std::to_string(d_model) +
                              " wide (known: " + known_names(f.format) + "); give --heads H");
    how = "of the known model '" + matched + "'";
  } else {
    heads = known_model_heads(f.format, std::filesystem::path(f.path).filename().string(), d_model, &matched);
    how = "of the known model '" + matched + "' its file is named after";
  }
  CMHA_CHECK(heads > 0, "cannot tell how many attention heads '" + f.path + "' has (d_model " + std::to_string(d_model) +
                            "): give --heads H, or --model NAME for a known model (" + known_names(f.format) + ")");
  CMHA_CHECK(key_dim % heads == 0, std::to_string(heads) + " heads do not divide the attention width " +
                                       std::to_string(key_dim) + " of '" + f.path + "'");
  notes.push_back(std::to_string(heads) + " heads, " + how);
  return heads;
}

nn::AttentionConfig exportable_attention(const run::Recipe& r, const std::string& place, const std::string& format,
                                         bool full_width) {
  nn::AttentionConfig a = run::attention_config(r, place);
  const int64_t d = r.integer("model.d_model");
  CMHA_CHECK(a.type == "concat", place + ".type is '" + a.type + "', but " + format +
                                     " holds concat attention only (export before cmha compress, or with --weights in cmha's names)");
  CMHA_CHECK(a.bias, place + ".bias is false, but " + format + "'s attention projections have biases");
  if (a.key_dim == 0) a.key_dim = d;
  if (a.value_dim == 0) a.value_dim = d;
  CMHA_CHECK(a.key_dim == a.value_dim, place + ".key_dim (" + std::to_string(a.key_dim) + ") differs from " + place +
                                           ".value_dim (" + std::to_string(a.value_dim) + "), but " + format +
                                           " gives queries, keys and values one width");
  CMHA_CHECK(!full_width || a.key_dim == d, place + ".key_dim (" + std::to_string(a.key_dim) + ") is not model.d_model (" +
                                                std::to_string(d) + "), but " + format + "'s attention projects to d_model");
  const double natural = 1.0 / std::sqrt(static_cast<double>(a.key_dim / a.heads));
  CMHA_CHECK(a.scale == 0 || std::fabs(a.scale - natural) <= 1e-6 * natural,
             place + ".scale is " + number(a.scale) + ", but " + format + " scales scores by 1/sqrt(head width) = " +
                 number(natural));
  return a;
}

std::string number(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.9g", v);
  return s;
}


ImportResult import_checkpoint(const std::string& format, const std::string& path, const ImportOptions& opt) {
  check_format(format, false);
  autograd::NoGradGuard no_grad;
  ForeignFile f{path, format, load_safetensors(path).tensors};
  ImportPlan plan = plan_import(f, opt);
  const run::Recipe recipe = run::Recipe::parse("", path + " (imported recipe)", plan.recipe);
  ImportResult out;
  std::set<std::string> used;
  for (const TensorLink& link : plan.links.list) {
    const std::string& first = link.foreign.front();
    const std::string cmha_names = joined_cmha_names(link);
    const Tensor& t = f.need(first, cmha_names, static_cast<int64_t>(link.foreign_shape.size()));
    CMHA_CHECK(t.shape() == link.foreign_shape,
               "tensor '" + first + "' of '" + path + "' is " + shape_str(t.shape()) + ", but the model its other tensors describe (" +
                   plan.summary + ") needs " + shape_str(link.foreign_shape) + " (cmha's " + cmha_names + ")");
    CMHA_CHECK(is_floating(t.dtype()), "tensor '" + first + "' of '" + path + "' is " + dtype_name(t.dtype()) +
                                           ", not a floating-point weight");
    for (size_t i = 1; i < link.foreign.size(); ++i) {
      f.need(link.foreign[i], cmha_names, static_cast<int64_t>(link.foreign_shape.size()));
      CMHA_CHECK(f.equal(first, link.foreign[i]), "tensors '" + first + "' and '" + link.foreign[i] + "' of '" + path +
                                                      "' differ, but the model read holds them as one (" + cmha_names + ")");
      used.insert(link.foreign[i]);
    }
    used.insert(first);
    // [foreign_shape] -> [numel] -> the cmha tensors, one after another
    const Tensor flat = t.to(DType::f32).contiguous().view({t.numel()});
    int64_t at = 0;
    for (const auto& [name, shape] : link.cmha) {
      const int64_t n = shape_numel(shape);
      out.checkpoint.weights[name] = flat.slice(0, at, at + n).clone().view(shape);
      at += n;
    }
  }
  const std::set<std::string> ignorable(plan.ignorable.begin(), plan.ignorable.end());
  for (const auto& [name, t] : f.tensors) {
    if (used.count(name)) continue;
    CMHA_CHECK(ignorable.count(name), "'" + path + "' holds tensor '" + name + "' " + shape_str(t.shape()) +
                                          ", which has no place in the cmha model read (" + plan.summary +
                                          "): a part of the " + format + " model that cmha lacks?");
    out.ignored.push_back(name);
  }
  out.tensors_read = used.size();
  out.checkpoint.recipe = recipe.dump();
  out.checkpoint.trainer = {{"update", 0}, {"epoch", 0}, {"imported_from", path}, {"import_format", format}};
  out.summary = plan.summary;
  out.notes = plan.notes;
  return out;
}

ExportResult export_checkpoint(const std::string& format, const run::Checkpoint& c, const std::string& path,
                               const ExportOptions& opt) {
  check_format(format, true);
  CMHA_CHECK(opt.dtype == DType::f32 || opt.dtype == DType::f16 || opt.dtype == DType::bf16,
             std::string("an export writes f32, f16 or bf16 weights, not ") + dtype_name(opt.dtype));
  CMHA_CHECK(!opt.ema || !c.ema.empty(),
             "checkpoint '" + path + "' holds no EMA weights (its run had train.ema_decay 0); drop --ema");
  autograd::NoGradGuard no_grad;
  const std::map<std::string, Tensor>& weights = opt.ema ? c.ema : c.weights;
  ExportResult out;
  out.metadata = {{"format", "pt"}};
  if (format == "cmha") {
    for (const auto& [name, t] : weights) out.tensors[name] = in_dtype(t, opt.dtype);
    return out;
  }
  const run::Recipe r = run::Recipe::parse(c.recipe, path + " (recipe)");
  ExportPlan plan = plan_export(format, r);
  std::set<std::string> used;
  for (const TensorLink& link : plan.links.list) {
    std::vector<Tensor> parts;  // each flattened
    for (const auto& [name, shape] : link.cmha) {
      auto it = weights.find(name);
      CMHA_CHECK(it != weights.end(), "checkpoint '" + path + "' has no tensor '" + name + "', which " + format + "'s '" +
                                          link.foreign.front() + "' needs");
      CMHA_CHECK(it->second.shape() == shape, "tensor '" + name + "' of checkpoint '" + path + "' is " +
                                                  shape_str(it->second.shape()) + ", but its recipe makes it " +
                                                  shape_str(shape));
      parts.push_back(it->second.contiguous().view({it->second.numel()}));
      used.insert(name);
    }
    // the cmha tensors one after another -> [foreign_shape]
    const Tensor joined = parts.size() == 1 ? parts.front() : concat(parts, 0);
    const Tensor t = in_dtype(joined.to(DType::f32), opt.dtype).contiguous().view(link.foreign_shape);
    for (const std::string& name : link.foreign) out.tensors[name] = t;
  }
  for (const auto& [name, t] : weights)
    CMHA_CHECK(used.count(name), "checkpoint '" + path + "' holds tensor '" + name + "', which " + format +
                                     "'s names have no place for");
  for (const auto& [name, t] : plan.extra) out.tensors[name] = in_dtype(t, opt.dtype);
  out.notes = std::move(plan.notes);
  out.side_files = std::move(plan.side_files);
  return out;
}

}  // namespace cmha::interop
