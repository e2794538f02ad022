// The translation data pipeline on tiny synthetic corpora written here:
// corpus errors, the joint SentencePiece model, the memory-mapped token cache
// (reuse and rebuild), token-budget batching (budgets, determinism, rank
// shards) and TranslationTask end to end through the Trainer.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "data/sentencepiece_vocab.h"
#include "data/text_corpus.h"
#include "data/token_batches.h"
#include "data/token_cache.h"
#include "distributed/communicator.h"
#include "support/check.h"
#include "support/files.h"
#include "support/text.h"
#include "support/toy_translation.h"
#include "train/trainer.h"
#include "train/translation_task.h"

using namespace cmha;
using test::error_of;
namespace fs = std::filesystem;

using test::toy_dir;
using test::toy_recipe;
using test::write_file;
using test::write_toy_corpus;

namespace {

using cmha::test::has;

// Synthetic lengths for the batcher tests.
std::pair<std::vector<int32_t>, std::vector<int32_t>> random_lengths(int n) {
  std::vector<int32_t> s(n), t(n);
  uint32_t state = 12345;
  for (int i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    s[i] = 1 + static_cast<int32_t>((state >> 8) % 60);
    state = state * 1664525u + 1013904223u;
    t[i] = 1 + static_cast<int32_t>((state >> 8) % 70);
  }
  return {s, t};
}

}  // namespace

// ---- corpus errors ----

TEST(TextCorpus, ReadsLinesWithoutNewlinesOrCarriageReturns) {
  const std::string dir = test::temp_dir("mt_lines");
  write_file(dir + "/x.en", "one\r\ntwo\n\nfour");
  write_file(dir + "/x.de", "eins\nzwei\n\nvier\n");
  data::ParallelCorpus c = data::read_parallel_corpus(dir + "/x", "en", "de");
  EXPECT_EQ(c.source, (std::vector<std::string>{"one", "two", "", "four"}));
  EXPECT_EQ(c.target, (std::vector<std::string>{"eins", "zwei", "", "vier"}));
  fs::remove_all(dir);
}

TEST(TextCorpus, MissingFileIsAnErrorNamingIt) {
  const std::string dir = test::temp_dir("mt_missing");
  write_file(dir + "/x.en", "a\n");
  const std::string msg = error_of([&] { data::read_parallel_corpus(dir + "/x", "en", "de"); });
  EXPECT_TRUE(has(msg, dir + "/x.de")) << msg;
  EXPECT_TRUE(has(msg, "cannot open")) << msg;
  fs::remove_all(dir);
}

TEST(TextCorpus, EmptyFileIsAnErrorNamingIt) {
  const std::string dir = test::temp_dir("mt_empty");
  write_file(dir + "/x.en", "a\n");
  write_file(dir + "/x.de", "");
  const std::string msg = error_of([&] { data::read_parallel_corpus(dir + "/x", "en", "de"); });
  EXPECT_TRUE(has(msg, dir + "/x.de")) << msg;
  EXPECT_TRUE(has(msg, "is empty")) << msg;
  fs::remove_all(dir);
}

