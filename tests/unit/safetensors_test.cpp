#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/check.h"
#include "support/files.h"
#include "tensor/safetensors.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {
using cmha::test::write_raw_safetensors;

void expect_error_containing(const std::string& path, const std::string& needle) {
  try {
    load_safetensors(path);
    ADD_FAILURE() << "expected an error for " << path;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "error must name the file: " << e.what();
  }
}
}  // namespace

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  const std::string dir = cmha::test::temp_dir("st_roundtrip");
  std::map<std::string, Tensor> ts{
      {"a.weight", cmha::test::random_tensor({3, 5}, 1)},
      {"b", Tensor::arange(6, DType::i64).reshape({2, 3})},
      {"c", Tensor::arange(4, DType::i32)},
      {"d", cmha::test::random_tensor({7}, 2).to(DType::bf16)},
      {"e", cmha::test::random_tensor({2, 2}, 3).to(DType::f16)},
      {"f", Tensor::from_vector({0, 1, 0}, {3}).to(DType::b8)},
      {"scalar", Tensor::scalar(4.5f)},
      {"strided", cmha::test::random_tensor({4, 3}, 4).transpose(0, 1)},
  };
  save_safetensors(dir + "/x.safetensors", ts, {{"recipe", "model: {d: 4}"}});
  SafetensorsFile f = load_safetensors(dir + "/x.safetensors");
  ASSERT_EQ(f.tensors.size(), ts.size());
  for (auto& [k, t] : ts) {
    ASSERT_TRUE(f.tensors.count(k)) << k;
    EXPECT_EQ(f.tensors[k].dtype(), t.dtype()) << k;
    EXPECT_TRUE(cmha::test::all_close(f.tensors[k], t, 0, 0)) << k;
  }
  EXPECT_EQ(f.metadata.at("recipe"), "model: {d: 4}");
  for (auto& entry : fs::directory_iterator(dir))  // no temporary left behind
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  fs::remove_all(dir);
}

TEST(Safetensors, ReadsPyTorchWrittenFiles) {
  SafetensorsFile f = cmha::test::load_fixture("linear_bias");
  EXPECT_EQ(f.tensors.at("in.w").shape(), (Shape{6, 8}));
}

TEST(Safetensors, EveryDefectIsOneClearError) {
  const std::string dir = cmha::test::temp_dir("st_errors");
  expect_error_containing(dir + "/missing.safetensors", "cannot open");
  {
    std::string p = dir + "/short.safetensors";
    std::ofstream(p) << "abc";
    expect_error_containing(p, "truncated");
  }
  expect_error_containing(write_raw_safetensors(dir + "/hdr.safetensors", "{}", "", 1000), "truncated");
  expect_error_containing(write_raw_safetensors(dir + "/json.safetensors", "{\"a\": [", ""), "corrupt JSON");
  expect_error_containing(
      write_raw_safetensors(dir + "/dtype.safetensors", R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", "12345678"),
      "unsupported dtype");
  expect_error_containing(
      write_raw_safetensors(dir + "/size.safetensors", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "12345678"),
      "needs 12");
  expect_error_containing(
      write_raw_safetensors(dir + "/past.safetensors", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "12345678"),
      "past the end");
  expect_error_containing(write_raw_safetensors(dir + "/shape.safetensors", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", ""),
                          "bad shape");
  expect_error_containing(write_raw_safetensors(dir + "/fields.safetensors", R"({"a":{"dtype":"F32"}})", ""), "tensor 'a'");
  fs::remove_all(dir);
}

TEST(Safetensors, FailedWriteKeepsThePreviousFile) {
  const std::string dir = cmha::test::temp_dir("st_atomic");
  const std::string path = dir + "/ckpt.safetensors";
  save_safetensors(path, {{"w", Tensor::ones({2})}});
  // An undefined tensor makes the write fail midway: the old file must survive.
  EXPECT_THROW(save_safetensors(path, {{"a", Tensor::zeros({2})}, {"b", Tensor()}}), Error);
  EXPECT_EQ(load_safetensors(path).tensors.at("w").to_float_vector(), (std::vector<float>{1, 1}));
  fs::remove_all(dir);
}
