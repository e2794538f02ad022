// cmha compress --finetune: compression in the loop, end to end on a tiny
// concat ViT (two D~k, a few fine-tune updates, resumed and skipped) and a toy
// translation transformer (BLEU), and one sentence (exit 2) for each mistake.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <fstream>

#include "distributed/communicator.h"
#include "run/checkpoint.h"
#include "run/recipe.h"
#include "run/run_results.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "support/tiny_images.h"
#include "support/toy_translation.h"
#include "study/compress_finetune.h"
#include "train/trainer.h"
#include "train/translation_task.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// A tiny concat ViT (2 heads, D_k 8) trained one epoch on tiny images in dir; its last checkpoint.
std::string train_concat_vit(const std::string& dir) {
  test::write_tiny_fashion_mnist(dir, 48, 24);
  const test::CommandResult r = test::run_cmha("train --threads 1 " + test::tiny_run(dir, dir + "/run") +
                                               " model.attention.type=concat train.max_epochs=1");
  EXPECT_EQ(r.code, 0) << r.output;
  return dir + "/run/checkpoint_3.safetensors";
}

}  // namespace

TEST(CompressFinetune, KeyDimListsAreWholeNumbersEachOnce) {
  EXPECT_EQ(study::parse_key_dim_list("256,128,64"), (std::vector<int64_t>{256, 128, 64}));
  EXPECT_EQ(study::parse_key_dim_list("8"), (std::vector<int64_t>{8}));
  const std::pair<std::string, std::string> cases[] = {
      {"", "--key-dim needs D~k values"},
      {"8,,4", "--key-dim '8,,4' has an empty item"},
      {"8,", "has an empty item"},
      {"0", "--key-dim: '0' is not a D~k (a whole number from 1 to 1048576)"},
      {"8,-4", "'-4' is not a D~k"},
      {"8,x", "'x' is not a D~k"},
      {"4.5", "'4.5' is not a D~k"},
      {"encoder.0=8", "'encoder.0=8' is not a D~k"},
      {"8,4,8", "--key-dim gives 8 twice"},
  };
  for (const auto& [text, message] : cases)
    EXPECT_TRUE(has(test::error_of([&] { study::parse_key_dim_list(text); }), message)) << text;
}

