#include "data/text_corpus.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "tensor/error.h"
#include "tensor/regular_file.h"

namespace cmha::data {

namespace {

constexpr size_t kBlockBytes = size_t{1} << 20;

using File = std::unique_ptr<FILE, int (*)(FILE*)>;

File open_corpus_file(const std::string& path) {
  refuse_special_file(path, "corpus file");
  File f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw Error("cannot open corpus file '" + path + "': " + std::strerror(errno));
  return f;
}

// Reads `path` block by block (every block kBlockBytes but the last, so the
// digest does not depend on how the reads fall), calling `block` on each.
uint64_t read_blocks(const std::string& path, const std::function<void(const char*, size_t)>& block) {
  File f = open_corpus_file(path);
  std::vector<char> buf(kBlockBytes);
  uint64_t total = 0;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) {
    block(buf.data(), n);
    total += n;
  }
  CMHA_CHECK(!std::ferror(f.get()), "cannot read corpus file '" + path + "': " + std::strerror(errno));
  CMHA_CHECK(total > 0, "corpus file '" + path + "' is empty");
  return total;
}

inline uint64_t mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

}  // namespace

bool is_valid_utf8(const std::string& s, size_t* bad_at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  auto fail = [&] {
    if (bad_at) *bad_at = i;
    return false;
  };
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return fail();  // continuation byte first, overlong 0xC0/0xC1, or > 0xF4
    if (i + len > n) return fail();
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return fail();
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return fail();
    i += len;
  }
  return true;
}

uint64_t for_each_text_line(const std::string& path, const std::function<void(std::string&& line)>& line) {
  uint64_t count = 0;
  std::string pending;  // the start of a line whose '\n' has not been read yet
  auto emit = [&](std::string&& text) {
    ++count;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    size_t bad = 0;
    if (!is_valid_utf8(text, &bad))
      throw Error("corpus file '" + path + "' line " + std::to_string(count) + " is not valid UTF-8 (byte " +
                  std::to_string(bad + 1) + " of the line)");
    line(std::move(text));
  };
  read_blocks(path, [&](const char* p, size_t n) {
    size_t start = 0;
    while (start < n) {
      const void* nl = std::memchr(p + start, '\n', n - start);
      if (!nl) {
        pending.append(p + start, n - start);
        break;
      }
      const size_t end = static_cast<size_t>(static_cast<const char*>(nl) - p);
      pending.append(p + start, end - start);
      emit(std::move(pending));
      pending.clear();
      start = end + 1;
    }
  });
  if (!pending.empty()) emit(std::move(pending));  // a last line without '\n'
  return count;
}

std::vector<std::string> read_text_lines(const std::string& path) {
  std::vector<std::string> lines;
  for_each_text_line(path, [&](std::string&& l) { lines.push_back(std::move(l)); });
  return lines;
}

FileIdentity file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error("cannot read corpus file '" + path + "': " + std::strerror(errno));
  FileIdentity id;
  id.bytes = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return id;
}

CorpusFileScan scan_corpus_file(const std::string& path) {
  CorpusFileScan scan;
  scan.identity = file_identity(path);
  uint64_t h = 0x636d6861'64696731ull;  // "cmhadig1"
  char last = '\n';
  const uint64_t total = read_blocks(path, [&](const char* p, size_t n) {
    h = hash_combine(h, hash_bytes(p, n));
    for (const char* q = p; (q = static_cast<const char*>(std::memchr(q, '\n', static_cast<size_t>(p + n - q))));
         ++q)
      ++scan.lines;
    last = p[n - 1];
  });
  if (last != '\n') ++scan.lines;  // a last line without '\n' counts
  scan.identity.digest = hash_combine(h, total);
  // A file that grew or shrank while being read: its digest describes neither version.
  CMHA_CHECK(total == scan.identity.bytes, "corpus file '" + path + "' changed while it was being read");
  return scan;
}

std::string corpus_path(const std::string& prefix, const std::string& lang) { return prefix + "." + lang; }

ParallelCorpus read_parallel_corpus(const std::string& prefix, const std::string& source_lang,
                                    const std::string& target_lang) {
  ParallelCorpus c;
  c.source_path = corpus_path(prefix, source_lang);
  c.target_path = corpus_path(prefix, target_lang);
  c.source = read_text_lines(c.source_path);
  c.target = read_text_lines(c.target_path);
  CMHA_CHECK(c.source.size() == c.target.size(),
             "parallel corpus sides differ: '" + c.source_path + "' has " + std::to_string(c.source.size()) +
                 " lines but '" + c.target_path + "' has " + std::to_string(c.target.size()));
  return c;
}

uint64_t hash_bytes(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull ^ mix64(seed + n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  if (n > i) std::memcpy(&tail, p + i, n - i);
  h = (h ^ tail) * 0x100000001b3ull;
  return mix64(h);
}

uint64_t hash_combine(uint64_t a, uint64_t b) { return mix64(a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2))); }

}  // namespace cmha::data
