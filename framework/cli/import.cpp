// cmha import FORMAT FILE -o OUT: another framework's state dict (timm,
// Hugging Face ViT/DeiT, fairseq; safetensors) as a cmha checkpoint with its
// recipe, ready for cmha compress, eval, translate or fine-tuning.
#include <cstdio>

#include "cli/command_line.h"
#include "interop/import_export.h"
#include "run/finetune_recipe.h"
#include "tensor/error.h"

namespace cmha::cli {

int import_command(const Args& args) {
  std::string format, input, out;
  interop::ImportOptions opt;
  bool no_scale_embedding = false;
  CommandLine cl("import",
                 "Reads another framework's state dict (a safetensors file) into a cmha checkpoint: the model's\n"
                 "shape comes from the tensors, the number of heads from --heads, a known model name (--model or\n"
                 "the file's name: deit_base_patch16_224, transformer_wmt_en_de, ...) or Hugging Face's config.json.\n"
                 "Beside OUT, OUT's name with .yaml is the recipe to fine-tune it with ('cmha train OUT.yaml').\n"
                 "  cmha import timm deit_base_patch16_224.safetensors -o deit.safetensors\n"
                 "  cmha import hf-vit vit-base/model.safetensors -o vit.safetensors\n"
                 "  cmha import fairseq wmt_en_de.safetensors --heads 8 -o transformer.safetensors");
  cl.app().add_option("format", format, "timm (ViT, DeiT), hf-vit (Hugging Face ViT, DeiT) or fairseq (transformer)")
      ->required()->check(one_of(interop::interop_formats()))->type_name("FORMAT");
  cl.app().add_option("file", input, "the state dict, as safetensors")->required()->type_name("FILE");
  cl.app().add_option("-o,--output", out, "the cmha checkpoint to write")->required()->type_name("OUT");
  cl.app().add_option("--heads", opt.heads, "attention heads (when neither a model name nor config.json says)")
      ->check(whole_number(1, 1 << 16))->type_name("H");
  cl.app().add_option("--model", opt.model_name, "a known model whose heads to take, e.g. deit_small_patch16_224")
      ->type_name("NAME");
  cl.app().add_option("--config", opt.config_path, "hf-vit: the config.json (default: the one beside FILE)")
      ->type_name("JSON");
  cl.app().add_option("--activation", opt.activation, "fairseq: the feed-forward activation (default relu)")
      ->check(one_of({"relu", "gelu"}))->type_name("relu|gelu");
  cl.app().add_flag("--no-scale-embedding", no_scale_embedding,
                    "fairseq: the model was trained with --no-scale-embedding");
  if (!cl.parse(args)) return 0;
  CMHA_CHECK(format == "fairseq" || (opt.activation.empty() && !no_scale_embedding),
             "--activation and --no-scale-embedding are settings of fairseq models, not of " + format + " ones");
  CMHA_CHECK(format == "hf-vit" || opt.config_path.empty(), "--config is Hugging Face's config.json, for hf-vit only");
  opt.scale_embedding = !no_scale_embedding;
  const interop::ImportResult r = interop::import_checkpoint(format, input, opt);
  std::printf("read %s\n", r.summary.c_str());
  for (const std::string& note : r.notes) std::printf("  %s\n", note.c_str());
  if (!r.ignored.empty()) {
    std::string names;
    for (const std::string& n : r.ignored) names += (names.empty() ? "" : ", ") + n;
    std::printf("left out %zu bookkeeping tensor%s: %s\n", r.ignored.size(), r.ignored.size() == 1 ? "" : "s",
                names.c_str());
  }
  run::save_checkpoint(out, r.checkpoint);
  const std::string recipe = run::write_finetune_recipe(out, r.checkpoint.recipe);
  int64_t params = 0;
  for (const auto& [name, t] : r.checkpoint.weights) params += t.numel();
  std::printf("wrote %s (%lld parameters from %zu tensors of %s) and its recipe %s\n", out.c_str(),
              static_cast<long long>(params), r.tensors_read, input.c_str(), recipe.c_str());
  std::printf("next: cmha compress %s --key-dim D -o OUT, or fine-tune with: cmha train %s\n", out.c_str(),
              recipe.c_str());
  return 0;
}

}  // namespace cmha::cli
