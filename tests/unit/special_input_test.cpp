// Issue 19, item 7: inputs that used to hang or be taken silently. A FIFO
// (or another non-regular file) where a file is read is refused with one
// sentence instead of blocking forever; a signal that arrives while nothing
// watches for it ends the command at once; a key written twice in one recipe
// file is an error naming both lines; an image is decoded only below a pixel
// cap.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "data/idx.h"
#include "data/image.h"
#include "data/image_dataset.h"
#include "data/text_corpus.h"
#include "run/recipe.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "tensor/safetensors.h"
#include "support/source_paths.h"

using namespace cmha;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;

// Runs `read` in a child process, which would block forever on a FIFO
// nobody writes: passes when it throws a cmha::Error containing `expected`
// within 20 s (a hang is killed and fails, not hangs the suite).
::testing::AssertionResult refused_in_time(const std::function<void()>& read, const std::string& expected) {
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 3;  // no error
    try {
      read();
    } catch (const Error& e) {
      code = has(e.what(), expected) ? 0 : 4;
      if (code) std::fprintf(stderr, "unexpected error: %s\n", e.what());
    } catch (...) {
      code = 5;
    }
    _exit(code);
  }
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) && WEXITSTATUS(status) == 0
                 ? ::testing::AssertionSuccess()
                 : ::testing::AssertionFailure() << "the child ended with status " << status << " (3: no error, 4: "
                                                 << "another message)";
    usleep(100000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return ::testing::AssertionFailure() << "still blocked after 20 s (killed)";
}

std::string make_fifo(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  EXPECT_EQ(mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  return path;
}

}  // namespace

TEST(SpecialInput, AFifoIsRefusedWhereverAFileIsRead) {
  const std::string dir = test::temp_dir("special_fifo");
  const std::string fifo = make_fifo(dir, "pipe");
  const std::string kind = "'" + fifo + "' is a FIFO (named pipe), not a regular file";
  EXPECT_TRUE(refused_in_time([&] { data::read_text_lines(fifo); }, "corpus file " + kind));
  EXPECT_TRUE(refused_in_time([&] { load_safetensors(fifo); }, "safetensors file " + kind));
  EXPECT_TRUE(refused_in_time([&] { data::read_idx_u8(fifo, 3); }, "IDX file " + kind));
  EXPECT_TRUE(refused_in_time([&] { data::read_image_file(fifo, data::ColorMode::rgb); }, "image file " + kind));
  EXPECT_TRUE(refused_in_time([&] { run::Recipe::load(fifo); }, fifo));
  fs::remove_all(dir);
}

TEST(SpecialInput, TranslateRefusesAFifoAsItsInputFile) {
  const std::string dir = test::temp_dir("special_translate");
  const std::string fifo = make_fifo(dir, "in");
  // The input file is read before the checkpoint is loaded. A watchdog kills a hang after 20 s (exit 137).
  const std::string script = "cd " + dir + "; " + CMHA_BINARY_DIR + "/cmha translate none.safetensors --input " +
                             fifo + " > log 2>&1 & p=$!; (sleep 20; kill -KILL $p) > /dev/null 2>&1 & w=$!; "
                             "wait $p; echo $? > rc; kill $w 2>/dev/null; exit 0";
  ASSERT_EQ(std::system(script.c_str()), 0);
  EXPECT_EQ(test::read_file(dir + "/rc"), "2\n") << test::read_file(dir + "/log");
  EXPECT_EQ(test::read_file(dir + "/log"), "cmha: input file '" + fifo +
                                               "' is a FIFO (named pipe), not a regular file (cmha reads only regular "
                                               "files)\n");
  fs::remove_all(dir);
}

// Reading standard input that never ends, nothing polls the stop flag yet:
// the first SIGTERM must end the command (it used to be swallowed).
TEST(SpecialInput, TheFirstSigtermEndsACommandThatIsNotWatchingForIt) {
  const std::string dir = test::temp_dir("special_sigterm");
  test::write_file(dir + "/ref.txt", "a b c\n");
  make_fifo(dir, "stdin");
  // Standard input: a FIFO opened read-write, which never blocks the open and never ends the reads.
  const std::string script = "cd " + dir + "; " + CMHA_BINARY_DIR + "/cmha bleu ref.txt <> stdin > log 2>&1 & "
                             "p=$!; sleep 1; kill -TERM $p; "
                             "for i in $(seq 50); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; "
                             "if kill -0 $p 2>/dev/null; then kill -KILL $p; echo hung > rc; else echo ended > rc; fi; "
                             "wait $p; echo $? >> rc; exit 0";
  ASSERT_EQ(std::system(script.c_str()), 0);
  EXPECT_EQ(test::read_file(dir + "/rc"), "ended\n130\n") << test::read_file(dir + "/log");
  EXPECT_EQ(test::read_file(dir + "/log"), "cmha: interrupted\n");
  fs::remove_all(dir);
}

