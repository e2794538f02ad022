// The IDX reader (MNIST / Fashion-MNIST files): round trips through gzip'd
// and plain files, and one clear error per defect.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "data/idx.h"
#include "support/check.h"

using namespace cmha;
using namespace cmha::test;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 37) % 256);
  return v;
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class Idx : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = temp_dir("idx"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

}  // namespace

TEST_F(Idx, ImagesAndLabelsRoundTripGzipAndPlain) {
  for (bool gzip : {true, false}) {
    const std::string images = path(gzip ? "img.gz" : "img"), labels = path(gzip ? "lab.gz" : "lab");
    data::write_idx_u8(images, {3, 2, 4}, ramp(24), gzip);
    data::write_idx_u8(labels, {3}, {7, 0, 9}, gzip);
    if (gzip) EXPECT_EQ(static_cast<unsigned char>(read_bytes(images)[0]), 0x1f);  // gzip magic
    else EXPECT_EQ(read_bytes(images).size(), 4u + 3 * 4 + 24);

    data::LabelledImages d = data::load_idx_split(images, labels);
    ASSERT_EQ(d.images.shape(), (Shape{3, 2, 4}));
    ASSERT_EQ(d.images.dtype(), DType::f32);
    std::vector<float> v = d.images.to_float_vector();
    std::vector<uint8_t> want = ramp(24);
    for (size_t i = 0; i < v.size(); ++i) EXPECT_FLOAT_EQ(v[i], want[i] / 255.0f) << i;
    EXPECT_EQ(d.labels.dtype(), DType::i64);
    EXPECT_EQ(d.labels.to_i64_vector(), (std::vector<int64_t>{7, 0, 9}));

    data::IdxBytes raw = data::read_idx_u8(images, 3);
    EXPECT_EQ(raw.dims, (std::vector<int64_t>{3, 2, 4}));
    EXPECT_EQ(raw.values, want);
  }
}

TEST_F(Idx, MissingFileIsAnErrorNamingIt) {
  expect_error([&] { data::read_idx_images(path("nope.gz")); }, {"nope.gz", "No such file"});
  expect_error([&] { data::read_idx_images(dir_); }, {dir_, "is a directory"});
}

TEST_F(Idx, BadMagicNumberIsAnError) {
  write_bytes(path("bad"), {'P', 'K', 3, 4, 0, 0, 0, 0});
  expect_error([&] { data::read_idx_labels(path("bad")); }, {path("bad"), "not an IDX file", "0x504b0304"});
}

TEST_F(Idx, WrongTypeCodeOrRankIsAnError) {
  write_bytes(path("floats"), {0, 0, 0x0d, 1, 0, 0, 0, 1, 0, 0, 0, 0});
  expect_error([&] { data::read_idx_labels(path("floats")); }, {path("floats"), "type code 0x0d", "0x08"});
  data::write_idx_u8(path("labels"), {2}, {1, 2}, false);
  expect_error([&] { data::read_idx_images(path("labels")); }, {path("labels"), "1 dimension(s) where 3"});
}

TEST_F(Idx, TruncatedFileIsAnError) {
  // Plain: data cut short; and a header cut short.
  data::write_idx_u8(path("short"), {4, 5, 5}, ramp(100), false);
  std::vector<char> bytes = read_bytes(path("short"));
  write_bytes(path("short"), std::vector<char>(bytes.begin(), bytes.end() - 10));
  expect_error([&] { data::read_idx_images(path("short")); }, {path("short"), "truncated", "100 bytes", "only 90"});
  write_bytes(path("header"), std::vector<char>(bytes.begin(), bytes.begin() + 9));
  expect_error([&] { data::read_idx_images(path("header")); }, {path("header"), "truncated"});
  // Gzip'd: the compressed stream cut in the middle.
  data::write_idx_u8(path("short.gz"), {50, 20, 20}, ramp(20000), true);
  bytes = read_bytes(path("short.gz"));
  write_bytes(path("short.gz"), std::vector<char>(bytes.begin(), bytes.begin() + bytes.size() / 2));
  expect_error([&] { data::read_idx_images(path("short.gz")); }, {path("short.gz"), "truncated"});
}

TEST_F(Idx, TrailingBytesAndCorruptGzipAreErrors) {
  data::write_idx_u8(path("long"), {2}, {1, 2}, false);
  std::vector<char> bytes = read_bytes(path("long"));
  bytes.push_back(3);
  write_bytes(path("long"), bytes);
  expect_error([&] { data::read_idx_labels(path("long")); }, {path("long"), "more data follows"});

  data::write_idx_u8(path("bits.gz"), {50, 20, 20}, ramp(20000), true);
  bytes = read_bytes(path("bits.gz"));
  for (size_t i = bytes.size() / 3; i < bytes.size() / 3 + 16; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  write_bytes(path("bits.gz"), bytes);
  expect_error([&] { data::read_idx_images(path("bits.gz")); }, {path("bits.gz")});
}

TEST_F(Idx, ImageAndLabelCountMismatchNamesBothFiles) {
  data::write_idx_u8(path("img.gz"), {3, 2, 2}, ramp(12), true);
  data::write_idx_u8(path("lab.gz"), {4}, {0, 1, 2, 3}, true);
  expect_error([&] { data::load_idx_split(path("img.gz"), path("lab.gz")); },
               {path("img.gz"), path("lab.gz"), "3 images", "4 labels"});
}

TEST_F(Idx, WriterRejectsSizesThatDoNotMatch) {
  EXPECT_THROW(data::write_idx_u8(path("x"), {2, 2}, ramp(3), false), Error);
}
