// safetensors files made to hurt the reader: overlapping byte ranges, element
// counts that overflow, header lengths beyond any sane size, and paths that
// are not files at all. Each is one error naming the file; none allocates
// more than the file holds.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "tensor/safetensors.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

using cmha::test::write_raw_safetensors;

std::string load_error(const std::string& path) {
  return test::error_of([&] { load_safetensors(path); });
}
using cmha::test::has;

class SafetensorsHostile : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::temp_dir("st_hostile"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

}  // namespace

TEST_F(SafetensorsHostile, OverlappingByteRangesAreRefusedNamingBothTensors) {
  const std::string p = write_raw_safetensors(dir_ + "/overlap.safetensors",
                                  R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                  std::string(12, '\0'));
  const std::string e = load_error(p);
  EXPECT_TRUE(has(e, p) && has(e, "'a'") && has(e, "'b'") && has(e, "overlap")) << e;
}

TEST_F(SafetensorsHostile, TheSameRangeTwiceIsAnOverlap) {
  const std::string p = write_raw_safetensors(dir_ + "/alias.safetensors",
                                  R"({"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},)"
                                  R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
                                  std::string(4, '\0'));
  EXPECT_TRUE(has(load_error(p), "overlap")) << load_error(p);
}

TEST_F(SafetensorsHostile, AdjacentRangesAndEmptyTensorsAnywhereLoad) {
  const std::string p = write_raw_safetensors(dir_ + "/adjacent.safetensors",
                                  R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                  R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[2,2]},)"
                                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                  std::string(8, '\0'));
  const SafetensorsFile f = load_safetensors(p);
  EXPECT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors.at("e").numel(), 0);
}

TEST_F(SafetensorsHostile, AnElementCountThatOverflowsIsRefused) {
  // 2^62 × 4 elements: the product wraps to 0 in 64 bits, which matched the empty range.
  const std::string p = write_raw_safetensors(dir_ + "/huge.safetensors",
                                  R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", "");
  const std::string e = load_error(p);
  EXPECT_TRUE(has(e, p) && has(e, "tensor 'a'") && has(e, "too many elements")) << e;
  // 2^61 × 4 bytes of F32 overflows the byte count only.
  const std::string q = write_raw_safetensors(dir_ + "/bytes.safetensors",
                                  R"({"a":{"dtype":"F32","shape":[2305843009213693952,4],"data_offsets":[0,0]}})", "");
  EXPECT_TRUE(has(load_error(q), "too many elements")) << load_error(q);
}

TEST_F(SafetensorsHostile, AnEmptyTensorWithAHugeDimensionLoads) {
  const std::string p = write_raw_safetensors(dir_ + "/empty.safetensors",
                                  R"({"a":{"dtype":"F32","shape":[0,1152921504606846976],"data_offsets":[0,0]}})", "");
  EXPECT_EQ(load_safetensors(p).tensors.at("a").numel(), 0);
}

TEST_F(SafetensorsHostile, AHeaderLengthBeyondTheLimitIsRefusedBeforeItIsRead) {
  // A sparse 200 MB file whose header claims 150 MB: refused without reading it.
  const std::string p = write_raw_safetensors(dir_ + "/bighead.safetensors", "", "", 150'000'000);
  fs::resize_file(p, 200'000'000);
  const std::string e = load_error(p);
  EXPECT_TRUE(has(e, p) && has(e, "exceeds the limit")) << e;
  // One longer than the file: truncated, whatever the limit.
  const std::string q = write_raw_safetensors(dir_ + "/longhead.safetensors", "{}", "", 3);
  EXPECT_TRUE(has(load_error(q), "truncated")) << load_error(q);
}

TEST_F(SafetensorsHostile, ADirectoryIsNamedAsOne) {
  fs::create_directories(dir_ + "/ckpt.safetensors");
  EXPECT_EQ(load_error(dir_ + "/ckpt.safetensors"), "'" + dir_ + "/ckpt.safetensors' is a directory, not a safetensors file");
}

TEST_F(SafetensorsHostile, AFifoIsRefusedWithoutWaitingForAWriter) {
  const std::string p = dir_ + "/pipe.safetensors";
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  const std::string e = load_error(p);  // opening it would block forever
  EXPECT_TRUE(has(e, p) && has(e, "not a regular file")) << e;
}
