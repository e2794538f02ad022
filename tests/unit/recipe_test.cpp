#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "run/model_config.h"
#include "run/options.h"
#include "run/recipe.h"
#include "support/check.h"
#include "tensor/error.h"
#include "support/source_paths.h"

using namespace cmha;
using test::error_of;
using namespace cmha::run;

namespace {
std::string write_under(const std::string& dir, const std::string& name, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(dir + "/" + name).parent_path());
  std::ofstream(dir + "/" + name) << text;
  return dir + "/" + name;
}

}  // namespace

TEST(Recipe, IncludesThenOwnKeysThenOverrides) {
  const std::string dir = cmha::test::temp_dir("recipe_inc");
  write_under(dir, "configs/base.yaml", "model:\n  d_model: 256\n  ffn_dim: 1024\n  attention: {heads: 4}\n");
  const std::string r = write_under(dir, "recipes/run.yaml",
                              "include: ../configs/base.yaml\nmodel:\n  ffn_dim: 512\n"
                              "  encoder_attention: {type: collaborative, key_dim: 64}\n");
  Recipe rec = Recipe::load(r, {"model.d_model=128"});
  EXPECT_EQ(rec.integer("model.d_model"), 128);
  EXPECT_EQ(rec.integer("model.ffn_dim"), 512);
  EXPECT_EQ(rec.origin("model.ffn_dim"), r + ":3");
  EXPECT_EQ(rec.origin("model.d_model"), "command line (model.d_model=128)");
  EXPECT_EQ(rec.origin("model.encoder_layers"), "default");
  // Per-place attention keys inherit model.attention unless set.
  auto enc = attention_config(rec, "model.encoder_attention");
  auto dec = attention_config(rec, "model.decoder_attention");
  EXPECT_EQ(enc.type, "collaborative");
  EXPECT_EQ(enc.key_dim, 64);
  EXPECT_EQ(enc.heads, 4);
  EXPECT_EQ(dec.type, "concat");
  EXPECT_EQ(dec.heads, 4);
  std::filesystem::remove_all(dir);
}

TEST(Recipe, UnknownKeyNamesFileLineAndNearestKey) {
  const std::string msg = error_of([] { Recipe::parse("model:\n  d_modle: 3\n", "r.yaml"); });
  EXPECT_EQ(msg, "r.yaml:2: unknown key 'model.d_modle'; did you mean 'model.d_model'?");
  EXPECT_NE(error_of([] { Recipe::parse("", "r.yaml", {"optim.lrr=3"}); }).find("did you mean 'optim.lr'"),
            std::string::npos);
}

TEST(Recipe, TypeRangeAndChoiceErrors) {
  EXPECT_EQ(error_of([] { Recipe::parse("model: {d_model: wide}", "r.yaml"); }),
            "r.yaml:1: model.d_model expects an integer, got 'wide'");
  EXPECT_NE(error_of([] { Recipe::parse("model:\n  dropout: 1.5\n", "r.yaml"); }).find("r.yaml:2: model.dropout = 1.5 is out of range"),
            std::string::npos);
  EXPECT_EQ(error_of([] { Recipe::parse("model: {attention: {type: linear}}", "r.yaml"); }),
            "r.yaml:1: model.attention.type = 'linear' is not one of: concat, collaborative, talking_heads, grouped");
  EXPECT_NE(error_of([] { Recipe::parse("optim: {betas: 0.9}", "r.yaml"); }).find("expects a list of numbers"),
            std::string::npos);
  EXPECT_NE(error_of([] { Recipe::parse("model: [1, 2", "r.yaml"); }).find("YAML syntax error"), std::string::npos);
  EXPECT_NE(error_of([] { Recipe::parse("", "r.yaml", {"model.d_model"}); }).find("key.path=value"), std::string::npos);
  EXPECT_EQ(error_of([] { Recipe::load("/nonexistent/recipe.yaml"); }), "recipe file '/nonexistent/recipe.yaml' does not exist");
}