TEST(SpecialInput, ADuplicateRecipeKeyNamesBothLines) {
  const std::string text = "train:\n  max_updates: 5\n  seed: 1\n  max_updates: 6\n";
  std::string message = test::error_of([&] { run::Recipe::parse(text, "r.yaml"); });
  EXPECT_EQ(message, "r.yaml:4: the key 'train.max_updates' is set a second time (first at line 2); "
                     "YAML keeps only one of them: remove the other");
  // The same key path spelt two ways in one file.
  message = test::error_of([&] { run::Recipe::parse("train.seed: 1\ntrain: {seed: 2}\n", "r.yaml"); });
  EXPECT_TRUE(has(message, "r.yaml:2: the key 'train.seed' is set a second time (first at line 1)")) << message;
  // In a file too, and a later file (an include, an override) still overrides an earlier one.
  const std::string dir = test::temp_dir("special_duplicate");
  test::write_file(dir + "/base.yaml", "train: {seed: 1}\n");
  test::write_file(dir + "/run.yaml", "include: base.yaml\ntrain: {seed: 2}\n");
  EXPECT_EQ(run::Recipe::load(dir + "/run.yaml", {"train.seed=3"}).integer("train.seed"), 3);
  test::write_file(dir + "/twice.yaml", "model:\n  depth: 2\nmodel:\n  depth: 3\n");
  message = test::error_of([&] { run::Recipe::load(dir + "/twice.yaml"); });
  EXPECT_TRUE(has(message, dir + "/twice.yaml:4: the key 'model.depth' is set a second time (first at line 2)"))
      << message;
  fs::remove_all(dir);
}

namespace {
// A PNG whose header declares width × height (its pixel data is a stub): the
// cap must act on the header, before anything of that size is allocated.
std::vector<uint8_t> png_declaring(uint32_t width, uint32_t height) {
  std::vector<uint8_t> png = data::encode_png(data::Image(2, 2, 3, 7));
  // IHDR: 8-byte signature, 4-byte length, "IHDR", width, height, ..., CRC over type + data.
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) png[at + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
  };
  put32(16, width);
  put32(20, height);
  put32(29, static_cast<uint32_t>(crc32(0, png.data() + 12, 17)));
  return png;
}
}  // namespace

TEST(SpecialInput, ImagesAboveThePixelCapAreRefusedNamingTheFile) {
  const std::vector<uint8_t> huge = png_declaring(30000, 30000);
  std::string message = test::error_of([&] { data::decode_image(huge.data(), huge.size(), data::ColorMode::rgb, "big.png"); });
  EXPECT_EQ(message, "big.png: the image is 30000 × 30000 pixels, more than the 89478485 allowed (data.max_image_pixels)");
  // The cap is configurable, for JPEG too; at the cap an image decodes.
  const data::Image im(10, 12, 3, 100);
  const std::vector<uint8_t> jpg = data::encode_jpeg(im), png = data::encode_png(im);
  message = test::error_of([&] { data::decode_image(jpg.data(), jpg.size(), data::ColorMode::rgb, "a.jpg", 119); });
  EXPECT_EQ(message, "a.jpg: the image is 12 × 10 pixels, more than the 119 allowed (data.max_image_pixels)");
  EXPECT_EQ(data::decode_image(png.data(), png.size(), data::ColorMode::rgb, "a.png", 120).width, 12);
  // An image folder passes its cap to every image it loads.
  const std::string dir = test::temp_dir("special_pixels");
  fs::create_directories(dir + "/cat");
  data::write_file(dir + "/cat/a.png", png);
  const data::ImageFolderDataset folder(dir, data::ColorMode::rgb, 0, 100);
  message = test::error_of([&] { folder.load(0); });
  EXPECT_TRUE(has(message, dir + "/cat/a.png: the image is 12 × 10 pixels")) << message;
  fs::remove_all(dir);
}
