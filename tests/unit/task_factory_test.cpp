// The task factory (train/task_factory.h) is the one place that switches on
// model.kind: every kind the recipe registry offers has its row, and a recipe
// pairing a model with a task that cannot train it is refused naming both.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "run/options.h"
#include "run/recipe.h"
#include "support/check.h"
#include "tensor/rng.h"
#include "train/task_factory.h"

using namespace cmha;

namespace {

TEST(TaskFactory, EveryRegisteredModelKindHasARow) {
  const run::OptionSpec* kind = run::find_option("model.kind");
  ASSERT_NE(kind, nullptr);
  ASSERT_EQ(kind->choices.size(), train::model_kinds().size());
  for (const std::string& name : kind->choices) {
    const train::ModelKind& row = train::model_kind(name);
    EXPECT_EQ(row.name, name);
    EXPECT_NE(row.make_task, nullptr) << name;
    EXPECT_NE(row.make_bench, nullptr) << name;
    // The task the row names is one train.task offers.
    const run::OptionSpec* task = run::find_option("train.task");
    ASSERT_NE(task, nullptr);
    EXPECT_NE(std::find(task->choices.begin(), task->choices.end(), std::string(row.task)), task->choices.end());
  }
}

TEST(TaskFactory, AModelWithATaskThatCannotTrainItIsRefusedNamingBoth) {
  const run::Recipe r = run::Recipe::parse("model:\n  kind: vit\ntrain:\n  task: translation\n");
  Generator gen(1);
  const std::string e = test::error_of([&] { train::make_task(r, gen, 0, 1); });
  EXPECT_EQ(e, "train.task translation does not train model.kind vit (model.kind vit is trained by train.task "
               "image_classification)");
  EXPECT_EQ(test::error_of([&] { train::model_kind("rnn"); }),
            "model.kind 'rnn' is not a model cmha builds (transformer, vit)");
}

}  // namespace
