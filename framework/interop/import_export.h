#pragma once
// Checkpoint interop: other frameworks' state dicts (as safetensors files)
// to cmha checkpoints and back, by mapping names and shapes:
//   timm     timm's VisionTransformer and VisionTransformerDistilled (ViT, DeiT)
//   hf-vit   Hugging Face ViTForImageClassification and
//            DeiTForImageClassificationWithTeacher (cmha has no BERT-like
//            encoder-only text model, so no BERT names)
//   fairseq  fairseq's encoder-decoder transformer (translation)
// An import reads the model's shape off the tensors (the number of heads
// from an option, a known model name or Hugging Face's config.json) and
// writes it as a recipe; an export writes the foreign names from the
// checkpoint's recipe. Importing then exporting gives back the same tensors:
// names, dtypes (see ExportOptions::dtype), shapes and bytes.
#include <map>
#include <string>
#include <vector>

#include "run/checkpoint.h"
#include "tensor/tensor.h"

namespace cmha::interop {

// The foreign formats: "timm", "hf-vit", "fairseq".
const std::vector<std::string>& interop_formats();

struct ImportOptions {
  int64_t heads = 0;           // 0: from config.json (hf-vit) or a known model name, else an error
  std::string model_name;      // a known model (deit_base_patch16_224, transformer_wmt_en_de); "" = one named in the file's name
  std::string config_path;     // hf-vit: config.json; "" = the one beside the file, if any
  std::string activation;      // fairseq: relu | gelu ("" = relu, fairseq's default)
  bool scale_embedding = true; // fairseq: false for models trained with --no-scale-embedding
};

struct ImportResult {
  run::Checkpoint checkpoint;              // f32 weights, the recipe, trainer {imported_from, import_format}
  std::string summary;                // the model read, in one line
  std::vector<std::string> notes;     // how something was decided or what differs, one sentence each
  std::vector<std::string> ignored;   // bookkeeping tensors left out (fairseq's version buffers)
  size_t tensors_read = 0;
};

// Reads the safetensors state dict `path` written in `format`. A name
// outside interop_formats(), a tensor the mapping needs but the file lacks
// (named with the cmha tensor it maps to), a shape that disagrees with the
// rest, or a tensor the mapping has no place for are each one cmha::Error.
ImportResult import_checkpoint(const std::string& format, const std::string& path, const ImportOptions& opt = {});

struct ExportOptions {
  DType dtype = DType::f32;  // of every tensor written (f32, f16 or bf16)
  bool ema = false;          // the EMA weights instead of the model's
};

struct ExportResult {
  std::map<std::string, Tensor> tensors;            // under the format's names
  std::map<std::string, std::string> metadata;      // {"format": "pt"}, as PyTorch tools write
  std::vector<std::string> notes;                   // how to build the model there; what differs
  std::map<std::string, std::string> side_files;    // file name → text to write beside (hf-vit: config.json)
};

// The state dict of checkpoint `c` (read from `path`) in `format`, or in
// cmha's own names for format "cmha" (the weights without optimiser or EMA
// state). A model the format cannot hold (another model kind, attention
// other than concat, ...) is a cmha::Error naming the recipe key.
ExportResult export_checkpoint(const std::string& format, const run::Checkpoint& c, const std::string& path,
                               const ExportOptions& opt = {});

// The number of heads of the known model that `name` names (the longest
// known name in it, '-' read as '_': "deit_base_patch16_224" is deit_base)
// when that model is d_model wide; 0 otherwise. timm and hf-vit share the
// table of ViT/DeiT sizes; fairseq has its architectures'.
int64_t known_model_heads(const std::string& format, const std::string& name, int64_t d_model,
                          std::string* matched = nullptr);

}  // namespace cmha::interop
