// TensorBoard event files: the bytes Google's protobuf writes for the same
// events (tests/reference/make_tensorboard_fixture.py), and a file written by
// TensorBoardWriter read back by an independent reader.
#include "run/tensorboard.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "support/check.h"
#include "support/files.h"
#include "support/tensorboard_reader.h"
#include "support/tiny_images.h"
#include "support/source_paths.h"

namespace cmha::train {

using namespace cmha::run;  // recipes, checkpoints, run directories
namespace {

namespace fs = std::filesystem;

TEST(TensorBoard, Crc32cOfTheStandardCheckString) {
  EXPECT_EQ(crc32c("123456789", 9), 0xe3069283u);  // the CRC-32C check value (RFC 3720)
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(TensorBoard, SameBytesAsProtobufForTheSameEvents) {
  const std::string golden = test::read_file(std::string(CMHA_SOURCE_DIR) + "/tests/data/tensorboard/events.golden");
  ASSERT_FALSE(golden.empty()) << "missing tests/data/tensorboard/events.golden";
  const std::string ours = tfrecord(file_version_event(1700000000.25)) +
                           tfrecord(scalars_event(1700000001.5, 0, {{"train/loss", 9.125f}})) +
                           tfrecord(scalars_event(1700000002.75, 42, {{"train/loss", 2.25f}, {"train/lr", 0.0005f}})) +
                           tfrecord(scalars_event(1700000003.0, 1000, {{"valid/bleu", 21.5f}, {"valid/loss", -1.0f}}));
  EXPECT_EQ(ours, golden);
}

TEST(TensorBoard, WrittenFileDecodesToTheSameScalars) {
  const fs::path dir = fs::temp_directory_path() / ("cmha_tb_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string path;
  {
    TensorBoardWriter w(dir.string());
    path = w.path();
    w.write(10, scalars_of_row({{"split", "train"}, {"update", 10}, {"epoch", 1}, {"loss", 4.5}, {"lr", 1e-4}}));
    w.write(20, scalars_of_row({{"split", "valid"}, {"update", 20}, {"epoch", 1}, {"bleu", 12.25}}));
    w.write(30, {});  // nothing to write: no record
  }
  EXPECT_NE(fs::path(path).filename().string().find("events.out.tfevents."), std::string::npos) << path;
  const std::string bytes = test::read_file(path);
  const test::TensorBoardFile f = test::read_tensorboard(bytes);
  EXPECT_EQ(f.file_version, "brain.Event:2");
  ASSERT_EQ(f.scalars.size(), 3u);
  EXPECT_EQ(f.scalars[0].tag, "train/loss");
  EXPECT_EQ(f.scalars[0].step, 10);
  EXPECT_FLOAT_EQ(f.scalars[0].value, 4.5f);
  EXPECT_EQ(f.scalars[1].tag, "train/lr");
  EXPECT_FLOAT_EQ(f.scalars[1].value, 1e-4f);
  EXPECT_EQ(f.scalars[2].tag, "valid/bleu");
  EXPECT_EQ(f.scalars[2].step, 20);
  EXPECT_FLOAT_EQ(f.scalars[2].value, 12.25f);
  EXPECT_GT(f.scalars[0].wall_time, 1.6e9);

  // The reader checks the framing: one flipped byte in the data is caught.
  std::string corrupt = bytes;
  corrupt[bytes.size() - 6] ^= 0x20;
  EXPECT_THROW(test::read_tensorboard(corrupt), std::runtime_error);
  EXPECT_THROW(test::read_tensorboard(bytes.substr(0, bytes.size() - 3)), std::runtime_error);
  fs::remove_all(dir);
}

TEST(TensorBoard, RowScalarsLeaveOutPositionAndStrings) {
  const Scalars s = scalars_of_row({{"split", "valid"}, {"update", 5}, {"epoch", 2}, {"top1", 0.75}, {"note", "x"}});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].first, "valid/top1");
  EXPECT_FLOAT_EQ(s[0].second, 0.75f);
}

// train.tensorboard: true writes every metrics.jsonl row's numbers as scalars at its update.
TEST(TensorBoard, TrainingRunWritesTheMetricsRows) {
  const std::string dir = test::temp_dir("tensorboard_run");
  fs::remove_all(dir + "/run");
  test::write_tiny_fashion_mnist(dir, 32, 16);
  const test::CommandResult r = test::run_cmha("train --threads 1 " + test::tiny_run(dir, dir + "/run") +
                                               " train.max_epochs=0 train.max_updates=4 lr.total=4 train.log_every=1"
                                               " train.tensorboard=true");
  ASSERT_EQ(r.code, 0) << r.output;
  std::string events;
  for (const auto& e : fs::directory_iterator(dir + "/run"))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) events = e.path().string();
  ASSERT_FALSE(events.empty()) << "no event file in " << dir << "/run";
  const test::TensorBoardFile f = test::read_tensorboard(test::read_file(events));
  std::vector<std::pair<int64_t, float>> tb_loss, jsonl_loss;
  for (const auto& s : f.scalars)
    if (s.tag == "train/loss") tb_loss.emplace_back(s.step, s.value);
  for (const std::string& line : test::read_lines(dir + "/run/metrics.jsonl")) {
    const auto row = nlohmann::json::parse(line);
    if (row.value("split", "") == "train") jsonl_loss.emplace_back(row["update"].get<int64_t>(), row["loss"].get<float>());
  }
  EXPECT_EQ(jsonl_loss.size(), 4u);
  EXPECT_EQ(tb_loss, jsonl_loss);
  bool has_valid = false;
  for (const auto& s : f.scalars) has_valid = has_valid || s.tag.rfind("valid/", 0) == 0;
  EXPECT_TRUE(has_valid) << "no validation scalars";
}

}  // namespace
}  // namespace cmha::train
