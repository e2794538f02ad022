#include "data/text_corpus.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "tensor/error.h"
#include "tensor/regular_file.h"

namespace cmha::data {

namespace {

std::string read_file_bytes(const std::string& path) {
  refuse_special_file(path, "corpus file");
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw Error("cannot open corpus file '" + path + "': " + std::strerror(errno));
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) bytes.append(buf, n);
  CMHA_CHECK(!std::ferror(f.get()), "cannot read corpus file '" + path + "': " + std::strerror(errno));
  return bytes;
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

std::vector<std::string> read_text_lines(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  CMHA_CHECK(!bytes.empty(), "corpus file '" + path + "' is empty");
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < bytes.size()) {
    size_t end = bytes.find('\n', start);
    if (end == std::string::npos) end = bytes.size();
    size_t stop = end;
    if (stop > start && bytes[stop - 1] == '\r') --stop;
    lines.emplace_back(bytes, start, stop - start);
    size_t bad = 0;
    if (!is_valid_utf8(lines.back(), &bad))
      throw Error("corpus file '" + path + "' line " + std::to_string(lines.size()) + " is not valid UTF-8 (byte " +
                  std::to_string(bad + 1) + " of the line)");
    start = end + 1;
  }
  return lines;
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
