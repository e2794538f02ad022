// Evaluating translation models: teacher-forced scores (Translator::score and
// `cmha score`), validation BLEU during training, and the final evaluation
// that averages the last checkpoints, translates the test split and writes
// BLEU into results.json.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <functional>

#include "distributed/communicator.h"
#include "eval/bleu.h"
#include "eval/translator.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "support/toy_translation.h"
#include "train/trainer.h"
#include "train/translation_task.h"

using namespace cmha;
using test::error_of;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;

// Tiny models are all OpenMP overhead: one thread is faster and gives the same results.
struct OneThread {
  int saved = omp_get_max_threads();
  OneThread() { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(saved); }
};

}  // namespace

TEST(TranslationEval, ScoresSumToTheValidationLoss) {
  OneThread one;
  const std::string dir = test::toy_dir("score");
  const run::Recipe r = test::toy_recipe(dir, {"train.max_updates=15"});
  Generator g(3);
  train::TranslationTask task(r, g);
  distributed::SingleCommunicator comm;
  train::Trainer(r, task, comm).run();
  const auto metrics = task.validate();  // every toy pair is within data.max_len, so none is dropped

  eval::TranslatorOptions o;
  o.spm_path = dir + "/run/spm.model";
  o.max_tokens = 97;  // several batches of different lengths
  eval::Translator translator(task.transformer(), o);
  const auto src = test::read_lines(dir + "/valid.en"), tgt = test::read_lines(dir + "/valid.de");
  std::vector<int64_t> pieces;
  const std::vector<double> logprob = translator.score(src, tgt, &pieces);
  ASSERT_EQ(logprob.size(), src.size());
  double total = 0;
  int64_t n = 0;
  for (size_t i = 0; i < logprob.size(); ++i) {
    EXPECT_LT(logprob[i], 0.0);
    EXPECT_EQ(pieces[i], static_cast<int64_t>(translator.encode(tgt[i]).size()));
    total += logprob[i];
    n += pieces[i];
  }
  EXPECT_NEAR(-total / static_cast<double>(n), metrics.at("nll_loss"), 1e-4);
  // One pair scored alone gives the same number as in a batch.
  EXPECT_NEAR(translator.score({src[5]}, {tgt[5]})[0], logprob[5], 1e-3);
  fs::remove_all(dir);
}

TEST(TranslationEval, ValidationReportsBleuAndFinalEvaluationAveragesAndScores) {
  OneThread one;
  const std::string dir = test::toy_dir("final");
  const run::Recipe r = test::toy_recipe(
      dir, {"eval.valid_bleu=true", "eval.valid_sentences=12", "data.test_prefix=" + dir + "/valid", "data.valid_is_test=true",
            "train.save_every=10", "train.keep_last=5", "eval.average_last=3", "eval.beam=2",
            "train.validate_every=20", "train.best_metric=bleu", "train.best_mode=max"});
  Generator g(3);
  train::TranslationTask task(r, g);
  distributed::SingleCommunicator comm;
  const train::TrainSummary s = train::Trainer(r, task, comm).run();
  ASSERT_TRUE(s.last_validation.count("bleu"));
  EXPECT_GE(s.last_validation.at("bleu"), 0.0);
  EXPECT_LE(s.last_validation.at("bleu"), 100.0);
  EXPECT_TRUE(fs::exists(dir + "/run/checkpoint_best.safetensors"));

  const nlohmann::json res = task.final_evaluation(dir + "/run");
  EXPECT_EQ(res.at("checkpoints_averaged").get<int>(), 3);
  EXPECT_EQ(res.at("test_sentences").get<int>(), 40);
  EXPECT_TRUE(fs::exists(dir + "/run/checkpoint_average.safetensors"));
  const auto hyps = test::read_lines(dir + "/run/test.de.hyp");
  ASSERT_EQ(hyps.size(), 40u);
  const auto refs = test::read_lines(dir + "/valid.de");
  EXPECT_DOUBLE_EQ(res.at("bleu").get<double>(), eval::corpus_bleu(hyps, refs).score);
  eval::BleuOptions compound;
  compound.compound_split = true;
  compound.smooth = "none";
  EXPECT_DOUBLE_EQ(res.at("bleu_compound").get<double>(), eval::corpus_bleu(hyps, refs, compound).score);
  EXPECT_TRUE(has(res.at("bleu_line").get<std::string>(), "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp"));
  // The lines are what `cmha bleu` prints for the same files (once "BLEU|... = BLEU = 21.15 ...").
  const std::string bleu_args = "bleu " + dir + "/valid.de -i " + dir + "/run/test.de.hyp";
  EXPECT_EQ(test::run_cmha(bleu_args).output, res.at("bleu_line").get<std::string>() + "\n");
  EXPECT_EQ(test::run_cmha(bleu_args + " --compound-split -s none").output,
            res.at("bleu_compound_line").get<std::string>() + "\n");
  // The averaged model is what translated: `cmha translate` on it gives the same lines.
  eval::TranslatorOptions o;
  o.search.beam = 2;
  eval::Translator averaged(dir + "/run/checkpoint_average.safetensors", o);
  const auto src = test::read_lines(dir + "/valid.en");
  EXPECT_EQ(averaged.translate({src.begin(), src.begin() + 5}), std::vector<std::string>(hyps.begin(), hyps.begin() + 5));
  fs::remove_all(dir);
}