// Two D~k (8 = the model's D_k: the exact factorisation; 4: CP-ALS), 2 fine-tune updates each; then the
// same command again skips everything, and a fine-tune cut short resumes.
TEST(CompressFinetune, CompressesScoresFinetunesTabulatesAndResumes) {
  const std::string dir = test::temp_dir("compress_finetune");
  const std::string ckpt = train_concat_vit(dir), loop = dir + "/loop";
  const std::string args = "compress " + ckpt + " --key-dim 8,4 --finetune 2 --iters 20 --threads 1 -o " + loop +
                           " train.save_every=1";
  test::CommandResult r = test::run_cmha(args);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string csv = test::read_file(loop + "/compress.csv");
  EXPECT_EQ(csv.rfind("name,key_dim,stage,top1,", 0), 0u) << csv;
  EXPECT_EQ(count(csv, "\n"), 6u) << csv;  // the header, the original, two rows per D~k
  for (const char* row : {"\noriginal,8,original,", "\nkey_dim-8_compressed,8,compressed,",
                          "\nkey_dim-8_finetuned,8,finetuned,", "\nkey_dim-4_compressed,4,compressed,",
                          "\nkey_dim-4_finetuned,4,finetuned,"})
    EXPECT_TRUE(has(csv, row)) << row << "\n" << csv;
  const std::string md = test::read_file(loop + "/compress.md");
  EXPECT_EQ(md, r.output.substr(r.output.find("| D~k |"), md.size())) << r.output;
  EXPECT_TRUE(has(md, "| D~k | CP-ALS rel. error | key/query parameters | top1 compressed | top1 fine-tuned (2 updates) "
                      "| change |"))
      << md;
  EXPECT_TRUE(has(md, "| 8 (original, concat D_k) |")) << md;
  EXPECT_TRUE(has(md, "\n| 4 | ")) << md;
  // D~k 8 = D_k: the same function as the original; D~k 4 loses some of it.
  const nlohmann::json original = run::read_run_results(loop + "/original");
  const nlohmann::json exact = run::read_run_results(loop + "/key_dim-8");
  const nlohmann::json cp = run::read_run_results(loop + "/key_dim-4");
  EXPECT_NEAR(exact.at("loss").get<double>(), original.at("loss").get<double>(), 1e-4);
  EXPECT_LT(exact.at("cp_als_error").get<double>(), 1e-6);  // exact up to rounding
  EXPECT_GT(cp.at("cp_als_error").get<double>(), 0.0);
  EXPECT_LT(cp.at("key_query_parameters").get<double>(), original.at("key_query_parameters").get<double>());
  // Each fine-tune: a run of the compressed recipe from the compressed weights, 2 updates.
  const run::Recipe tuned = run::Recipe::load_stored(loop + "/key_dim-4/finetune/recipe.yaml");
  EXPECT_EQ(tuned.string("train.init_from"), loop + "/key_dim-4/compressed.safetensors");
  EXPECT_EQ(tuned.integer("train.max_updates"), 2);
  EXPECT_EQ(tuned.string("model.attention.type"), "collaborative");
  EXPECT_EQ(tuned.integer("model.attention.key_dim"), 4);
  EXPECT_TRUE(fs::exists(loop + "/key_dim-4/finetune/checkpoint_2.safetensors"));
  EXPECT_TRUE(run::read_run_results(loop + "/key_dim-4/finetune").at("top1").is_number());
  if (std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") == 0) {
    EXPECT_TRUE(fs::is_regular_file(loop + "/compress.png")) << r.output;
  }

  // Again: every step is skipped, nothing trains, the tables come back the same.
  r = test::run_cmha(args);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "[2/2] D~k 4: compressed and scored before")) << r.output;
  EXPECT_TRUE(has(r.output, "[2/2] D~k 4: fine-tuned before")) << r.output;
  EXPECT_FALSE(has(r.output, "cmha train:")) << r.output;
  EXPECT_FALSE(has(r.output, "scoring the original")) << r.output;
  EXPECT_EQ(test::read_file(loop + "/compress.csv"), csv);

  // A fine-tune cut short (its last checkpoint and results gone) resumes from its latest checkpoint.
  fs::remove(loop + "/key_dim-4/finetune/checkpoint_2.safetensors");
  fs::remove(run::run_results_path(loop + "/key_dim-4/finetune"));
  r = test::run_cmha(args);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "[1/2] D~k 8: fine-tuned before")) << r.output;
  EXPECT_TRUE(has(r.output, "resumed from " + loop + "/key_dim-4/finetune/checkpoint_1.safetensors at update 1"))
      << r.output;
  EXPECT_TRUE(fs::exists(run::run_results_path(loop + "/key_dim-4/finetune")));

  // Another fine-tune length, or other CP-ALS settings, into the same DIR: refused, naming what differs.
  r = test::run_cmha("compress " + ckpt + " --key-dim 4 --finetune 3 --iters 20 --threads 1 -o " + loop +
                     " train.save_every=1");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "the fine-tune directory '" + loop + "/key_dim-4/finetune' holds a run of a different "
                            "recipe (its recipe.yaml has train.max_updates 2, this point 3)"))
      << r.output;
  r = test::run_cmha("compress " + ckpt + " --key-dim 4 --finetune 2 --iters 5 --threads 1 -o " + loop);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "-o '" + loop + "' holds a compression with iters 20, this one has 5")) << r.output;
  r = test::run_cmha(args + " --metric top9");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "--metric top9 is not a score of this model (its scores: ")) << r.output;
  fs::remove_all(dir);
}

TEST(CompressFinetune, MistakesAreOneSentenceWithExitCode2) {
  const std::string dir = test::temp_dir("compress_finetune_errors");
  const std::string ckpt = train_concat_vit(dir), out = dir + "/loop";
  std::ofstream(dir + "/file") << "not a directory\n";
  const std::pair<std::string, std::string> cases[] = {
      {ckpt + " --key-dim '' --finetune 2 -o " + out, "--key-dim needs D~k values"},
      {ckpt + " --key-dim 8,,4 --finetune 2 -o " + out, "has an empty item"},
      {ckpt + " --key-dim 0 --finetune 2 -o " + out, "'0' is not a D~k"},
      {ckpt + " --key-dim=-4 --finetune 2 -o " + out, "'-4' is not a D~k"},
      {ckpt + " --key-dim 4,wide --finetune 2 -o " + out, "'wide' is not a D~k"},
      {ckpt + " --key-dim 16 --finetune 2 -o " + out,
       "--key-dim 16 is larger than the model's key width (D_k 8 in model.attention)"},
      {ckpt + " --key-dim 4 --finetune 0 -o " + out, "option '--finetune' needs a whole number from 1"},
      {ckpt + " --key-dim 4 --finetune=-3 -o " + out, "not '-3'"},
      {ckpt + " --key-dim 4 --finetune x -o " + out, "option '--finetune' needs a whole number"},
      {ckpt + " --key-dim 4 --finetune 2 -o " + dir + "/file", "-o '" + dir + "/file' is a file"},
      {ckpt + " --key-dim 4 --finetune 2", "cmha compress --finetune needs -o DIR"},
      {dir + "/none.safetensors --key-dim 4 --finetune 2 -o " + out,
       "checkpoint '" + dir + "/none.safetensors' does not exist"},
      {dir + " --key-dim 4 --finetune 2 -o " + out, "is a directory, not a checkpoint file"},
      {ckpt + " --key-dim 4 --finetune 2 -o " + out + " train.max_updates=9", "sets train.max_updates of each"},
      {ckpt + " --key-dim 4 --finetune 2 -o " + out + " train.bogus=1", "train.bogus"},
      {ckpt + " --key-dim 4 -o " + dir + "/x.safetensors optim.lr=1", "they go with --finetune"},
      {ckpt + " --key-dim 4 --finetune 2 --layers encoder -o " + out, "has no attention place 'encoder'"},
  };
  for (const auto& [args, message] : cases) {
    const test::CommandResult r = test::run_cmha("compress " + args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, message)) << args << "\n" << r.output;
    EXPECT_EQ(count(r.output, "\n"), 1u) << args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(out));  // every mistake is found before DIR is made
  fs::remove_all(dir);
}

