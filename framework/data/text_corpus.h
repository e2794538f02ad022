#pragma once
// Line-aligned parallel text (one segment per line, UTF-8), as
// data/prepare_local_en_de.sh writes it: <prefix>.<source_lang> and
// <prefix>.<target_lang>. Reading validates everything once; each problem is
// one cmha::Error sentence naming the file (and the line where there is one):
// a missing or unreadable file, an empty file, a line that is not UTF-8, two
// sides with different line counts.
#include <cstdint>
#include <string>
#include <vector>

namespace cmha::data {

// The lines of one UTF-8 text file, without their '\n' (and without a '\r'
// before it). A last line without '\n' counts; a file of zero bytes is an error.
std::vector<std::string> read_text_lines(const std::string& path);

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points above U+10FFFF). With `bad_at`, the byte offset of the first error.
bool is_valid_utf8(const std::string& s, size_t* bad_at = nullptr);

struct ParallelCorpus {
  std::string source_path, target_path;
  std::vector<std::string> source, target;  // equal sizes
  size_t size() const { return source.size(); }
};

// "<prefix>.<lang>" for both sides, read and checked.
std::string corpus_path(const std::string& prefix, const std::string& lang);
ParallelCorpus read_parallel_corpus(const std::string& prefix, const std::string& source_lang,
                                    const std::string& target_lang);

// A 64-bit hash (FNV-1a-style, 8 bytes at a time, then mixed) for cache keys.
uint64_t hash_bytes(const void* data, size_t n, uint64_t seed = 0);
uint64_t hash_combine(uint64_t a, uint64_t b);

}  // namespace cmha::data