TEST(Recipe, IncludeCyclesAreReported) {
  const std::string dir = cmha::test::temp_dir("recipe_cycle");
  write_under(dir, "a.yaml", "include: b.yaml\n");
  write_under(dir, "b.yaml", "include: a.yaml\n");
  EXPECT_NE(error_of([&] { Recipe::load(dir + "/a.yaml"); }).find("include cycle"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Recipe, DumpHoldsEveryKeyItsModelReadsAndReloadsToTheSameValues) {
  Recipe r = Recipe::parse("model: {d_model: 96, attention: {type: collaborative}}\noptim: {betas: [0.8, 0.9]}\n");
  const std::string text = r.dump();
  Recipe again = Recipe::parse(text, "dump");
  EXPECT_EQ(again.dump(), text);
  EXPECT_EQ(again.integer("model.d_model"), 96);
  EXPECT_EQ(again.string("model.cross_attention.type"), "collaborative");
  EXPECT_EQ(again.reals("optim.betas"), (std::vector<double>{0.8, 0.9}));
  for (const auto& spec : option_registry()) EXPECT_EQ(again.has(spec.path), r.reads(spec.path)) << spec.path;
  // A transformer's recipe shows no ViT or image key, a ViT's no transformer or translation key.
  EXPECT_EQ(text.find("patch_size"), std::string::npos) << text;
  EXPECT_EQ(text.find("train_images"), std::string::npos) << text;
  const std::string vit = Recipe::parse("model: {kind: vit}\ntrain: {task: image_classification}\n").dump();
  EXPECT_NE(vit.find("patch_size"), std::string::npos) << vit;
  for (const char* absent : {"activation:", "vocab_size", "encoder_attention", "test_prefix", "beam:", "src_len"})
    EXPECT_EQ(vit.find(absent), std::string::npos) << absent << "\n" << vit;
  // cmha bench times a ViT too: its batch size (images) is a ViT key, the sentence lengths are not.
  EXPECT_NE(vit.find("bench:\n  batch_size:"), std::string::npos) << vit;
}

TEST(Recipe, EveryRegisteredDefaultIsValidAndHelped) {
  const OptionSpec* kinds = find_option("model.kind");
  const OptionSpec* tasks = find_option("train.task");
  for (const auto& spec : option_registry()) {
    SCOPED_TRACE(spec.path);
    EXPECT_FALSE(spec.help.empty());
    EXPECT_EQ(spec.default_value.empty(), !spec.inherit_from.empty());
    // Whom a key is for is among the model kinds and tasks there are.
    for (const auto& k : spec.model_kinds)
      EXPECT_NE(std::find(kinds->choices.begin(), kinds->choices.end(), k), kinds->choices.end()) << k;
    for (const auto& t : spec.tasks)
      EXPECT_NE(std::find(tasks->choices.begin(), tasks->choices.end(), t), tasks->choices.end()) << t;
    const std::string kind = spec.model_kinds.empty() ? "transformer" : spec.model_kinds[0];
    const std::string task = !spec.tasks.empty() ? spec.tasks[0] : kind == "vit" ? "image_classification" : "translation";
    if (!spec.default_value.empty())
      EXPECT_NO_THROW(Recipe::parse("", "r", {"model.kind=" + kind, "train.task=" + task, spec.path + "=" + spec.default_value}));
  }
  Recipe r = Recipe::parse("");
  EXPECT_EQ(transformer_config(r).d_model, 512);
  EXPECT_EQ(vit_config(r).patch_size, 16);
}

TEST(Recipe, EveryShippedConfigAndRecipeLoadsAndBuildsItsModelConfig) {
  int count = 0;
  for (const char* folder : {"configs", "recipes"}) {
    for (auto& entry : std::filesystem::recursive_directory_iterator(std::string(CMHA_SOURCE_DIR) + "/" + folder)) {
      if (entry.path().extension() != ".yaml") continue;
      SCOPED_TRACE(entry.path().string());
      Recipe r = Recipe::load(entry.path().string());
      if (r.string("model.kind") == "vit") EXPECT_GT(vit_config(r).depth, 0);
      else EXPECT_GT(transformer_config(r).d_model, 0);
      ++count;
    }
  }
  EXPECT_GE(count, 10);
}

TEST(Recipe, BenchRecipesSayWhatTheIssueAsks) {
  Recipe c = Recipe::load(std::string(CMHA_SOURCE_DIR) + "/recipes/bench/transformer_small_concat_dk256.yaml");
  Recipe k = Recipe::load(std::string(CMHA_SOURCE_DIR) + "/recipes/bench/transformer_small_collab_dk64.yaml");
  for (Recipe* r : {&c, &k}) {
    auto m = transformer_config(*r);
    EXPECT_EQ(m.d_model, 256);
    EXPECT_EQ(m.ffn_dim, 1024);
    EXPECT_EQ(m.encoder_layers, 3);
    EXPECT_EQ(m.decoder_layers, 3);
    EXPECT_TRUE(m.encoder_final_norm && m.decoder_final_norm && !m.pre_norm);
    EXPECT_EQ(m.src_vocab, 8000);
    EXPECT_FLOAT_EQ(m.dropout, 0.1f);
    EXPECT_EQ(m.cross_attention.heads, 4);
  }
  EXPECT_EQ(transformer_config(c).decoder_attention.key_dim, 256);
  EXPECT_EQ(transformer_config(k).cross_attention.type, "collaborative");
  EXPECT_EQ(transformer_config(k).encoder_attention.key_dim, 64);
}

TEST(Recipe, Wmt14RecipesSayWhatTheIssueAsks) {
  const std::string dir = std::string(CMHA_SOURCE_DIR) + "/recipes/wmt14_en_de/";
  for (const std::string type : {"concat", "collaborative"}) {
    for (const int64_t dk : {512, 256, 128, 64}) {
      const std::string name = type + "_dk" + std::to_string(dk);
      SCOPED_TRACE(name);
      const Recipe r = Recipe::load(dir + name + ".yaml");
      const auto m = transformer_config(r);
      // transformer-base, the attention choice in all three places
      EXPECT_EQ(m.d_model, 512);
      EXPECT_EQ(m.ffn_dim, 2048);
      EXPECT_EQ(m.encoder_layers, 6);
      EXPECT_EQ(m.decoder_layers, 6);
      EXPECT_FALSE(m.pre_norm);
      EXPECT_FLOAT_EQ(m.dropout, 0.1f);
      EXPECT_TRUE(m.share_all_embeddings);
      EXPECT_EQ(m.src_vocab, 32000);
      EXPECT_EQ(m.tgt_vocab, 32000);
      for (const auto* a : {&m.encoder_attention, &m.decoder_attention, &m.cross_attention}) {
        EXPECT_EQ(a->type, type);
        EXPECT_EQ(a->key_dim, dk);
        EXPECT_EQ(a->heads, 8);
      }
      // optimiser and schedule
      EXPECT_EQ(r.string("optim.name"), "adam");
      EXPECT_EQ(r.reals("optim.betas"), (std::vector<double>{0.9, 0.98}));
      EXPECT_DOUBLE_EQ(r.real("optim.eps"), 1e-9);
      EXPECT_DOUBLE_EQ(r.real("optim.lr"), 7e-4);
      EXPECT_EQ(r.string("lr.schedule"), "inverse_sqrt");
      EXPECT_EQ(r.integer("lr.warmup"), 4000);
      EXPECT_DOUBLE_EQ(r.real("lr.warmup_init_lr"), 1e-7);
      EXPECT_DOUBLE_EQ(r.real("train.label_smoothing"), 0.1);
      // about 28k target tokens per update, 100k updates, enough checkpoints to average
      const int64_t tokens = r.integer("data.max_tokens") * r.integer("train.update_freq");
      EXPECT_GE(tokens, 27000);
      EXPECT_LE(tokens, 29000);
      EXPECT_EQ(r.integer("train.max_updates"), 100000);
      EXPECT_GE(r.integer("train.keep_last"), r.integer("eval.average_last"));
      EXPECT_EQ(r.string("train.save_dir"), "runs/wmt14_en_de/" + name);
      // data and evaluation
      EXPECT_EQ(r.string("data.train_prefix"), "work/wmt14_en_de/train");
      EXPECT_EQ(r.string("data.valid_prefix"), "work/wmt14_en_de/dev");
      EXPECT_EQ(r.string("data.test_prefix"), "work/wmt14_en_de/test");
      EXPECT_TRUE(r.boolean("eval.valid_bleu"));
      EXPECT_EQ(r.integer("eval.valid_beam"), 1);
      EXPECT_EQ(r.integer("eval.valid_sentences"), 500);
      EXPECT_EQ(r.string("train.best_metric"), "bleu");
      EXPECT_EQ(r.string("train.best_mode"), "max");
      EXPECT_EQ(r.integer("eval.average_last"), 5);
      EXPECT_EQ(r.integer("eval.beam"), 4);
      EXPECT_DOUBLE_EQ(r.real("eval.lenpen"), 0.6);
    }
  }
}

// A key no code of the recipe's model and task reads would be silently ignored: refused, naming where it was set.
TEST(Recipe, AKeyTheModelOrTaskDoesNotReadIsAnErrorNamingItsLine) {
  EXPECT_EQ(error_of([] { Recipe::parse("model:\n  kind: vit\n  activation: relu\n", "r.yaml"); }),
            "r.yaml:3: model.activation is read only by model.kind transformer, and this recipe's model.kind is vit "
            "(r.yaml:2): remove it, as nothing would read it");
  EXPECT_EQ(error_of([] { Recipe::parse("model: {depth: 2}\n", "r.yaml"); }),
            "r.yaml:1: model.depth is read only by model.kind vit, and this recipe's model.kind is transformer (the "
            "default): remove it, as nothing would read it");
  EXPECT_NE(error_of([] { Recipe::parse("model: {kind: vit}\n", "r.yaml", {"model.encoder_attention.heads=2"}); })
                .find("command line (model.encoder_attention.heads=2): model.encoder_attention.heads is read only by "
                      "model.kind transformer"),
            std::string::npos);
  EXPECT_NE(error_of([] { Recipe::parse("train: {task: image_classification}\nmodel: {kind: vit}\neval: {beam: 2}\n", "r.yaml"); })
                .find("r.yaml:3: eval.beam is read only by train.task translation, and this recipe's train.task is "
                      "image_classification (r.yaml:1)"),
            std::string::npos);
  // model.attention is the ViT's and the transformer's defaults: both read it.
  EXPECT_NO_THROW(Recipe::parse("model: {kind: vit, attention: {heads: 2}}\n"));
  EXPECT_NO_THROW(Recipe::parse("model: {attention: {heads: 2}}\n"));
  // Decided once everything is read: a later file or override may set model.kind.
  EXPECT_NO_THROW(Recipe::parse("model: {depth: 2}\n", "r.yaml", {"model.kind=vit"}));
}

TEST(Recipe, AStoredRecipeDropsTheKeysItsModelDoesNotRead) {
  // As cmha wrote recipes before --dump-config left such keys out.
  const std::string old =
      "model: {kind: vit, depth: 2, activation: relu, vocab_size: 8000}\ntrain: {task: image_classification}\n"
      "data: {test_prefix: x}\n";
  EXPECT_NE(error_of([&] { Recipe::parse(old, "ckpt"); }).find("model.activation"), std::string::npos);
  const Recipe r = Recipe::parse_stored(old, "ckpt");
  EXPECT_EQ(r.integer("model.depth"), 2);
  EXPECT_FALSE(r.has("model.activation"));
  EXPECT_FALSE(r.has("model.vocab_size"));
  EXPECT_FALSE(r.has("data.test_prefix"));
  // Overrides on it are checked as usual.
  EXPECT_NE(error_of([&] { Recipe::parse_stored(old, "ckpt", {"model.activation=gelu"}); })
                .find("command line (model.activation=gelu): model.activation is read only by model.kind transformer"),
            std::string::npos);
}

TEST(Recipe, AnEmptyStringValueIsTheEmptyString) {
  // data.test_prefix= : '' = no final evaluation, as its help says; in a file `test_prefix:` alike.
  EXPECT_EQ(Recipe::parse("", "r", {"data.test_prefix="}).string("data.test_prefix"), "");
  EXPECT_EQ(Recipe::parse("data:\n  test_prefix:\n", "r").string("data.test_prefix"), "");
  EXPECT_EQ(Recipe::parse("", "r", {"data.test_prefix=''"}).string("data.test_prefix"), "");
  // A number still needs one.
  EXPECT_EQ(error_of([] { Recipe::parse("", "r", {"data.max_len="}); }),
            "command line (data.max_len=): data.max_len expects an integer");
}

TEST(Recipe, FirstDifferenceComparesValuesOfTheKeysType) {
  const Recipe a = Recipe::parse("optim: {lr: 2e-3}\nmodel: {attention: {key_dim: 16}}\n");
  EXPECT_EQ(first_difference(a, Recipe::parse("optim: {lr: 0.002}\nmodel: {attention: {key_dim: 16}}\n")), "");
  EXPECT_EQ(first_difference(a, Recipe::parse("optim: {lr: 2e-3}\nmodel: {attention: {key_dim: 32}}\n")),
            "model.attention.key_dim");
  EXPECT_EQ(first_difference(a, Recipe::parse("optim: {lr: 2e-3}\nmodel: {attention: {key_dim: 32}}\n"),
                             {"model.attention.key_dim", "model.encoder_attention.key_dim",
                              "model.decoder_attention.key_dim", "model.cross_attention.key_dim"}),
            "");
  EXPECT_EQ(first_difference(a, Recipe::parse("model: {kind: vit}\n")), "model.kind");
  EXPECT_EQ(a.text("optim.betas"), "[0.9, 0.98]");
}

TEST(Recipe, PerLayerAttentionSettingsOverThePlace) {
  const Recipe r = Recipe::parse(
      "model:\n  encoder_layers: 3\n  attention: {heads: 4, key_dim: 64}\n"
      "  encoder_attention:\n    layers: {2: {type: collaborative, key_dim: 16}, 0: {key_dim: \"32\"}}\n",
      "r.yaml", {"model.decoder_attention.layers={1: {heads: 2}}"});
  EXPECT_EQ(attention_config(r, "model.encoder_attention", 0).key_dim, 32);
  EXPECT_EQ(attention_config(r, "model.encoder_attention", 0).type, "concat");
  EXPECT_EQ(attention_config(r, "model.encoder_attention", 1).key_dim, 64);  // the place's
  EXPECT_EQ(attention_config(r, "model.encoder_attention", 2).type, "collaborative");
  EXPECT_EQ(attention_config(r, "model.encoder_attention", 2).heads, 4);
  EXPECT_EQ(attention_config(r, "model.decoder_attention", 1).heads, 2);
  EXPECT_EQ(attention_config(r, "model.cross_attention", 1).heads, 4);  // layers do not inherit between places
  const nn::TransformerConfig t = transformer_config(r);
  EXPECT_EQ(t.encoder_attention_layers.size(), 2u);
  EXPECT_EQ(t.encoder_attention_layers.at(2).key_dim, 16);
  // Normalized: indices ascending, values typed; so the dump reads back the same.
  EXPECT_EQ(r.text("model.encoder_attention.layers"), "{0: {key_dim: 32}, 2: {type: collaborative, key_dim: 16}}");
  const Recipe again = Recipe::parse(r.dump(), "dump");
  EXPECT_EQ(first_difference(r, again), "");
  EXPECT_EQ(again.text("model.encoder_attention.layers"), r.text("model.encoder_attention.layers"));
  EXPECT_EQ(r.to_json()["model"]["encoder_attention"]["layers"]["2"]["key_dim"], 16);
  const Recipe other = Recipe::parse("model: {encoder_attention: {layers: {0: {key_dim: 33}}}}", "o.yaml");
  EXPECT_EQ(first_difference(r, other), "model.encoder_layers");
  EXPECT_EQ(first_difference(Recipe::parse("model: {encoder_layers: 3}", "a"), other, {"model.encoder_layers"}),
            "model.encoder_attention.layers");
}

TEST(Recipe, PerLayerErrorsNameTheLayer) {
  EXPECT_EQ(error_of([] { Recipe::parse("model:\n  encoder_attention: {layers: {6: {key_dim: 8}}}\n", "r.yaml"); }),
            "r.yaml:2: model.encoder_attention.layers sets layer 6, which does not exist: model.encoder_layers is 6 "
            "(layers 0 to 5)");
  EXPECT_EQ(error_of([] { Recipe::parse("", "r.yaml", {"model.cross_attention.layers={9: {heads: 2}}"}); }),
            "command line (model.cross_attention.layers={9: {heads: 2}}): model.cross_attention.layers sets layer 9, "
            "which does not exist: model.decoder_layers is 6 (layers 0 to 5)");
  EXPECT_EQ(error_of([] { Recipe::parse("model: {encoder_attention: {layers: {1: {keydim: 8}}}}", "r.yaml"); }),
            "r.yaml:1: model.encoder_attention.layers.1: unknown attention key 'keydim'; did you mean 'key_dim'?");
  EXPECT_EQ(error_of([] { Recipe::parse("model: {encoder_attention: {layers: {1: {key_dim: -8}}}}", "r.yaml"); }),
            "r.yaml:1: model.encoder_attention.layers.1.key_dim = -8 is out of range: [0, 1048576]");
  EXPECT_EQ(error_of([] { Recipe::parse("model: {encoder_attention: {layers: {1: {type: linear}}}}", "r.yaml"); }),
            "r.yaml:1: model.encoder_attention.layers.1.type = 'linear' is not one of: concat, collaborative, "
            "talking_heads, grouped");
  EXPECT_EQ(error_of([] { Recipe::parse("model: {encoder_attention: {layers: {first: {heads: 2}}}}", "r.yaml"); }),
            "r.yaml:1: model.encoder_attention.layers: 'first' is not a layer index (a whole number from 0)");
  EXPECT_EQ(error_of([] { Recipe::parse("model: {encoder_attention: {layers: {-1: {heads: 2}}}}", "r.yaml"); }),
            "r.yaml:1: model.encoder_attention.layers: '-1' is not a layer index (a whole number from 0)");
  EXPECT_EQ(error_of([] { Recipe::parse("model: {encoder_attention: {layers: [1, 2]}}", "r.yaml"); }),
            "r.yaml:1: model.encoder_attention.layers expects a mapping of layer indices to attention keys, e.g. "
            "{0: {key_dim: 128}}");
  EXPECT_EQ(error_of([] { Recipe::parse("model: {encoder_attention: {layers: {1: 64}}}", "r.yaml"); }),
            "r.yaml:1: model.encoder_attention.layers.1 expects a mapping of attention keys, e.g. {key_dim: 128}");
  // A ViT's per-block settings are model.attention.layers; a transformer does not read them.
  EXPECT_NE(error_of([] { Recipe::parse("model: {attention: {layers: {0: {heads: 2}}}}", "r.yaml"); })
                .find("model.attention.layers is read only by model.kind vit"),
            std::string::npos);
  EXPECT_NO_THROW(Recipe::parse("model: {kind: vit, depth: 2, attention: {layers: {1: {heads: 2}}}}", "r.yaml"));
  // Sizes that do not fit a layer's heads: the error names the place and the layer.
  const Recipe bad = Recipe::parse(
      "model: {encoder_layers: 2, decoder_layers: 1, d_model: 16, ffn_dim: 16, vocab_size: 10,\n"
      "        attention: {heads: 4}, encoder_attention: {layers: {1: {key_dim: 6}}}}\n", "r.yaml");
  EXPECT_EQ(error_of([&] {
              Generator gen(1);
              nn::Transformer m(transformer_config(bad), gen);
            }).rfind("encoder self-attention, layer 1 (its per-layer settings): attention.key_dim (6)", 0),
            0u);
}
