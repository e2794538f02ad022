// Checkpoint interop (interop/import_export.h) against the PyTorch fixtures of
// tests/reference/fixtures_interop.py: state dicts named as timm, Hugging Face
// and fairseq name them, imported, run by cmha's models and compared with
// what those frameworks' forward passes gave; exported back byte for byte;
// and each mistake one sentence.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "autograd/engine.h"
#include "interop/import_export.h"
#include "nn/transformer.h"
#include "nn/vit.h"
#include "run/model_config.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "tensor/safetensors.h"
#include "support/source_paths.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

using cmha::test::interop_fixture;

SafetensorsFile io_of(const std::string& name) { return test::load_fixture("interop_" + name + ".io"); }

using cmha::test::has;

interop::ImportOptions heads(int64_t h) {
  interop::ImportOptions o;
  o.heads = h;
  return o;
}

std::map<std::string, Tensor> parameters_of(const nn::Module& m) {
  std::map<std::string, Tensor> out;
  for (auto& [name, p] : m.named_parameters()) out[name] = p;
  return out;
}

// The logits of the imported vision transformer on the fixture's images; the
// model is built from the checkpoint's recipe and loaded as cmha eval loads it.
Tensor vit_logits(const run::Checkpoint& c, const Tensor& images) {
  Generator gen(1);
  nn::VisionTransformer model(run::vit_config(run::Recipe::parse(c.recipe)), gen);
  run::restore_weights("imported", c.weights, parameters_of(model));
  model.eval();
  autograd::NoGradGuard no_grad;
  return model.forward(images);
}

Tensor transformer_logits(const run::Checkpoint& c, const Tensor& src, const Tensor& tgt) {
  Generator gen(1);
  nn::Transformer model(run::transformer_config(run::Recipe::parse(c.recipe)), gen);
  run::restore_weights("imported", c.weights, parameters_of(model));
  model.eval();
  autograd::NoGradGuard no_grad;
  std::vector<float> pad;
  for (int64_t id : src.to_i64_vector()) pad.push_back(id == 1 ? 1.0f : 0.0f);  // fairseq's padding index
  return model.forward(src, Tensor::from_vector(pad, src.shape()).to(DType::b8), tgt);
}

void expect_vit_matches(const std::string& format, const std::string& name, const interop::ImportOptions& opt) {
  SCOPED_TRACE(name);
  const interop::ImportResult r = interop::import_checkpoint(format, interop_fixture(name), opt);
  const SafetensorsFile io = io_of(name);
  EXPECT_TRUE(test::all_close(vit_logits(r.checkpoint, io.tensors.at("in.images")), io.tensors.at("out"), 1e-5f, 1e-5f));
}

void expect_transformer_matches(const interop::ImportResult& r, const std::string& io_name) {
  const SafetensorsFile io = io_of(io_name);
  EXPECT_TRUE(test::all_close(transformer_logits(r.checkpoint, io.tensors.at("in.src"), io.tensors.at("in.tgt")),
                              io.tensors.at("out"), 1e-5f, 1e-5f));
}

// Imports `name` and exports it again into `out`.
void round_trip(const std::string& format, const std::string& in, const interop::ImportOptions& opt,
                const std::string& out, DType dtype = DType::f32) {
  const interop::ImportResult r = interop::import_checkpoint(format, in, opt);
  interop::ExportOptions eo;
  eo.dtype = dtype;
  const interop::ExportResult e = interop::export_checkpoint(format, r.checkpoint, in, eo);
  save_safetensors(out, e.tensors, e.metadata);
}

}  // namespace

TEST(Interop, TimmDeitComputesWhatTimmComputes) {
  expect_vit_matches("timm", "timm_deit", heads(4));
  const interop::ImportResult r = interop::import_checkpoint("timm", interop_fixture("timm_deit"), heads(4));
  EXPECT_EQ(r.summary, "timm DeiT with a distillation token: d_model 16, 2 blocks, 4 heads, ffn 32, 8 px in patches of 4, "
                       "3 channels, 5 classes");
  const run::Recipe recipe = run::Recipe::parse(r.checkpoint.recipe);
  EXPECT_DOUBLE_EQ(recipe.real("model.layer_norm_eps"), 1e-6);
  EXPECT_EQ(recipe.string("train.task"), "image_classification");
  EXPECT_EQ(recipe.string("data.format"), "image_folder");
  EXPECT_EQ(r.checkpoint.weights.at("patch_embed.weight").shape(), (Shape{16, 48}));  // the convolution, flattened
  EXPECT_EQ(r.checkpoint.trainer.at("import_format"), "timm");
}

