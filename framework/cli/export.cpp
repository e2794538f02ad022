// cmha export FORMAT CKPT -o OUT: a checkpoint's weights under another
// framework's names (timm, Hugging Face ViT/DeiT, fairseq), or with --weights
// under cmha's own, without optimiser or EMA state.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/command_line.h"
#include "interop/import_export.h"
#include "tensor/error.h"
#include "tensor/safetensors.h"
#include "tensor/atomic_file.h"

namespace cmha::cli {

int export_command(const Args& args) {
  std::vector<std::string> positional;
  std::string out, dtype = "f32";
  bool weights_only = false;
  interop::ExportOptions opt;
  CommandLine cl("export",
                 "Writes a checkpoint's weights as a safetensors state dict in another framework's names, for\n"
                 "PyTorch: the model's weights only (no optimiser or EMA state). Importing a file and exporting it\n"
                 "again gives back its tensors: names, shapes and bytes (in the same --dtype).\n"
                 "  cmha export timm CKPT -o deit.safetensors           timm's VisionTransformer(Distilled)\n"
                 "  cmha export hf-vit CKPT -o DIR/model.safetensors    Hugging Face (and DIR/config.json)\n"
                 "  cmha export fairseq CKPT -o transformer.safetensors fairseq's transformer\n"
                 "  cmha export --weights CKPT -o weights.safetensors   cmha's own names");
  cl.app().add_option("arguments", positional, "FORMAT (timm, hf-vit, fairseq) and CKPT; CKPT alone with --weights")
      ->required()->type_name("[FORMAT] CKPT");
  cl.app().add_option("-o,--output", out, "the safetensors file to write")->required()->type_name("OUT");
  cl.app().add_flag("--weights", weights_only, "without FORMAT: the weights in cmha's names, without optimiser and EMA state");
  cl.app().add_flag("--ema", opt.ema, "the EMA weights (train.ema_decay) instead of the model's");
  cl.app().add_option("--dtype", dtype, "dtype of the tensors written")
      ->check(one_of({"f32", "f16", "bf16"}))->capture_default_str()->type_name("f32|f16|bf16");
  if (!cl.parse(args)) return 0;
  CMHA_CHECK(positional.size() <= 2, "cmha export takes FORMAT and one CKPT, got " + std::to_string(positional.size()) +
                                         " arguments");
  CMHA_CHECK(positional.size() == 2 || weights_only,
             "cmha export needs FORMAT and CKPT (FORMAT: timm, hf-vit, fairseq), or --weights CKPT for cmha's own names");
  const std::string format = positional.size() == 2 ? positional[0] : "cmha";
  const std::string input = positional.back();
  opt.dtype = dtype == "f16" ? DType::f16 : dtype == "bf16" ? DType::bf16 : DType::f32;
  const run::Checkpoint c = run::load_checkpoint(input);
  const interop::ExportResult r = interop::export_checkpoint(format, c, input, opt);
  const std::filesystem::path dir = std::filesystem::path(out).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir);  // Hugging Face's DIR/model.safetensors
  save_safetensors(out, r.tensors, r.metadata);
  const std::string names = format == "cmha" ? "cmha's" : format + "'s";
  std::printf("wrote %s: %zu tensors in %s names (%s; the %s weights, no optimiser or EMA state)\n", out.c_str(),
              r.tensors.size(), names.c_str(), dtype.c_str(), opt.ema ? "EMA" : "model's");
  for (const auto& [name, text] : r.side_files) {
    const std::string path = (std::filesystem::path(out).parent_path() / name).string();
    write_file_atomically(path, text);
    std::printf("wrote %s\n", path.c_str());
  }
  for (const std::string& note : r.notes) std::printf("  %s\n", note.c_str());
  return 0;
}

}  // namespace cmha::cli
