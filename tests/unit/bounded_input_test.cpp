// Issue 19, item 1: one absurdly long input line must not take unbounded
// memory. `cmha translate` cuts a line longer than the source limit
// (eval.max_source_tokens / --max-source-tokens) and says which; `cmha score`
// refuses it; the output length is bounded like the source, and a beam ×
// batch that would not fit is refused before anything is decoded.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "distributed/communicator.h"
#include "eval/translator.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "support/toy_translation.h"
#include "train/trainer.h"
#include "train/translation_task.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;

// A toy run trained for a few updates: <dir>/run/checkpoint_5.safetensors and spm.model.
// data.max_len is 40, so the automatic source limit is 160 pieces.
std::string trained_toy_run(const std::string& tag) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::string dir = test::toy_dir(tag);
  const run::Recipe r = test::toy_recipe(dir, {"train.max_updates=5"});
  Generator g(3);
  train::TranslationTask task(r, g);
  distributed::SingleCommunicator comm;
  train::Trainer(r, task, comm).run();
  omp_set_num_threads(threads);
  return dir;
}

// `words` toy words on one line (each a few SentencePiece pieces).
std::string long_line(int words) {
  std::ostringstream s;
  for (int i = 0; i < words; ++i) s << (i ? " " : "") << (i % 2 ? "house" : "green");
  return s.str();
}

}  // namespace

TEST(BoundedInput, TranslateCutsALongLineNamingItAndKeepsTheLines) {
  const std::string dir = trained_toy_run("bounded_translate");
  const std::string ckpt = dir + "/run/checkpoint_5.safetensors";
  test::write_file(dir + "/in.txt", "the house\n" + long_line(3000) + "\na tree\n");
  const test::CommandResult r =
      test::run_cmha("translate " + ckpt + " --threads 1 --beam 2 --input " + dir + "/in.txt --output " + dir + "/out.txt");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "translate: '" + dir + "/in.txt' line 2 has ")) << r.output;
  EXPECT_TRUE(has(r.output, "more than the limit of 160 (--max-source-tokens, eval.max_source_tokens)")) << r.output;
  EXPECT_FALSE(has(r.output, "line 1 ")) << r.output;
  EXPECT_EQ(test::read_lines(dir + "/out.txt").size(), 3u);
  // The option overrides the recipe's limit.
  const test::CommandResult small = test::run_cmha("translate " + ckpt + " --threads 1 --max-source-tokens 2 --input " +
                                                   dir + "/in.txt --output " + dir + "/out.txt");
  ASSERT_EQ(small.code, 0) << small.output;
  EXPECT_TRUE(has(small.output, "line 1 has ")) << small.output;
  EXPECT_TRUE(has(small.output, "more than the limit of 2 ")) << small.output;
  fs::remove_all(dir);
}

TEST(BoundedInput, TranslatorBoundsTheOutputLikeTheSource) {
  const std::string dir = trained_toy_run("bounded_output");
  eval::TranslatorOptions o;
  o.search.max_len_a = 1000;  // would allow 1000 × the source length
  o.max_source_tokens = 12;
  eval::Translator t(dir + "/run/checkpoint_5.safetensors", o);
  EXPECT_EQ(t.max_source_tokens(), 12);
  EXPECT_EQ(t.search_options().max_len_cap, 12);
  const std::vector<eval::Hypothesis> hyps = t.translate_ids({t.encode(long_line(2))});
  ASSERT_EQ(hyps.size(), 1u);
  EXPECT_LE(hyps[0].tokens.size(), 12u);
  // The recipe's value when the option is 0: 4 × data.max_len.
  eval::Translator automatic(dir + "/run/checkpoint_5.safetensors");
  EXPECT_EQ(automatic.max_source_tokens(), 160);
  fs::remove_all(dir);
}

TEST(BoundedInput, SourceLimitFollowsTheRecipeAndLearnedPositions) {
  const std::string dir = test::temp_dir("bounded_limit");
  EXPECT_EQ(eval::source_token_limit(test::toy_recipe(dir)), 160);
  EXPECT_EQ(eval::source_token_limit(test::toy_recipe(dir, {"eval.max_source_tokens=77"})), 77);
  EXPECT_EQ(eval::source_token_limit(
                test::toy_recipe(dir, {"model.positions=learned", "model.max_positions=100"})),
            100);
  fs::remove_all(dir);
}

TEST(BoundedInput, ScoreRefusesALongLineNamingTheFileAndLine) {
  const std::string dir = trained_toy_run("bounded_score");
  test::write_file(dir + "/src.txt", "the house\n" + long_line(3000) + "\n");
  test::write_file(dir + "/tgt.txt", "das haus\nein baum\n");
  const test::CommandResult r = test::run_cmha("score " + dir + "/run/checkpoint_5.safetensors --threads 1 --src " +
                                               dir + "/src.txt --tgt " + dir + "/tgt.txt");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "cmha: source file '" + dir + "/src.txt' line 2 has ")) << r.output;
  EXPECT_TRUE(has(r.output, "more than the limit of 160")) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
  fs::remove_all(dir);
}

TEST(BoundedInput, ABeamTooWideForTheBatchIsRefusedUpFront) {
  const std::string dir = trained_toy_run("bounded_beam");
  const test::CommandResult r = test::run_cmha("translate " + dir +
                                               "/run/checkpoint_5.safetensors --beam 1024 --max-tokens 4096 < /dev/null");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "decoder positions")) << r.output;
  EXPECT_TRUE(has(r.output, "--beam")) << r.output;
  EXPECT_NO_THROW(eval::check_decoding_budget(4, 4096, 1024));
  EXPECT_THROW(eval::check_decoding_budget(64, 1 << 20, 1024), Error);
  // The recipe's final-evaluation beam is checked when the task is built, not after training.
  Generator g(1);
  const std::string message = test::error_of(
      [&] { train::TranslationTask(test::toy_recipe(dir, {"eval.beam=1024", "eval.max_tokens=100000"}), g); });
  EXPECT_TRUE(has(message, "decoder positions")) << message;
  fs::remove_all(dir);
}