TEST(Interop, TimmVitWithWiderAttentionComputesWhatTimmComputes) {
  expect_vit_matches("timm", "timm_vit", heads(4));
  const run::Recipe recipe = run::Recipe::parse(interop::import_checkpoint("timm", interop_fixture("timm_vit"), heads(4)).checkpoint.recipe);
  EXPECT_EQ(recipe.integer("model.attention.key_dim"), 24);
  EXPECT_EQ(recipe.integer("model.channels"), 1);
  EXPECT_EQ(recipe.string("data.format"), "idx");  // one channel: the IDX defaults stay
}

TEST(Interop, HuggingFaceVitAndDeitComputeWhatTransformersComputes) {
  expect_vit_matches("hf-vit", "hf_vit", heads(2));
  interop::ImportOptions with_config;
  with_config.config_path = std::string(CMHA_FIXTURE_DIR) + "/interop_hf_deit.config.json";
  expect_vit_matches("hf-vit", "hf_deit", with_config);
  // Without --config, the config.json beside the weights (as from_pretrained finds it).
  const std::string dir = test::temp_dir("interop_hf");
  fs::copy_file(interop_fixture("hf_deit"), dir + "/model.safetensors", fs::copy_options::overwrite_existing);
  fs::copy_file(with_config.config_path, dir + "/config.json", fs::copy_options::overwrite_existing);
  const interop::ImportResult r = interop::import_checkpoint("hf-vit", dir + "/model.safetensors");
  const run::Recipe recipe = run::Recipe::parse(r.checkpoint.recipe);
  EXPECT_EQ(recipe.integer("model.attention.heads"), 4);
  EXPECT_DOUBLE_EQ(recipe.real("model.layer_norm_eps"), 1e-6);
  EXPECT_TRUE(recipe.boolean("model.distillation_token"));
  EXPECT_TRUE(has(r.notes[1], "from the config file")) << r.notes[1];
  fs::remove_all(dir);
  // No config: Hugging Face's default eps.
  EXPECT_DOUBLE_EQ(run::Recipe::parse(interop::import_checkpoint("hf-vit", interop_fixture("hf_vit"), heads(2)).checkpoint.recipe)
                       .real("model.layer_norm_eps"),
                   1e-12);
}

TEST(Interop, FairseqPostNormComputesWhatFairseqComputes) {
  const interop::ImportResult r = interop::import_checkpoint("fairseq", interop_fixture("fairseq_post"), heads(4));
  expect_transformer_matches(r, "fairseq_post");
  EXPECT_EQ(r.summary, "fairseq transformer: d_model 16, 2+2 layers, 4 heads, ffn 32, vocabulary 13 shared, post-norm, "
                       "sinusoidal positions, relu");
  EXPECT_EQ(r.ignored, (std::vector<std::string>{"decoder.version", "encoder.version"}));
  EXPECT_EQ(run::Recipe::parse(r.checkpoint.recipe).integer("model.position_offset"), 2);
  // fairseq's old layout (fused in_proj, the output tied through embed_tokens, _float_tensor) reads the same.
  const interop::ImportResult old = interop::import_checkpoint("fairseq", interop_fixture("fairseq_post_legacy"), heads(4));
  expect_transformer_matches(old, "fairseq_post");
  EXPECT_EQ(old.ignored.size(), 4u);
}

TEST(Interop, FairseqPreNormLearnedUnsharedComputesWhatFairseqComputes) {
  interop::ImportOptions opt = heads(2);
  opt.activation = "gelu";
  opt.scale_embedding = false;
  const interop::ImportResult r = interop::import_checkpoint("fairseq", interop_fixture("fairseq_pre"), opt);
  expect_transformer_matches(r, "fairseq_pre");
  const run::Recipe recipe = run::Recipe::parse(r.checkpoint.recipe);
  EXPECT_TRUE(recipe.boolean("model.pre_norm"));
  EXPECT_FALSE(recipe.boolean("model.share_all_embeddings"));
  EXPECT_EQ(recipe.string("model.positions"), "learned");
  EXPECT_EQ(recipe.integer("model.max_positions"), 8);  // fairseq's table of 8 + padding_idx + 1 rows, kept whole
  EXPECT_EQ(r.checkpoint.weights.at("src_positions.weight").shape(), (Shape{10, 16}));
}

