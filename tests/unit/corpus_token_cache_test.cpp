// Corpora that start without being read (data/corpus_token_cache.h): the
// streamed line reader and scan across block boundaries, a cache trusted while
// its corpus's size and mtime are unchanged, hashed again when they change
// (kept for the same bytes, rebuilt for others), a rank waiting for rank 0's
// build, and a truncated cache as one sentence and exit 2 from `cmha train`.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "data/corpus_token_cache.h"
#include "data/text_corpus.h"
#include "data/token_cache.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "support/toy_translation.h"
#include "train/translation_task.h"

using namespace cmha;
using test::error_of;
using test::write_file;
namespace fs = std::filesystem;

namespace {

using cmha::test::has;

// The toy corpus, its files dated an hour back: a cache built now can vouch for them by size and mtime.
std::string settled_toy_dir(const std::string& tag) {
  const std::string dir = test::toy_dir(tag);
  for (const char* f : {"train.en", "train.de", "valid.en", "valid.de"})
    fs::last_write_time(dir + "/" + f, fs::file_time_type::clock::now() - std::chrono::hours(1));
  return dir;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST(CorpusTokenCache, LinesAndScansAgreeAcrossReadBlocks) {
  // 3 MiB of lines of every length up to 700 bytes, CRLF and LF, so lines and "\r\n" straddle the 1 MiB blocks.
  const std::string dir = test::temp_dir("corpus_blocks");
  std::string text;
  std::vector<std::string> expected;
  for (int i = 0; text.size() < (size_t{3} << 20); ++i) {
    expected.push_back(std::string(static_cast<size_t>(i * 37 % 701), static_cast<char>('a' + i % 26)));
    text += expected.back() + (i % 3 == 0 ? "\r\n" : "\n");
  }
  text += "last line without a newline";
  expected.push_back("last line without a newline");
  write_file(dir + "/x.en", text);
  EXPECT_EQ(data::read_text_lines(dir + "/x.en"), expected);
  const data::CorpusFileScan scan = data::scan_corpus_file(dir + "/x.en");
  EXPECT_EQ(scan.lines, expected.size());
  EXPECT_EQ(scan.identity.bytes, text.size());
  EXPECT_EQ(scan.identity.mtime_ns, data::file_identity(dir + "/x.en").mtime_ns);
  // One byte in the third block moves the digest; the same bytes elsewhere give the same digest.
  write_file(dir + "/copy.en", text);
  EXPECT_EQ(data::scan_corpus_file(dir + "/copy.en").identity.digest, scan.identity.digest);
  text[(size_t{5} << 19) + 1] ^= 1;
  write_file(dir + "/x.en", text);
  EXPECT_NE(data::scan_corpus_file(dir + "/x.en").identity.digest, scan.identity.digest);
  // The line counts of "a\n" and "a" agree with read_text_lines; an empty file is an error naming it.
  write_file(dir + "/one.en", "a\n");
  EXPECT_EQ(data::scan_corpus_file(dir + "/one.en").lines, 1u);
  write_file(dir + "/empty.en", "");
  EXPECT_TRUE(has(error_of([&] { data::scan_corpus_file(dir + "/empty.en"); }),
                  "corpus file '" + dir + "/empty.en' is empty"));
  fs::remove_all(dir);
}

TEST(CorpusTokenCache, TrustsSizeAndMtimeAndHashesAgainOnlyWhenTheyChange) {
  const std::string dir = settled_toy_dir("identity");
  Generator g(1);
  std::vector<int32_t> ids0;
  {
    train::TranslationTask first(test::toy_recipe(dir), g);
    EXPECT_TRUE(first.encoded_caches());
    ids0 = first.train_target().sentence(0);
  }
  const std::optional<data::TokenCache::Header> h = data::TokenCache::read_header(dir + "/run/cache/train.tgt.bin");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->corpus.bytes, fs::file_size(dir + "/train.de"));
  EXPECT_EQ(h->corpus.mtime_ns, data::file_identity(dir + "/train.de").mtime_ns);
  EXPECT_EQ(h->corpus.digest, data::scan_corpus_file(dir + "/train.de").identity.digest);
  {  // Nothing changed: nothing is read or encoded.
    train::TranslationTask again(test::toy_recipe(dir), g);
    EXPECT_FALSE(again.encoded_caches());
    EXPECT_FALSE(again.rehashed_corpus());
  }
  // Touched (same bytes, another mtime): hashed again, kept, and the new mtime recorded.
  const auto touched = fs::file_time_type::clock::now() - std::chrono::minutes(30);
  fs::last_write_time(dir + "/train.de", touched);
  {
    train::TranslationTask task(test::toy_recipe(dir), g);
    EXPECT_TRUE(task.rehashed_corpus());
    EXPECT_FALSE(task.encoded_caches());
    EXPECT_EQ(task.train_target().sentence(0), ids0);
  }
  EXPECT_EQ(data::TokenCache::read_header(dir + "/run/cache/train.tgt.bin")->corpus.mtime_ns,
            data::file_identity(dir + "/train.de").mtime_ns);
  {
    train::TranslationTask task(test::toy_recipe(dir), g);
    EXPECT_FALSE(task.rehashed_corpus());
  }
  // Same size, other bytes, size and mtime as before: trusted (like make), so not noticed.
  std::string de = read_all(dir + "/train.de");
  de[0] = de[0] == 'd' ? 'e' : 'd';
  write_file(dir + "/train.de", de);
  fs::last_write_time(dir + "/train.de", touched);
  {
    train::TranslationTask task(test::toy_recipe(dir), g);
    EXPECT_FALSE(task.encoded_caches());
    EXPECT_EQ(task.train_target().sentence(0), ids0);
  }
  // The same change with a new mtime: stale, rebuilt.
  fs::last_write_time(dir + "/train.de", touched + std::chrono::minutes(1));
  {
    train::TranslationTask task(test::toy_recipe(dir), g);
    EXPECT_TRUE(task.encoded_caches());
    EXPECT_NE(task.train_target().sentence(0), ids0);
  }
  // Another size, mtime set back: stale, rebuilt.
  write_file(dir + "/train.de", de.substr(0, de.rfind('\n', de.size() - 2) + 1) + "ein neuer Satz\n");
  fs::last_write_time(dir + "/train.de", touched + std::chrono::minutes(1));
  {
    train::TranslationTask task(test::toy_recipe(dir), g);
    EXPECT_TRUE(task.encoded_caches());
    EXPECT_EQ(task.vocab().decode(std::vector<int>(task.train_target().ids(399), task.train_target().ids(399) +
                                                                              task.train_target().length(399))),
              task.vocab().decode(task.vocab().encode("ein neuer Satz")));  // as the toy vocabulary spells it
  }
  fs::remove_all(dir);
}

TEST(CorpusTokenCache, AFreshlyWrittenCorpusIsHashedAgainAtTheNextStart) {
  // A file written within 2 s of its hash could change again without its mtime moving: the cache records
  // mtime 0, the next start hashes it again and then records the settled mtime.
  const std::string dir = test::toy_dir("racy");
  Generator g(1);
  { train::TranslationTask first(test::toy_recipe(dir), g); }
  EXPECT_EQ(data::TokenCache::read_header(dir + "/run/cache/train.src.bin")->corpus.mtime_ns, 0);
  for (const char* f : {"train.en", "train.de", "valid.en", "valid.de"})
    fs::last_write_time(dir + "/" + f, fs::file_time_type::clock::now() - std::chrono::hours(1));
  {
    train::TranslationTask task(test::toy_recipe(dir), g);
    EXPECT_TRUE(task.rehashed_corpus());
    EXPECT_FALSE(task.encoded_caches());
  }
  EXPECT_EQ(data::TokenCache::read_header(dir + "/run/cache/train.src.bin")->corpus.mtime_ns,
            data::file_identity(dir + "/train.en").mtime_ns);
  fs::remove_all(dir);
}

TEST(CorpusTokenCache, OtherRanksWaitForRankZerosBuildAndNeverEncode) {
  const std::string dir = settled_toy_dir("ranks");
  Generator g(1);
  { train::TranslationTask first(test::toy_recipe(dir), g); }  // the SentencePiece model
  fs::remove_all(dir + "/run/cache");
  const data::SentencePieceVocab vocab = data::SentencePieceVocab::load(dir + "/run/spm.model");
  data::ParallelTokenCaches waited;
  std::thread other([&] {
    waited = data::load_or_encode_parallel(dir + "/train.en", dir + "/train.de", vocab, 7, dir + "/c", "train", false);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(fs::exists(dir + "/c/train.src.bin"));  // rank 1 waits, builds nothing
  const data::ParallelTokenCaches built =
      data::load_or_encode_parallel(dir + "/train.en", dir + "/train.de", vocab, 7, dir + "/c", "train", true);
  other.join();
  EXPECT_TRUE(built.encoded);
  EXPECT_FALSE(waited.encoded);
  EXPECT_EQ(waited.src.size(), 400);
  EXPECT_EQ(waited.tgt.key(), built.tgt.key());
  EXPECT_EQ(waited.tgt.sentence(17), built.tgt.sentence(17));
  fs::remove_all(dir);
}

TEST(CorpusTokenCache, SidesOfDifferentLengthsAreRefusedBeforeEncoding) {
  const std::string dir = settled_toy_dir("sides");
  Generator g(1);
  { train::TranslationTask first(test::toy_recipe(dir), g); }
  write_file(dir + "/train.de", "nur eine Zeile\n");
  const std::string msg = error_of([&] { train::TranslationTask t(test::toy_recipe(dir), g); });
  EXPECT_TRUE(has(msg, "parallel corpus sides differ: '" + dir + "/train.en' has 400 lines but '" + dir +
                           "/train.de' has 1"))
      << msg;
  fs::remove_all(dir);
}

TEST(CorpusTokenCache, TruncatedCacheIsOneSentenceAndExitTwo) {
  const std::string dir = settled_toy_dir("truncated");
  const std::string recipe = dir + "/recipe.yaml";
  write_file(recipe,
             "model: {kind: transformer, d_model: 32, ffn_dim: 64, encoder_layers: 1, decoder_layers: 1, "
             "vocab_size: 100, dropout: 0.0, attention: {heads: 2}}\n"
             "optim: {name: adam, lr: 0.005}\n"
             "train: {task: translation, save_dir: " + dir + "/run, max_updates: 1, max_epochs: 0, seed: 3}\n"
             "data: {train_prefix: " + dir + "/train, valid_prefix: " + dir + "/valid, max_tokens: 300, max_len: 40}\n");
  test::CommandResult r = test::run_cmha("train " + recipe);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string cache = dir + "/run/cache/train.tgt.bin";
  fs::resize_file(cache, fs::file_size(cache) - 6);
  r = test::run_cmha("train " + recipe + " --resume train.max_updates=2");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "token cache '" + cache + "' is truncated or corrupt")) << r.output;
  EXPECT_FALSE(has(r.output, "internal error")) << r.output;
  fs::remove_all(dir);
}
