// metrics.jsonl (run/metrics_log.h): every row carries its time, units and
// the metric names the rest of cmha uses; train and validation rows share one
// epoch numbering; --resume rewinds the file to the checkpoint, so no update
// is logged twice and no earlier row is lost.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "nn/layers.h"
#include "run/checkpoint.h"
#include "run/metrics_log.h"
#include "support/check.h"
#include "support/files.h"
#include "support/regression_task.h"
#include "train/trainer.h"

using namespace cmha;
using namespace cmha::train;
using namespace cmha::run;
namespace fs = std::filesystem;
using test::RegressionTask;

namespace {

// 5 epochs of 4 updates, a train row every update, validation at updates 6, 12, 18 and every epoch's end.
Recipe recipe(const std::string& dir, int epochs = 5) {
  return Recipe::parse("optim: {name: adam, lr: 0.05}\nlr: {schedule: constant, warmup: 0}\n"
                       "train: {save_dir: " + dir + ", max_epochs: " + std::to_string(epochs) +
                           ", log_every: 1, validate_every: 6, save_every: 1, keep_last: 0, best_metric: top1, "
                           "best_mode: max}\n",
                       "<recipe>");
}

std::vector<nlohmann::json> rows_of(const std::string& path) {
  std::vector<nlohmann::json> rows;
  for (const std::string& line : test::read_lines(path)) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

// (split, update) of every row, in order.
std::vector<std::pair<std::string, int64_t>> keys_of(const std::vector<nlohmann::json>& rows) {
  std::vector<std::pair<std::string, int64_t>> keys;
  for (const auto& r : rows) keys.emplace_back(r.at("split").get<std::string>(), r.at("update").get<int64_t>());
  return keys;
}

}  // namespace

TEST(MetricsLog, TimestampsAreIso8601Utc) {
  EXPECT_EQ(iso8601_utc(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(iso8601_utc(1714566896.789), "2024-05-01T12:34:56.789Z");
  EXPECT_EQ(iso8601_utc(1714566896.9996), "2024-05-01T12:34:57.000Z");
}

TEST(MetricsLog, RowsCarryTimeUnitsAndOneEpochNumbering) {
  const std::string dir = test::temp_dir("metrics_rows");
  fs::remove_all(dir);
  RegressionTask task;
  distributed::SingleCommunicator comm;
  const TrainSummary s = Trainer(recipe(dir), task, comm).run();
  const std::vector<nlohmann::json> rows = rows_of(dir + "/metrics.jsonl");
  ASSERT_EQ(rows.size(), 20u + 3u + 5u);  // 20 train rows, validation at 6, 12, 18 and 5 epoch ends
  double previous_time = 0;
  for (const auto& r : rows) {
    for (const char* key : {"split", "update", "epoch", "time", "unix_time", "loss", "loss_bits", "loss_unit", "top1"})
      EXPECT_TRUE(r.contains(key)) << key << " in " << r.dump();
    EXPECT_FALSE(r.contains("accuracy") || r.contains("units_per_s")) << r.dump();
    EXPECT_EQ(r.at("loss_unit"), "nats");
    EXPECT_NEAR(r.at("loss_bits").get<double>(), r.at("loss").get<double>() / std::log(2.0), 1e-12);
    const std::string time = r.at("time");
    EXPECT_EQ(time.size(), 24u) << time;
    EXPECT_EQ(time.back(), 'Z');
    EXPECT_EQ(iso8601_utc(r.at("unix_time").get<double>()), time);
    EXPECT_GE(r.at("unix_time").get<double>(), previous_time);
    previous_time = r.at("unix_time").get<double>();
    // One numbering: updates 1-4 are epoch 1, 5-8 epoch 2, ...; an epoch's closing validation is that epoch.
    const int64_t update = r.at("update"), epoch = r.at("epoch");
    EXPECT_EQ(epoch, (update - 1) / 4 + 1) << r.dump();
    if (r.at("split") == "train") {
      EXPECT_TRUE(r.contains("samples_per_s") && !r.contains("tokens_per_s")) << r.dump();
      EXPECT_GT(r.at("samples_per_s").get<double>(), 0);
    }
  }
  EXPECT_EQ(rows.back().at("split"), "valid");
  EXPECT_EQ(rows.back().at("epoch"), 5);
  EXPECT_EQ(s.unit, "samples");
  EXPECT_GT(s.units_per_s, 0);
  EXPECT_EQ(s.best_metric, "top1");
  EXPECT_DOUBLE_EQ(s.best, 50.0);
  const std::vector<std::string> summary = summary_fields(s);
  EXPECT_EQ(summary.at(0).rfind("cmha train: 20 updates in ", 0), 0u) << summary.at(0);
  EXPECT_EQ(summary.at(1), "5 epochs");
  EXPECT_NE(std::find(summary.begin(), summary.end(), "best top1 50.00%"), summary.end());
  fs::remove_all(dir);
}

TEST(MetricsLog, ResumeFromAnOlderCheckpointRewindsTheRowsAfterIt) {
  const std::string dir = test::temp_dir("metrics_resume");
  fs::remove_all(dir);
  distributed::SingleCommunicator comm;
  {
    RegressionTask task;
    Trainer(recipe(dir), task, comm).run();
  }
  const std::vector<std::string> full = test::read_lines(dir + "/metrics.jsonl");
  const auto expected = keys_of(rows_of(dir + "/metrics.jsonl"));
  // The run died after update 14 had been logged, but its newest checkpoint is update 8's
  // (an epoch's end: its validation row was logged before the save).
  for (int u = 9; u <= 20; ++u) fs::remove(dir + "/checkpoint_" + std::to_string(u) + ".safetensors");
  {
    RegressionTask task;
    Trainer(recipe(dir), task, comm, TrainerHooks{nullptr, true}).run();
  }
  const std::vector<std::string> resumed = test::read_lines(dir + "/metrics.jsonl");
  EXPECT_EQ(keys_of(rows_of(dir + "/metrics.jsonl")), expected);  // every update once, in order
  // The rows up to the checkpoint are the first run's, byte for byte.
  size_t kept = 0;
  while (kept < full.size() && nlohmann::json::parse(full[kept]).at("update").get<int64_t>() <= 8) ++kept;
  ASSERT_EQ(kept, 8u + 1u + 2u);  // 8 train rows, validation at 6, epoch ends 4 and 8
  for (size_t i = 0; i < kept; ++i) EXPECT_EQ(resumed.at(i), full[i]) << i;
  EXPECT_NE(resumed.at(kept), full[kept]);  // the redone update 9 is a new row (its own time)
  EXPECT_FALSE(fs::exists(dir + "/metrics.jsonl.tmp." + std::to_string(::getpid())));
  fs::remove_all(dir);
}

TEST(MetricsLog, ACheckpointWithoutARowCountRewindsByUpdate) {
  const std::string dir = test::temp_dir("metrics_resume_old");
  fs::remove_all(dir);
  distributed::SingleCommunicator comm;
  {
    RegressionTask task;
    Trainer(recipe(dir), task, comm).run();
  }
  const auto expected = keys_of(rows_of(dir + "/metrics.jsonl"));
  for (int u = 11; u <= 20; ++u) fs::remove(dir + "/checkpoint_" + std::to_string(u) + ".safetensors");
  // A checkpoint written before "metrics_rows" existed.
  Checkpoint c = load_checkpoint(dir + "/checkpoint_10.safetensors");
  ASSERT_TRUE(c.trainer.contains("metrics_rows"));
  c.trainer.erase("metrics_rows");
  save_checkpoint(dir + "/checkpoint_10.safetensors", c);
  {
    RegressionTask task;
    Trainer(recipe(dir), task, comm, TrainerHooks{nullptr, true}).run();
  }
  EXPECT_EQ(keys_of(rows_of(dir + "/metrics.jsonl")), expected);
  fs::remove_all(dir);
}

TEST(MetricsLog, AResumeWithoutACheckpointStartsTheRowsAfresh) {
  const std::string dir = test::temp_dir("metrics_resume_none");
  fs::remove_all(dir);
  fs::create_directories(dir);
  test::write_file(dir + "/metrics.jsonl", R"({"split":"train","update":1,"epoch":1,"loss":9.0})" "\n");
  distributed::SingleCommunicator comm;
  RegressionTask task;
  Trainer(recipe(dir, 1), task, comm, TrainerHooks{nullptr, true}).run();
  const auto rows = rows_of(dir + "/metrics.jsonl");
  ASSERT_EQ(rows.size(), 4u + 1u);
  EXPECT_TRUE(rows[0].contains("time"));  // the stale row of update 1 is gone
  fs::remove_all(dir);
}

TEST(MetricsLog, LinesToKeep) {
  const std::string text =
      R"({"split":"train","update":1})" "\n"
      R"({"split":"train","update":2})" "\n"
      R"({"split":"valid","update":2})" "\n"
      "not json\n"
      R"({"split":"train","update":3})" "\n"
      R"({"split":"train","update":4})" "\n"
      // an earlier resume from update 2 that kept the rows after it (before this fix):
      R"({"split":"train","update":3,"again":true})" "\n"
      R"({"split":"train","update":4,"again":true})" "\n"
      R"({"split":"valid","update":4,"again":true})" "\n"
      R"({"split":"train","upd)";  // torn by a kill
  const auto lines = metrics_lines_to_keep(text, 3, 0);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2], R"({"split":"valid","update":2})");
  EXPECT_EQ(metrics_lines_to_keep(text, 100, 0).size(), 9u);  // the torn line never
  EXPECT_TRUE(metrics_lines_to_keep(text, 0, 0).empty());
  // No row count: rows up to update 4, the second copy of updates 3 and 4 winning.
  const auto by_update = metrics_lines_to_keep(text, -1, 4);
  ASSERT_EQ(by_update.size(), 7u);
  EXPECT_EQ(by_update[3], "not json");
  EXPECT_EQ(by_update[4], R"({"split":"train","update":3,"again":true})");
  EXPECT_EQ(by_update[6], R"({"split":"valid","update":4,"again":true})");
  const auto up_to_2 = metrics_lines_to_keep(text, -1, 2);
  ASSERT_EQ(up_to_2.size(), 4u);  // rows of updates 1, 2 and the line that is not JSON
  // Two validations of one update (mid-epoch, then the epoch's end) are both kept.
  const std::string two = R"({"split":"train","update":4})" "\n" R"({"split":"valid","update":4})" "\n"
                          R"({"split":"valid","update":4})" "\n";
  EXPECT_EQ(metrics_lines_to_keep(two, -1, 4).size(), 3u);
}

TEST(MetricsLog, TheOldAccuracyNameIsAnErrorThatNamesTheNewOne) {
  const std::string dir = test::temp_dir("metrics_old_name");
  fs::remove_all(dir);
  distributed::SingleCommunicator comm;
  RegressionTask task;
  const std::string message = test::error_of([&] {
    Trainer(Recipe::parse("optim: {name: adam, lr: 0.05}\nlr: {schedule: constant, warmup: 0}\n"
                          "train: {save_dir: " + dir + ", max_epochs: 1, best_metric: accuracy, best_mode: max}\n",
                          "<recipe>"),
            task, comm)
        .run();
  });
  EXPECT_EQ(message, "train.best_metric 'accuracy' is not a validation metric of this task (it has loss, top1; "
                     "accuracy is now named top1)");
  fs::remove_all(dir);
}