// "Byte-identical": re-exporting an imported file writes the same file, when
// that file was laid out canonically, as the safetensors library and
// tests/reference/safetensors_io.py write one dtype: __metadata__ first,
// tensors in name order, entries {dtype, shape, data_offsets}, compact JSON
// padded with spaces. Any other layout comes back as the same tensors in
// that canonical layout (ExportIsCanonicalWhateverTheHeaderOrder).
TEST(Interop, ExportGivesBackTheImportedFileByteForByte) {
  const std::string dir = test::temp_dir("interop_round_trip");
  const std::pair<std::string, std::string> cases[] = {{"timm", "timm_deit"}, {"timm", "timm_vit"},
                                                       {"hf-vit", "hf_vit"},  {"hf-vit", "hf_deit"},
                                                       {"fairseq", "fairseq_post"}, {"fairseq", "fairseq_pre"}};
  for (const auto& [format, name] : cases) {
    SCOPED_TRACE(name);
    const std::string out = dir + "/" + name + ".safetensors";
    interop::ImportOptions opt = heads(name == "hf_vit" || name == "fairseq_pre" ? 2 : 4);
    round_trip(format, interop_fixture(name), opt, out);
    const std::string original = test::read_file(interop_fixture(name));
    ASSERT_FALSE(original.empty());
    EXPECT_TRUE(test::read_file(out) == original);
  }
  // fairseq's old layout comes back in the current one: the post-norm fixture itself.
  round_trip("fairseq", interop_fixture("fairseq_post_legacy"), heads(4), dir + "/legacy.safetensors");
  EXPECT_TRUE(test::read_file(dir + "/legacy.safetensors") == test::read_file(interop_fixture("fairseq_post")));
  fs::remove_all(dir);
}

// The same through the libraries' own classes, not look-alikes
// (tests/reference/fixtures_interop_real.py: timm 1.0.31's VisionTransformer
// and VisionTransformerDistilled, transformers 5.25.0's ViT and DeiT with
// teacher as save_pretrained writes them, random weights): import gives their
// logits to 1e-5, and export gives back every tensor under its name with its
// values and nothing else, which is what load_state_dict(strict=True) (timm)
// and from_pretrained (transformers) take.
TEST(Interop, RealTimmAndTransformersModelsImportAndExport) {
  const std::string dir = test::temp_dir("interop_real");
  const std::pair<std::string, std::string> cases[] = {{"timm", "real_timm_deit"}, {"timm", "real_timm_vit"},
                                                       {"hf-vit", "real_hf_vit"}, {"hf-vit", "real_hf_deit"}};
  for (const auto& [format, name] : cases) {
    SCOPED_TRACE(name);
    interop::ImportOptions opt = heads(4);
    if (format == "hf-vit") {  // the heads, eps and labels come from save_pretrained's config.json
      opt = interop::ImportOptions();
      opt.config_path = std::string(CMHA_FIXTURE_DIR) + "/interop_" + name + ".config.json";
    }
    expect_vit_matches(format, name, opt);
    const std::string out = dir + "/" + name + ".safetensors";
    round_trip(format, interop_fixture(name), opt, out);
    const SafetensorsFile original = load_safetensors(interop_fixture(name)), back = load_safetensors(out);
    ASSERT_EQ(back.tensors.size(), original.tensors.size());
    for (const auto& [key, t] : original.tensors) {
      ASSERT_TRUE(back.tensors.count(key)) << key;
      EXPECT_TRUE(test::all_close(back.tensors.at(key), t, 0.0f, 0.0f)) << key;
    }
  }
  fs::remove_all(dir);
}

TEST(Interop, HalfPrecisionFilesRoundTripInTheirDtype) {
  const std::string dir = test::temp_dir("interop_f16");
  SafetensorsFile f = load_safetensors(interop_fixture("timm_deit"));
  for (DType dt : {DType::f16, DType::bf16}) {
    std::map<std::string, Tensor> half;
    for (auto& [name, t] : f.tensors) half[name] = t.to(dt);
    const std::string in = dir + "/half.safetensors", out = dir + "/back.safetensors";
    save_safetensors(in, half, f.metadata);
    round_trip("timm", in, heads(4), out, dt);
    EXPECT_TRUE(test::read_file(out) == test::read_file(in)) << dtype_name(dt);
  }
  fs::remove_all(dir);
}

