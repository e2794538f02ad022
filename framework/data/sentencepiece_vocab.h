#pragma once
// A SentencePiece model (Kudo & Richardson 2018) through the C++ library:
// trained once from sentences held in memory, saved as a .model file, loaded
// again on later runs. Special ids are fixed: pad 0, unk 1, bos 2, eos 3.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace cmha::data {

struct SentencePieceOptions {
  int64_t vocab_size = 8000;
  std::string model_type = "unigram";  // unigram | bpe
  int64_t sample_sentences = 100000;   // at most this many sentences train the model (0 = all)
  uint64_t seed = 1;                   // which sentences are sampled, and the trainer's own seed
  int num_threads = 1;
  double character_coverage = 0.9995;
};

class SentencePieceVocab {
 public:
  static constexpr int kPad = 0, kUnk = 1, kBos = 2, kEos = 3;

  // Loads `path`; an unreadable or corrupt model, or one whose special ids are
  // not pad 0, unk 1, bos 2, eos 3, is an error naming the file.
  static SentencePieceVocab load(const std::string& path);
  // Trains on `sentences` (sampled down to options.sample_sentences by a
  // counter-based draw), writes the model to `path` (atomically) and returns it.
  static SentencePieceVocab train(const std::vector<const std::string*>& sentences, const std::string& path,
                                  const SentencePieceOptions& options);
  // Loads `path` when it exists (checking its size against options.vocab_size),
  // else trains it from `sentences` (which is called only then).
  static SentencePieceVocab load_or_train(const std::string& path, const SentencePieceOptions& options,
                                          const std::vector<const std::string*>& sentences);

  SentencePieceVocab(SentencePieceVocab&&) noexcept;
  SentencePieceVocab& operator=(SentencePieceVocab&&) noexcept;
  ~SentencePieceVocab();

  int64_t size() const;
  const std::string& path() const { return path_; }
  uint64_t model_hash() const { return hash_; }  // of the .model file's bytes
  // Ids of a sentence, without bos/eos. Thread-safe.
  std::vector<int> encode(const std::string& text) const;
  std::string decode(const std::vector<int>& ids) const;
  std::string piece(int id) const;

 private:
  SentencePieceVocab();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string path_;
  uint64_t hash_ = 0;
};

}  // namespace cmha::data