TEST(TranslationEval, NoTestPrefixMeansNoFinalEvaluation) {
  OneThread one;
  const std::string dir = test::toy_dir("none");
  Generator g(3);
  train::TranslationTask task(test::toy_recipe(dir), g);
  EXPECT_TRUE(task.final_evaluation(dir + "/run").empty());
  fs::remove_all(dir);
}

TEST(TranslationEval, ErrorsNameTheMissingTestFileAndTheEmptyRunDirectory) {
  OneThread one;
  const std::string dir = test::toy_dir("errors");
  const std::string missing = error_of([&] {
    Generator g(3);
    train::TranslationTask task(test::toy_recipe(dir, {"data.test_prefix=" + dir + "/nope"}), g);
  });
  EXPECT_TRUE(has(missing, "data.test_prefix: the test corpus file '" + dir + "/nope.en' does not exist")) << missing;
  Generator g(3);
  train::TranslationTask task(test::toy_recipe(dir, {"data.test_prefix=" + dir + "/valid", "data.valid_is_test=true"}), g);
  fs::create_directories(dir + "/empty");
  const std::string empty = error_of([&] { task.final_evaluation(dir + "/empty"); });
  EXPECT_TRUE(has(empty, "'" + dir + "/empty' holds no checkpoint")) << empty;
  fs::remove_all(dir);
}

TEST(TranslationEval, ScoreCommandPrintsOneLinePerPairAndNamesMismatchedFiles) {
  OneThread one;
  const std::string dir = test::toy_dir("cli");
  {
    const run::Recipe r = test::toy_recipe(dir, {"train.max_updates=5"});
    Generator g(3);
    train::TranslationTask task(r, g);
    distributed::SingleCommunicator comm;
    train::Trainer(r, task, comm).run();
  }
  const std::string ckpt = dir + "/run/checkpoint_5.safetensors";
  const test::CommandResult ok =
      test::run_cmha("score " + ckpt + " --src " + dir + "/valid.en --tgt " + dir + "/valid.de --threads 1");
  ASSERT_EQ(ok.code, 0) << ok.output;
  int scored = 0;  // lines "<log-probability>\t<pieces>"
  for (size_t at = 0; (at = ok.output.find('\t', at)) != std::string::npos; ++at) ++scored;
  EXPECT_EQ(scored, 40) << ok.output;
  EXPECT_TRUE(has(ok.output, "cmha score: 40 pairs")) << ok.output;

  test::write_file(dir + "/short.de", "eins\nzwei\n");
  const test::CommandResult bad =
      test::run_cmha("score " + ckpt + " --src " + dir + "/valid.en --tgt " + dir + "/short.de");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(has(bad.output, "has 40 lines but target file '" + dir + "/short.de' has 2")) << bad.output;
  const test::CommandResult no_tgt = test::run_cmha("score " + ckpt + " --src " + dir + "/valid.en");
  EXPECT_EQ(no_tgt.code, 2);
  EXPECT_TRUE(has(no_tgt.output, "needs both --src FILE and --tgt FILE")) << no_tgt.output;
  fs::remove_all(dir);
}