TEST(Interop, ExportIsCanonicalWhateverTheHeaderOrder) {
  // The fixture's tensors with the header reversed, the data in reverse order and spaced-out JSON.
  const SafetensorsFile f = load_safetensors(interop_fixture("timm_vit"));
  nlohmann::ordered_json header;
  std::string data;
  for (auto it = f.tensors.rbegin(); it != f.tensors.rend(); ++it) {
    const std::string bytes(static_cast<const char*>(it->second.raw_data()), it->second.nbytes());
    header[it->first] = {{"data_offsets", {data.size(), data.size() + bytes.size()}}, {"shape", it->second.shape()},
                         {"dtype", "F32"}};
    data += bytes;
  }
  header["__metadata__"] = {{"format", "pt"}};
  const std::string text = header.dump(1);
  std::string length(8, '\0');
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  const std::string dir = test::temp_dir("interop_order");
  test::write_file(dir + "/shuffled.safetensors", length + text + data);
  round_trip("timm", dir + "/shuffled.safetensors", heads(4), dir + "/out.safetensors");
  EXPECT_TRUE(test::read_file(dir + "/out.safetensors") == test::read_file(interop_fixture("timm_vit")));
  fs::remove_all(dir);
}

TEST(Interop, HeadsComeFromKnownModelNames) {
  EXPECT_EQ(interop::known_model_heads("timm", "deit_base_patch16_224.safetensors", 768), 12);
  EXPECT_EQ(interop::known_model_heads("timm", "deit_small_distilled_patch16_224", 384), 6);
  EXPECT_EQ(interop::known_model_heads("hf-vit", "google/vit-large-patch16-224", 1024), 16);
  EXPECT_EQ(interop::known_model_heads("fairseq", "transformer_wmt_en_de_big.safetensors", 1024), 16);
  EXPECT_EQ(interop::known_model_heads("fairseq", "transformer_wmt_en_de.safetensors", 512), 8);
  EXPECT_EQ(interop::known_model_heads("timm", "deit_base.safetensors", 384), 0);  // another width: not that model
  EXPECT_EQ(interop::known_model_heads("timm", "my_model.safetensors", 768), 0);
  const std::string err = test::error_of([&] { interop::import_checkpoint("timm", interop_fixture("timm_vit")); });
  EXPECT_TRUE(has(err, "cannot tell how many attention heads")) << err;
  EXPECT_TRUE(has(err, "give --heads H")) << err;
  interop::ImportOptions named;
  named.model_name = "deit_tiny_patch16_224";
  const std::string wrong = test::error_of([&] { interop::import_checkpoint("timm", interop_fixture("timm_vit"), named); });
  EXPECT_TRUE(has(wrong, "--model 'deit_tiny_patch16_224' is not a known timm model 16 wide")) << wrong;
}

