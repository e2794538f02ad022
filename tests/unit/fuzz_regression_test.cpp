// Regression tests for the defects the fuzz targets (tests/fuzz) found in the
// readers of untrusted input; each crashing input is also in the target's
// seed corpus. Every one must now be a single cmha::Error sentence.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "data/idx.h"
#include "data/image.h"
#include "data/token_cache.h"
#include "run/recipe.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;

void put_u64(std::string& bytes, size_t at, uint64_t v) { std::memcpy(bytes.data() + at, &v, 8); }

}  // namespace

// fuzz_token_cache: offsets that go down made a sentence of 2^64 - 3 ids read
// outside the mapped file (tests/fuzz/token_cache/crash_offsets_out_of_order.bin).
TEST(FuzzRegression, TokenCacheWithOffsetsOutOfOrderIsRefused) {
  const std::string dir = test::temp_dir("fuzz_token_cache");
  data::TokenCache::write(dir + "/c.bin", 7, {{5, 6, 7}, {}, {8, 9}});
  std::string bytes = test::read_file(dir + "/c.bin");
  put_u64(bytes, 64 + 2 * 8, 0xF100000000000003ull);  // offsets[2]: was 3
  test::write_file(dir + "/c.bin", bytes);
  const std::string msg = test::error_of([&] { data::TokenCache c(dir + "/c.bin"); });
  EXPECT_TRUE(has(msg, "token cache '" + dir + "/c.bin' is corrupt: its offsets do not cover its ids in order"))
      << msg;
  fs::remove_all(dir);
}

// A sentence count whose byte size wraps around 2^64 to the file's size.
TEST(FuzzRegression, TokenCacheWhoseCountsOverflowIsRefused) {
  const std::string dir = test::temp_dir("fuzz_token_cache");
  data::TokenCache::write(dir + "/c.bin", 7, {{5}});  // 64 + 2 * 8 + 4 bytes
  std::string bytes = test::read_file(dir + "/c.bin");
  put_u64(bytes, 24, (uint64_t{1} << 61) + 1);  // count: (count + 1) * 8 = 16 (mod 2^64)
  test::write_file(dir + "/c.bin", bytes);
  const std::string msg = test::error_of([&] { data::TokenCache c(dir + "/c.bin"); });
  EXPECT_TRUE(has(msg, "is truncated or corrupt")) << msg;
  fs::remove_all(dir);
}

// fuzz_idx: a 37-byte file whose header promises 2 × 4 × 2005440938 bytes made
// the reader allocate 16 GB before reading any data
// (tests/fuzz/idx/oom_header_promises_more_than_follows.idx).
TEST(FuzzRegression, IdxHeaderPromisingGigabytesIsTruncatedNotAllocated) {
  const std::string dir = test::temp_dir("fuzz_idx");
  const std::string path = dir + "/big.idx";
  std::string bytes = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 4, 0x77, char(0x88), char(0x99), char(0xaa)};
  bytes += std::string(21, 'x');
  test::write_file(path, bytes);
  const std::string msg = test::error_of([&] { data::read_idx_images(path); });
  EXPECT_TRUE(has(msg, "IDX file '" + path + "' is truncated: its header [2, 4, 2005440938] promises "
                       "16043527504 bytes of data but only 21 follow"))
      << msg;
  fs::remove_all(dir);
}

// fuzz_idx (long run): images [0, 2^32-1, 2^32-1] hold no byte, but their
// strides multiplied past 2^63 (UBSan: signed overflow in contiguous_strides).
TEST(FuzzRegression, EmptyIdxWithHugeOtherSizesIsAnEmptyTensor) {
  const std::string dir = test::temp_dir("fuzz_idx_empty");
  const std::string path = dir + "/empty.idx";
  const char header[] = {0, 0, 8, 3, 0, 0, 0, 0, char(0xff), char(0xff), char(0xff), char(0xff),
                         char(0xff), char(0xff), char(0xff), char(0xff)};
  test::write_file(path, std::string(header, sizeof header));
  const Tensor t = data::read_idx_images(path);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.shape(), (Shape{0, 4294967295, 4294967295}));
  // A non-empty shape past 2^63 elements is an error naming it, never a wrapped count.
  EXPECT_TRUE(has(test::error_of([] { shape_numel({4294967296, 4294967296, 2}); }),
                  "the shape [4294967296, 4294967296, 2] has more than 2^63 elements"));
  fs::remove_all(dir);
}

// fuzz_recipe: an alias makes a mapping contain itself; the duplicate-key walk
// and absorb followed it until the stack overflowed
// (tests/fuzz/recipe/crash_alias_cycle.yaml).
TEST(FuzzRegression, RecipeMappingThatContainsItselfIsAnUnknownKey) {
  const std::string msg = test::error_of([] { run::Recipe::parse("model: &x\n  attention: *x\n", "r.yaml"); });
  EXPECT_TRUE(has(msg, "r.yaml:2: unknown key 'model.attention.attention'")) << msg;
  EXPECT_TRUE(has(test::error_of([] { run::Recipe::parse("model: {foo: {bar: 1}}", "r.yaml"); }),
                  "r.yaml:1: unknown key 'model.foo'"));
  // The same for a list that holds itself, where the error message dumped the value.
  EXPECT_EQ(test::error_of([] { run::Recipe::parse("optim:\n  betas: &b [1, *b]\n", "r.yaml"); }),
            "r.yaml:2: optim.betas expects a list of numbers, got a list or mapping inside it");
}

// fuzz_image: a 109-byte JPEG declaring 65437 × 833 CMYK pixels decoded to 54 M
// grey pixels (libjpeg fills what is missing) and timed out
// (tests/fuzz/image/timeout_truncated_54_megapixels.jpg). A JPEG that ends
// before its image is now corrupt, as Pillow says "image file is truncated".
TEST(FuzzRegression, TruncatedJpegIsCorruptNotFilledWithGrey) {
  data::Image im(32, 48, 3);
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>(i * 7);
  const std::vector<uint8_t> jpg = data::encode_jpeg(im);
  EXPECT_NO_THROW(data::decode_image(jpg.data(), jpg.size(), data::ColorMode::rgb, "whole.jpg"));
  const std::vector<uint8_t> cut(jpg.begin(), jpg.begin() + static_cast<std::ptrdiff_t>(jpg.size() * 3 / 4));
  EXPECT_EQ(test::error_of([&] { data::decode_image(cut.data(), cut.size(), data::ColorMode::rgb, "cut.jpg"); }),
            "cut.jpg: corrupt JPEG image (Premature end of JPEG file)");
}
