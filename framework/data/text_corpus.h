#pragma once
// Line-aligned parallel text (one segment per line, UTF-8), as
// data/prepare_local_en_de.sh writes it: <prefix>.<source_lang> and
// <prefix>.<target_lang>. Reading validates everything once; each problem is
// one cmha::Error sentence naming the file (and the line where there is one):
// a missing or unreadable file, an empty file, a line that is not UTF-8, two
// sides with different line counts.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cmha::data {

// The lines of one UTF-8 text file, without their '\n' (and without a '\r'
// before it). A last line without '\n' counts; a file of zero bytes is an error.
std::vector<std::string> read_text_lines(const std::string& path);

// Calls `line` with each line of `path` in order, streamed in blocks (memory
// bounded by the longest line), with the same rules and errors as
// read_text_lines. Returns the number of lines.
uint64_t for_each_text_line(const std::string& path, const std::function<void(std::string&& line)>& line);

// What identifies a corpus file to the token cache (data/corpus_token_cache.h):
// size and modification time come from stat() alone; the digest of its bytes
// costs a read, so it is made once, when a cache is built, and again only when
// the size or the time has changed.
struct FileIdentity {
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;  // nanoseconds since the epoch
  uint64_t digest = 0;
};
// Size and mtime of `path` (digest 0); a missing or unreadable file is an error naming it.
FileIdentity file_identity(const std::string& path);
struct CorpusFileScan {
  FileIdentity identity;
  uint64_t lines = 0;  // as read_text_lines counts them
};
// One streamed pass over `path` (1 MiB at a time): its size, mtime, digest and
// line count. An empty file is an error naming it; UTF-8 is not checked here.
CorpusFileScan scan_corpus_file(const std::string& path);

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