TEST(Interop, ImportMistakesAreOneSentence) {
  const std::string dir = test::temp_dir("interop_errors");
  const SafetensorsFile f = load_safetensors(interop_fixture("timm_deit"));
  auto write_variant = [&](const std::string& name, const std::function<void(std::map<std::string, Tensor>&)>& edit) {
    std::map<std::string, Tensor> t = f.tensors;
    edit(t);
    save_safetensors(dir + "/" + name, t, f.metadata);
    return dir + "/" + name;
  };
  const std::string missing = write_variant("missing.safetensors", [](auto& t) { t.erase("blocks.1.attn.qkv.weight"); });
  const std::string shape = write_variant("shape.safetensors", [](auto& t) { t["blocks.1.mlp.fc1.weight"] = Tensor::zeros({31, 16}); });
  const std::string extra = write_variant("extra.safetensors", [](auto& t) { t["blocks.0.ls1.gamma"] = Tensor::zeros({16}); });
  const std::string ints = write_variant("ints.safetensors", [](auto& t) { t["norm.bias"] = Tensor::zeros({16}, DType::i64); });
  const std::pair<std::function<void()>, std::string> cases[] = {
      {[&] { interop::import_checkpoint("keras", interop_fixture("timm_deit")); },
       "unknown checkpoint format 'keras' (cmha knows timm, hf-vit, fairseq)"},
      {[&] { interop::import_checkpoint("timm", missing, heads(4)); },
       "has no tensor 'blocks.1.attn.qkv.weight' (cmha's 'blocks.1.attn.query.weight', 'blocks.1.attn.key.weight', "
       "'blocks.1.attn.value.weight')"},
      {[&] { interop::import_checkpoint("timm", shape, heads(4)); },
       "tensor 'blocks.1.mlp.fc1.weight' of '" + shape + "' is [31, 16], but the model its other tensors describe"},
      {[&] { interop::import_checkpoint("timm", extra, heads(4)); },
       "holds tensor 'blocks.0.ls1.gamma' [16], which has no place in the cmha model read"},
      {[&] { interop::import_checkpoint("timm", ints, heads(4)); }, "tensor 'norm.bias' of '" + ints + "' is i64"},
      {[&] { interop::import_checkpoint("timm", interop_fixture("timm_deit"), heads(3)); }, "3 heads do not divide the attention width 16"},
      {[&] { interop::import_checkpoint("timm", interop_fixture("fairseq_post"), heads(4)); },
       "has no tensor 'patch_embed.proj.weight' (cmha's 'patch_embed.weight'): is it a timm state dict"},
      {[&] { interop::import_checkpoint("hf-vit", interop_fixture("timm_deit"), heads(4)); },
       "has neither 'vit.embeddings.cls_token' nor 'deit.embeddings.cls_token'"},
      {[&] { interop::import_checkpoint("fairseq", interop_fixture("timm_deit"), heads(4)); },
       "has no tensor 'encoder.embed_tokens.weight' (cmha's 'src_embed.weight')"},
      {[&] { interop::import_checkpoint("timm", dir + "/none.safetensors", heads(4)); }, "none.safetensors"},
  };
  for (const auto& [run, message] : cases) {
    const std::string err = test::error_of(run);
    EXPECT_TRUE(has(err, message)) << err << "\nexpected: " << message;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
  // fairseq with a pre-norm encoder and a post-norm decoder.
  SafetensorsFile fs_post = load_safetensors(interop_fixture("fairseq_post"));
  fs_post.tensors["encoder.layer_norm.weight"] = Tensor::ones({16});
  fs_post.tensors["encoder.layer_norm.bias"] = Tensor::zeros({16});
  save_safetensors(dir + "/mixed.safetensors", fs_post.tensors, fs_post.metadata);
  const std::string mixed = test::error_of([&] { interop::import_checkpoint("fairseq", dir + "/mixed.safetensors", heads(4)); });
  EXPECT_TRUE(has(mixed, "has a pre-norm encoder and a post-norm decoder")) << mixed;
  fs::remove_all(dir);
}

TEST(Interop, ExportRefusesWhatTheFormatCannotHold) {
  const run::Checkpoint vit = interop::import_checkpoint("timm", interop_fixture("timm_deit"), heads(4)).checkpoint;
  run::Checkpoint collaborative = vit;
  collaborative.recipe = run::Recipe::parse(vit.recipe, "r", {"model.attention.type=collaborative"}).dump();
  run::Checkpoint native = interop::import_checkpoint("fairseq", interop_fixture("fairseq_post"), heads(4)).checkpoint;
  native.recipe = run::Recipe::parse(native.recipe, "r", {"model.position_offset=0"}).dump();
  const run::Checkpoint wide = interop::import_checkpoint("timm", interop_fixture("timm_vit"), heads(4)).checkpoint;
  interop::ExportOptions ema;
  ema.ema = true;
  const std::pair<std::function<void()>, std::string> cases[] = {
      {[&] { interop::export_checkpoint("onnx", vit, "c"); }, "unknown checkpoint format 'onnx'"},
      {[&] { interop::export_checkpoint("hf-vit", wide, "c"); },
       "model.attention.key_dim (24) is not model.d_model (16), but hf-vit's attention projects to d_model"},
      {[&] { interop::export_checkpoint("fairseq", vit, "c"); }, "model.kind is 'vit', but fairseq holds encoder-decoder"},
      {[&] { interop::export_checkpoint("timm", native, "c"); }, "model.kind is 'transformer', but timm holds vision"},
      {[&] { interop::export_checkpoint("timm", collaborative, "c"); },
       "model.attention.type is 'collaborative', but timm holds concat attention only"},
      {[&] { interop::export_checkpoint("fairseq", native, "c"); },
       "model.position_offset is 0, but fairseq's positions start at padding_idx + 1 = 2"},
      {[&] { interop::export_checkpoint("timm", vit, "c", ema); }, "holds no EMA weights"},
  };
  for (const auto& [run, message] : cases) {
    const std::string err = test::error_of(run);
    EXPECT_TRUE(has(err, message)) << err << "\nexpected: " << message;
  }
}

TEST(Interop, WeightsExportDropsOptimiserAndEmaState) {
  run::Checkpoint c = interop::import_checkpoint("timm", interop_fixture("timm_deit"), heads(4)).checkpoint;
  for (const auto& [name, t] : c.weights) {
    c.optimizer["exp_avg." + name] = Tensor::zeros(t.shape());
    c.ema[name] = t.clone();
  }
  const interop::ExportResult w = interop::export_checkpoint("cmha", c, "c");
  EXPECT_EQ(w.tensors.size(), c.weights.size());
  for (const auto& [name, t] : w.tensors) EXPECT_TRUE(c.weights.count(name)) << name;
  EXPECT_EQ(w.metadata.at("format"), "pt");
  interop::ExportOptions ema;
  ema.ema = true;
  const interop::ExportResult e = interop::export_checkpoint("timm", c, "c", ema);
  EXPECT_EQ(e.tensors.size(), load_safetensors(interop_fixture("timm_deit")).tensors.size());
}

// A model cmha trained goes out and comes back unchanged, with a note where
// the other framework's defaults differ from its settings.
TEST(Interop, NativeCheckpointsGoOutAndComeBack) {
  const std::string dir = test::temp_dir("interop_native");
  const std::pair<std::string, std::string> cases[] = {
      {"timm", "model: {kind: vit, image_size: 8, patch_size: 4, channels: 3, num_classes: 3, d_model: 16, depth: 2,\n"
               "        ffn_dim: 32, distillation_token: true, attention: {heads: 4}}\n"},
      {"hf-vit", "model: {kind: vit, image_size: 8, patch_size: 2, channels: 1, num_classes: 3, d_model: 16, depth: 1,\n"
                 "        ffn_dim: 24, attention: {heads: 2}}\n"},
      {"fairseq", "model: {kind: transformer, vocab_size: 9, d_model: 16, ffn_dim: 24, encoder_layers: 1, decoder_layers: 2,\n"
                  "        pre_norm: true, encoder_final_norm: true, decoder_final_norm: true, positions: learned,\n"
                  "        max_positions: 6, position_offset: 2, share_all_embeddings: false, attention: {heads: 4}}\n"},
  };
  for (const auto& [format, yaml] : cases) {
    SCOPED_TRACE(format);
    const run::Recipe r = run::Recipe::parse(yaml);
    Generator gen(2);
    run::Checkpoint c;
    c.recipe = r.dump();
    if (r.string("model.kind") == "vit") c.weights = parameters_of(nn::VisionTransformer(run::vit_config(r), gen));
    else c.weights = parameters_of(nn::Transformer(run::transformer_config(r), gen));
    const interop::ExportResult e = interop::export_checkpoint(format, c, "native");
    save_safetensors(dir + "/model.safetensors", e.tensors, e.metadata);
    for (const auto& [name, text] : e.side_files) test::write_file(dir + "/" + name, text);
    interop::ImportOptions opt = heads(r.integer("model.attention.heads"));
    const interop::ImportResult back = interop::import_checkpoint(format, dir + "/model.safetensors", opt);
    ASSERT_EQ(back.checkpoint.weights.size(), c.weights.size());
    for (const auto& [name, t] : c.weights) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(back.checkpoint.weights.count(name));
      EXPECT_TRUE(test::all_close(back.checkpoint.weights.at(name), t, 0.0f, 0.0f));
    }
    if (format == "timm") {  // cmha's default eps is 1e-5, timm's blocks 1e-6
      EXPECT_TRUE(has(e.notes.back(), "timm's blocks use LayerNorm eps 1e-6, this model 1e-05")) << e.notes.back();
    }
    if (format == "hf-vit") {  // config.json carried the eps and the heads
      EXPECT_DOUBLE_EQ(run::Recipe::parse(back.checkpoint.recipe).real("model.layer_norm_eps"), 1e-5);
    }
  }
  fs::remove_all(dir);
}
