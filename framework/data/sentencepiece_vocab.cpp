#include "data/sentencepiece_vocab.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "data/text_corpus.h"
#include "tensor/error.h"
#include "tensor/rng.h"
#include "tensor/atomic_file.h"

// Exported by libsentencepiece but declared in no installed header: the
// trainer otherwise prints a few hundred INFO lines per model.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
int GetMinLogLevel();
}  // namespace sentencepiece::logging

namespace cmha::data {

namespace fs = std::filesystem;

namespace {

class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<const std::string*>& s) : s_(s) {}
  bool done() const override { return i_ >= s_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return *s_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<const std::string*>& s_;
  size_t i_ = 0;
};

// At most `k` of the non-empty sentences, chosen by Philox keys of (seed, index), in corpus order.
std::vector<const std::string*> sample(const std::vector<const std::string*>& all, int64_t k, uint64_t seed) {
  std::vector<size_t> idx;
  idx.reserve(all.size());
  for (size_t i = 0; i < all.size(); ++i)
    if (!all[i]->empty()) idx.push_back(i);
  if (k > 0 && static_cast<size_t>(k) < idx.size()) {
    const Generator gen(seed * 0x9E3779B97F4A7C15ull + 0x5350ull);  // "SP"
    auto key = [&](size_t i) {
      return (static_cast<uint64_t>(philox_block(i / 4, gen.key())[i % 4]) << 32) | static_cast<uint32_t>(i);
    };
    std::vector<std::pair<uint64_t, size_t>> keyed;
    keyed.reserve(idx.size());
    for (size_t i : idx) keyed.emplace_back(key(i), i);
    std::nth_element(keyed.begin(), keyed.begin() + k, keyed.end());
    idx.clear();
    for (int64_t j = 0; j < k; ++j) idx.push_back(keyed[j].second);
    std::sort(idx.begin(), idx.end());
  }
  std::vector<const std::string*> out;
  out.reserve(idx.size());
  for (size_t i : idx) out.push_back(all[i]);
  return out;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CMHA_CHECK(in, "cannot open SentencePiece model '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

SentencePieceVocab::SentencePieceVocab() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SentencePieceVocab::SentencePieceVocab(SentencePieceVocab&&) noexcept = default;
SentencePieceVocab& SentencePieceVocab::operator=(SentencePieceVocab&&) noexcept = default;
SentencePieceVocab::~SentencePieceVocab() = default;

namespace {
void check_specials(const sentencepiece::SentencePieceProcessor& sp, const std::string& path) {
  CMHA_CHECK(sp.pad_id() == SentencePieceVocab::kPad && sp.unk_id() == SentencePieceVocab::kUnk &&
                 sp.bos_id() == SentencePieceVocab::kBos && sp.eos_id() == SentencePieceVocab::kEos,
             "SentencePiece model '" + path + "' has special ids pad " + std::to_string(sp.pad_id()) + ", unk " +
                 std::to_string(sp.unk_id()) + ", bos " + std::to_string(sp.bos_id()) + ", eos " +
                 std::to_string(sp.eos_id()) + ", but cmha needs pad 0, unk 1, bos 2, eos 3");
}
}  // namespace

SentencePieceVocab SentencePieceVocab::load(const std::string& path) {
  SentencePieceVocab v;
  const std::string bytes = read_all(path);
  const auto status = v.sp_->LoadFromSerializedProto(bytes);
  CMHA_CHECK(status.ok(), "cannot load SentencePiece model '" + path + "': " + status.ToString());
  check_specials(*v.sp_, path);
  v.path_ = path;
  v.hash_ = hash_bytes(bytes.data(), bytes.size());
  return v;
}

SentencePieceVocab SentencePieceVocab::train(const std::vector<const std::string*>& sentences, const std::string& path,
                                             const SentencePieceOptions& o) {
  CMHA_CHECK(o.model_type == "unigram" || o.model_type == "bpe",
             "data.spm_model_type must be unigram or bpe, got '" + o.model_type + "'");
  const std::vector<const std::string*> chosen = sample(sentences, o.sample_sentences, o.seed);
  CMHA_CHECK(!chosen.empty(), "no non-empty sentences to train the SentencePiece model '" + path + "' on");
  const std::unordered_map<std::string, std::string> kwargs = {
      {"vocab_size", std::to_string(o.vocab_size)},
      {"model_type", o.model_type},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"input_sentence_size", "0"},  // already sampled
      {"num_threads", std::to_string(std::max(1, o.num_threads))},
      {"pad_id", std::to_string(kPad)},
      {"unk_id", std::to_string(kUnk)},
      {"bos_id", std::to_string(kBos)},
      {"eos_id", std::to_string(kEos)},
  };
  VectorIterator it(chosen);
  std::string serialized;
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(o.seed % 0xFFFFFFFEull));
  const int log_level = sentencepiece::logging::GetMinLogLevel();
  sentencepiece::logging::SetMinLogLevel(1);  // warnings and errors only
  const auto status = sentencepiece::SentencePieceTrainer::Train(kwargs, &it, &serialized);
  sentencepiece::logging::SetMinLogLevel(log_level);
  CMHA_CHECK(status.ok(), "training the SentencePiece model '" + path + "' (" + o.model_type + ", vocabulary " +
                              std::to_string(o.vocab_size) + ", " + std::to_string(chosen.size()) +
                              " sentences) failed: " + status.ToString());
  // Write next to the target and rename: concurrent ranks or an interrupted run never leave half a model.
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  write_file_atomically(path, serialized);
  SentencePieceVocab v = load(path);
  CMHA_CHECK(v.size() == o.vocab_size, "the SentencePiece trainer made " + std::to_string(v.size()) +
                                           " pieces for '" + path + "', not the " + std::to_string(o.vocab_size) +
                                           " asked for");
  return v;
}

SentencePieceVocab SentencePieceVocab::load_or_train(const std::string& path, const SentencePieceOptions& o,
                                                     const std::vector<const std::string*>& sentences) {
  if (!fs::exists(path)) return train(sentences, path, o);
  SentencePieceVocab v = load(path);
  CMHA_CHECK(v.size() == o.vocab_size,
             "SentencePiece model '" + path + "' has " + std::to_string(v.size()) + " pieces but model.vocab_size is " +
                 std::to_string(o.vocab_size) + ": set model.vocab_size " + std::to_string(v.size()) +
                 ", or delete the file (and the run's cache/) to train a new one");
  return v;
}

int64_t SentencePieceVocab::size() const { return sp_->GetPieceSize(); }

std::vector<int> SentencePieceVocab::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  CMHA_CHECK(status.ok(), "SentencePiece cannot encode a sentence with '" + path_ + "': " + status.ToString());
  return ids;
}

std::string SentencePieceVocab::decode(const std::vector<int>& ids) const {
  std::string text;
  const auto status = sp_->Decode(ids, &text);
  CMHA_CHECK(status.ok(), "SentencePiece cannot decode ids with '" + path_ + "': " + status.ToString());
  return text;
}

std::string SentencePieceVocab::piece(int id) const { return sp_->IdToPiece(id); }

}  // namespace cmha::data