// A translation checkpoint: scored by BLEU on its test split, with the SentencePiece model of the run
// beside each compressed checkpoint and in each fine-tune (which therefore trains no other).
TEST(CompressFinetune, TranslationIsScoredByBleu) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::string dir = test::toy_dir("compress_finetune_translation");
  const run::Recipe r = test::toy_recipe(dir, {"model.attention.type=concat", "train.max_updates=20",
                                               "data.test_prefix=" + dir + "/valid", "data.valid_is_test=true",
                                               "eval.beam=1", "eval.average_last=1"});
  {
    Generator g(3);
    train::TranslationTask task(r, g);
    distributed::SingleCommunicator comm;
    train::Trainer(r, task, comm).run();
  }
  omp_set_num_threads(threads);
  const std::string loop = dir + "/loop";
  const test::CommandResult out = test::run_cmha("compress " + dir + "/run/checkpoint_20.safetensors --key-dim 8 "
                                                 "--finetune 2 --iters 10 --threads 1 -o " + loop);
  ASSERT_EQ(out.code, 0) << out.output;
  EXPECT_TRUE(has(out.output, "| D~k | CP-ALS rel. error | key/query parameters | bleu compressed | bleu fine-tuned "
                              "(2 updates) | change |"))
      << out.output;
  EXPECT_TRUE(has(out.output, "| 32 (original, concat D_k) |")) << out.output;
  EXPECT_TRUE(has(out.output, "\n| 8 | ")) << out.output;
  EXPECT_FALSE(has(out.output, "trained a joint")) << out.output;
  EXPECT_TRUE(fs::exists(loop + "/key_dim-8/spm.model"));
  EXPECT_TRUE(fs::exists(loop + "/key_dim-8/test.de.hyp"));
  EXPECT_TRUE(fs::exists(loop + "/key_dim-8/finetune/test.de.hyp"));
  const std::string csv = test::read_file(loop + "/compress.csv");
  EXPECT_EQ(csv.rfind("name,key_dim,stage,bleu,", 0), 0u) << csv;
  EXPECT_TRUE(has(csv, "\nkey_dim-8_finetuned,8,finetuned,")) << csv;

  // The two-step path: `cmha compress -o OUT` puts the run's spm.model beside OUT, and a fine-tune from
  // OUT (train.init_from) copies it into its own directory instead of training other pieces.
  const std::string two = dir + "/two";
  fs::create_directories(two);
  const test::CommandResult step =
      test::run_cmha("compress " + dir + "/run/checkpoint_20.safetensors --key-dim 8 --iters 10 --threads 1 -o " +
                     two + "/compressed.safetensors");
  ASSERT_EQ(step.code, 0) << step.output;
  EXPECT_TRUE(has(step.output, "and the spm.model beside it")) << step.output;
  const std::string pieces = test::read_file(dir + "/run/spm.model");
  EXPECT_EQ(test::read_file(two + "/spm.model"), pieces);
  const auto finetune_recipe = [&](const std::string& init, const std::string& save_dir) {
    return run::Recipe::parse_stored(run::load_checkpoint(init).recipe, init,
                                     {"train.init_from=" + init, "train.save_dir=" + save_dir});
  };
  {
    Generator g(3);
    train::TranslationTask task(finetune_recipe(two + "/compressed.safetensors", two + "/finetune"), g);
  }
  EXPECT_EQ(test::read_file(two + "/finetune/spm.model"), pieces);
  // Without the pieces beside it, a translation checkpoint cannot be fine-tuned: one sentence, not new pieces.
  fs::create_directories(dir + "/bare");
  fs::copy_file(two + "/compressed.safetensors", dir + "/bare/compressed.safetensors");
  Generator g(3);
  const std::string error = test::error_of([&] {
    train::TranslationTask task(finetune_recipe(dir + "/bare/compressed.safetensors", dir + "/bare/finetune"), g);
  });
  EXPECT_TRUE(has(error, "has no spm.model beside it")) << error;
  EXPECT_FALSE(fs::exists(dir + "/bare/finetune/spm.model"));
  fs::remove_all(dir);
}