TEST(TextCorpus, NonUtf8LineIsAnErrorNamingFileAndLine) {
  const std::string dir = test::temp_dir("mt_utf8");
  write_file(dir + "/x.en", "fine\nstill fine\nna\xefve\n");  // Latin-1 ï
  write_file(dir + "/x.de", "gut\ngut\ngut\n");
  const std::string msg = error_of([&] { data::read_parallel_corpus(dir + "/x", "en", "de"); });
  EXPECT_TRUE(has(msg, dir + "/x.en")) << msg;
  EXPECT_TRUE(has(msg, "line 3")) << msg;
  EXPECT_TRUE(has(msg, "UTF-8")) << msg;
  EXPECT_TRUE(data::is_valid_utf8("na\xc3\xafve \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(data::is_valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(data::is_valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(data::is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(data::is_valid_utf8("\xe2\x82"));          // truncated
  fs::remove_all(dir);
}

TEST(TextCorpus, DifferentLineCountsNameBothFilesAndCounts) {
  const std::string dir = test::temp_dir("mt_count");
  write_file(dir + "/x.en", "a\nb\nc\n");
  write_file(dir + "/x.de", "a\nb\n");
  const std::string msg = error_of([&] { data::read_parallel_corpus(dir + "/x", "en", "de"); });
  EXPECT_TRUE(has(msg, dir + "/x.en' has 3 lines")) << msg;
  EXPECT_TRUE(has(msg, dir + "/x.de' has 2")) << msg;
  fs::remove_all(dir);
}

TEST(TextCorpus, TaskReportsCorpusErrors) {
  const std::string dir = toy_dir("task_errors");
  write_file(dir + "/valid.de", "nur eine Zeile\n");
  Generator g(1);
  const std::string msg = error_of([&] { train::TranslationTask task(toy_recipe(dir), g); });
  EXPECT_TRUE(has(msg, dir + "/valid.en' has 40 lines but '" + dir + "/valid.de' has 1")) << msg;
  // A missing corpus names the key, the file and the scripts that prepare one.
  const std::string missing = error_of([&] { train::TranslationTask task(toy_recipe(dir, {"data.train_prefix=" + dir + "/nope"}), g); });
  EXPECT_TRUE(has(missing, "data.train_prefix: the corpus file '" + dir + "/nope.en' does not exist")) << missing;
  EXPECT_TRUE(has(missing, "data/prepare_local_en_de.sh")) << missing;
  fs::remove_all(dir);
}

// ---- SentencePiece ----

TEST(SentencePieceVocab, TrainsAJointModelWithFixedSpecialIdsAndReloadsIt) {
  const std::string dir = toy_dir("spm");
  data::ParallelCorpus c = data::read_parallel_corpus(dir + "/train", "en", "de");
  std::vector<const std::string*> joint;
  for (auto& s : c.source) joint.push_back(&s);
  for (auto& s : c.target) joint.push_back(&s);
  data::SentencePieceOptions o;
  o.vocab_size = 100;
  o.sample_sentences = 500;
  const std::string path = dir + "/run/spm.model";
  data::SentencePieceVocab v = data::SentencePieceVocab::load_or_train(path, o, joint);
  EXPECT_TRUE(fs::exists(path));
  EXPECT_EQ(v.size(), 100);
  EXPECT_EQ(v.piece(0), "<pad>");
  EXPECT_EQ(v.piece(1), "<unk>");
  EXPECT_EQ(v.piece(2), "<s>");
  EXPECT_EQ(v.piece(3), "</s>");
  // Joint: both languages encode without unknowns and decode back.
  for (const std::string& s : {c.source[0], c.target[0]}) {
    const auto ids = v.encode(s);
    for (int id : ids) EXPECT_GT(id, 3);
    EXPECT_EQ(v.decode(ids), s);
  }
  // Reused (no sentences needed), and the size is checked against the recipe's.
  data::SentencePieceVocab again = data::SentencePieceVocab::load_or_train(path, o, {});
  EXPECT_EQ(again.model_hash(), v.model_hash());
  o.vocab_size = 120;
  const std::string msg = error_of([&] { data::SentencePieceVocab::load_or_train(path, o, {}); });
  EXPECT_TRUE(has(msg, path)) << msg;
  EXPECT_TRUE(has(msg, "100 pieces but model.vocab_size is 120")) << msg;
  // BPE trains too.
  o.vocab_size = 80;
  o.model_type = "bpe";
  data::SentencePieceVocab bpe = data::SentencePieceVocab::train(joint, dir + "/bpe.model", o);
  EXPECT_EQ(bpe.size(), 80);
  EXPECT_EQ(bpe.decode(bpe.encode(c.target[1])), c.target[1]);
  fs::remove_all(dir);
}

// ---- token cache ----

TEST(TokenCache, RoundTripsThroughTheMappedFileAndRejectsCorruptOnes) {
  const std::string dir = test::temp_dir("mt_cache");
  const std::vector<std::vector<int32_t>> sentences = {{5, 6, 7}, {}, {9}, {10, 11}};
  data::TokenCache::write(dir + "/c.bin", 0xABCDull, sentences);
  data::TokenCache c(dir + "/c.bin");
  EXPECT_EQ(c.key(), 0xABCDull);
  ASSERT_EQ(c.size(), 4);
  EXPECT_EQ(c.total_ids(), 6);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(c.sentence(i), sentences[i]);
  uint64_t key = 0;
  EXPECT_TRUE(data::TokenCache::read_key(dir + "/c.bin", &key));
  EXPECT_EQ(key, 0xABCDull);
  EXPECT_FALSE(data::TokenCache::read_key(dir + "/none.bin", &key));
  fs::resize_file(dir + "/c.bin", fs::file_size(dir + "/c.bin") - 4);
  EXPECT_TRUE(has(error_of([&] { data::TokenCache t(dir + "/c.bin"); }), "truncated"));
  write_file(dir + "/d.bin", "not a cache at all, just some text that is long enough for a header......");
  EXPECT_TRUE(has(error_of([&] { data::TokenCache t(dir + "/d.bin"); }), "not a cmha token cache"));
  fs::remove_all(dir);
}

TEST(TranslationTask, CachesAreReusedAndRebuiltWhenTheCorpusChanges) {
  const std::string dir = toy_dir("reuse");
  Generator g(1);
  auto first = std::make_unique<train::TranslationTask>(toy_recipe(dir), g);
  EXPECT_TRUE(first->encoded_caches());
  EXPECT_TRUE(fs::exists(dir + "/run/spm.model"));
  for (const char* f : {"train.src.bin", "train.tgt.bin", "valid.src.bin", "valid.tgt.bin"})
    EXPECT_TRUE(fs::exists(dir + "/run/cache/" + f)) << f;
  const std::vector<int32_t> ids0 = first->train_target().sentence(0);
  EXPECT_EQ(first->vocab().decode(std::vector<int>(ids0.begin(), ids0.end())),
            data::read_text_lines(dir + "/train.de")[0]);
  first.reset();

  train::TranslationTask second(toy_recipe(dir), g);
  EXPECT_FALSE(second.encoded_caches());
  EXPECT_EQ(second.train_target().sentence(0), ids0);

  // Same size, different bytes: the content hash notices.
  std::string de;
  {
    std::ifstream in(dir + "/train.de");
    std::getline(in, de, '\0');
  }
  de[0] = de[0] == 'd' ? 'e' : 'd';
  write_file(dir + "/train.de", de);
  train::TranslationTask third(toy_recipe(dir), g);
  EXPECT_TRUE(third.encoded_caches());
  EXPECT_NE(third.train_target().sentence(0), ids0);

  // A SentencePiece model of another size in the run dir is a clear error.
  const std::string msg = error_of([&] { train::TranslationTask t(toy_recipe(dir, {"model.vocab_size=120"}), g); });
  EXPECT_TRUE(has(msg, dir + "/run/spm.model")) << msg;
  EXPECT_TRUE(has(msg, "model.vocab_size is 120")) << msg;
  fs::remove_all(dir);
}

// ---- batching ----

TEST(TokenBatches, BudgetsAreRespectedAndEveryKeptPairComesOnce) {
  auto [s, t] = random_lengths(3000);
  data::BatchingOptions o;
  o.max_tokens = 400;
  o.max_len = 64;
  o.shuffle_window = 10;
  data::TokenBatcher batcher(s, t, o);
  int64_t expect_dropped = 0;
  for (int i = 0; i < 3000; ++i) expect_dropped += s[i] > 64 || t[i] > 64;
  EXPECT_EQ(batcher.dropped(), expect_dropped);
  EXPECT_GT(batcher.dropped(), 0);
  std::vector<int> seen(3000, 0);
  double padded = 0, real = 0;
  const auto batches = batcher.epoch_batches(0);
  for (const auto& b : batches) {
    int64_t S = 0, T = 0;
    for (int64_t i : b) {
      S = std::max<int64_t>(S, s[i]);
      T = std::max<int64_t>(T, t[i]);
      ++seen[i];
      real += std::max(s[i], t[i]);
    }
    EXPECT_LE(static_cast<int64_t>(b.size()) * std::max(S, T), 400);
    padded += static_cast<double>(b.size()) * std::max(S, T);
  }
  for (int i = 0; i < 3000; ++i) EXPECT_EQ(seen[i], (s[i] > 64 || t[i] > 64) ? 0 : 1) << i;
  // Sorting inside windows keeps padding small.
  EXPECT_GT(real / padded, 0.8);
  // The pairs in a batch that make_batch builds.
  const std::string dir = test::temp_dir("mt_make");
  data::TokenCache::write(dir + "/s.bin", 1, {{10, 11, 12}, {13}});
  data::TokenCache::write(dir + "/t.bin", 2, {{20}, {21, 22, 23, 24}});
  data::TokenCache cs(dir + "/s.bin"), ct(dir + "/t.bin");
  const data::TranslationBatch mb = data::make_batch(cs, ct, std::vector<int32_t>{0, 1}, 0, 2, 3);
  EXPECT_EQ(mb.src.to_i64_vector(), (std::vector<int64_t>{10, 11, 12, 3, 13, 3, 0, 0}));
  const bool* pad = mb.src_pad.data<bool>();
  EXPECT_EQ(std::vector<bool>(pad, pad + 8), (std::vector<bool>{0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(mb.tgt_in.to_i64_vector(), (std::vector<int64_t>{2, 20, 0, 0, 0, 2, 21, 22, 23, 24}));
  EXPECT_EQ(mb.tgt_out.to_i64_vector(), (std::vector<int64_t>{20, 3, 0, 0, 0, 21, 22, 23, 24, 3}));
  EXPECT_EQ(mb.tgt_tokens, 7);
  EXPECT_EQ(mb.src_tokens, 6);
  fs::remove_all(dir);
}

TEST(TokenBatches, DeterministicForASeedWhateverTheThreadsAndDifferentForAnother) {
  auto [s, t] = random_lengths(2000);
  data::BatchingOptions o;
  o.max_tokens = 500;
  o.seed = 7;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one_thread = data::TokenBatcher(s, t, o).epoch_batches(3);
  omp_set_num_threads(std::max(2, threads));
  const auto many_threads = data::TokenBatcher(s, t, o).epoch_batches(3);
  omp_set_num_threads(threads);
  EXPECT_EQ(one_thread, many_threads);
  data::TokenBatcher same(s, t, o);
  EXPECT_EQ(same.epoch_batches(3), one_thread);
  EXPECT_NE(same.epoch_batches(4), one_thread);  // another epoch, another order
  o.seed = 8;
  EXPECT_NE(data::TokenBatcher(s, t, o).epoch_batches(3), one_thread);
}

TEST(TokenBatches, RanksGetEqualCountsOfDisjointBatches) {
  auto [s, t] = random_lengths(2500);
  for (int world : {2, 3, 4}) {
    std::set<int64_t> all;
    size_t count = 0, total = 0;
    for (int rank = 0; rank < world; ++rank) {
      data::BatchingOptions o;
      o.max_tokens = 600;
      o.rank = rank;
      o.world = world;
      const auto mine = data::TokenBatcher(s, t, o).epoch_batches(1);
      if (rank == 0) count = mine.size();
      EXPECT_EQ(mine.size(), count) << "rank " << rank << " of " << world;
      for (const auto& b : mine)
        for (int64_t i : b) {
          EXPECT_TRUE(all.insert(i).second) << "pair " << i << " on two ranks";
          ++total;
        }
    }
    data::BatchingOptions single;
    single.max_tokens = 600;
    const auto whole = data::TokenBatcher(s, t, single).epoch_batches(1);
    EXPECT_EQ(count, whole.size() / world);
  }
}

// ---- the task end to end ----

TEST(TranslationTask, TrainsThroughTheTrainerAndTheLossFalls) {
  const std::string dir = toy_dir("train");
  // A model this small is all OpenMP overhead: one thread is several times
  // faster, and immune to a busy machine (the results are the same).
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Generator g(3);
  run::Recipe r = toy_recipe(dir);
  train::TranslationTask task(r, g);
  EXPECT_STREQ(task.unit_name(), "tokens");
  EXPECT_GT(task.batches_per_epoch(), 5);
  const auto before = task.validate();
  EXPECT_NEAR(before.at("perplexity"), std::exp(before.at("nll_loss")), 1e-6 * before.at("perplexity"));
  EXPECT_GT(before.at("loss"), before.at("nll_loss") * 0.9);
  distributed::SingleCommunicator comm;
  const train::TrainSummary s = train::Trainer(r, task, comm).run();
  EXPECT_EQ(s.updates, 40);
  const auto after = task.validate();
  EXPECT_LT(after.at("nll_loss"), before.at("nll_loss") - 1.0) << before.at("nll_loss") << " -> " << after.at("nll_loss");
  EXPECT_LT(after.at("perplexity"), before.at("perplexity") / 2);

  // The data position resumes exactly: a fresh task at the saved state serves the same batches.
  const nlohmann::json state = task.data_state();
  Generator g2(3);
  train::TranslationTask resumed(r, g2);
  resumed.restore_data_state(state);
  EXPECT_EQ(resumed.data_state(), state);
  EXPECT_EQ(resumed.current_batches(), task.current_batches());
  omp_set_num_threads(threads);
  fs::remove_all(dir);
}
