// The Unicode pieces of BLEU: UTF-8 validation and coding, sacreBLEU's
// "intl" tokenizer (mteval-v14's international normalisation) and
// Python-compatible lowercasing; the last two need the Unicode character
// database, which ICU provides.
//
// The intl rules, each a substitution over the whole line with Python
// re.sub semantics (left to right, no overlapping matches):
//   1. a punctuation character (general category P*) preceded by a
//      character that is not a number (N*) gets a space on each side of it;
//   2. a punctuation character followed by a non-number likewise;
//   3. every symbol (S*) gets a space on each side.
// So "3.14" and "1,000" stay whole, and, as in mteval-v14, so does a number
// followed by a final period ("1995." stays one token).
#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utypes.h>

#include <string>

#include "eval/bleu.h"
#include "tensor/error.h"

namespace cmha::eval {

namespace {

bool in_categories(char32_t c, uint32_t mask) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & mask) != 0;
}
bool is_punctuation(char32_t c) { return in_categories(c, U_GC_P_MASK); }
bool is_symbol(char32_t c) { return in_categories(c, U_GC_S_MASK); }
bool is_number(char32_t c) { return in_categories(c, U_GC_N_MASK); }

}  // namespace

namespace detail {

size_t find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;        // no overlong forms
      else if (b == 0xED) hi = 0x9F;   // no surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;        // no overlong forms
      else if (b == 0xF4) hi = 0x8F;   // nothing past U+10FFFF
    } else {
      return i;
    }
    if (i + 1 >= n || p[i + 1] < lo || p[i + 1] > hi) return i;
    for (int k = 2; k < len; ++k)
      if (i + k >= n || (p[i + k] & 0xC0) != 0x80) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char b = p[i];
    char32_t c;
    int len;
    if (b < 0x80) {
      c = b;
      len = 1;
    } else if (b < 0xE0) {
      c = b & 0x1F;
      len = 2;
    } else if (b < 0xF0) {
      c = b & 0x0F;
      len = 3;
    } else {
      c = b & 0x07;
      len = 4;
    }
    CMHA_CHECK(i + len <= n, "decode_utf8: truncated UTF-8 sequence");
    for (int k = 1; k < len; ++k) c = (c << 6) | (p[i + k] & 0x3F);
    out.push_back(c);
    i += len;
  }
  return out;
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char32_t c : s) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

std::u32string tokenize_intl_raw(const std::u32string& line) {
  // Rule 1: (\P{N})(\p{P}) -> "\1 \2 ".
  std::u32string a;
  a.reserve(line.size() + line.size() / 4 + 8);
  for (size_t i = 0; i < line.size();) {
    if (i + 1 < line.size() && !is_number(line[i]) && is_punctuation(line[i + 1])) {
      a.push_back(line[i]);
      a.push_back(U' ');
      a.push_back(line[i + 1]);
      a.push_back(U' ');
      i += 2;
    } else {
      a.push_back(line[i++]);
    }
  }
  // Rule 2: (\p{P})(\P{N}) -> " \1 \2".
  std::u32string b;
  b.reserve(a.size() + a.size() / 4 + 8);
  for (size_t i = 0; i < a.size();) {
    if (i + 1 < a.size() && is_punctuation(a[i]) && !is_number(a[i + 1])) {
      b.push_back(U' ');
      b.push_back(a[i]);
      b.push_back(U' ');
      b.push_back(a[i + 1]);
      i += 2;
    } else {
      b.push_back(a[i++]);
    }
  }
  // Rule 3: (\p{S}) -> " \1 ".
  std::u32string c;
  c.reserve(b.size() + 8);
  for (const char32_t ch : b) {
    if (is_symbol(ch)) {
      c.push_back(U' ');
      c.push_back(ch);
      c.push_back(U' ');
    } else {
      c.push_back(ch);
    }
  }
  return c;
}

}  // namespace detail

std::string unicode_lower(std::string_view line) {
  if (line.empty()) return {};
  // Pure ASCII needs no tables.
  bool ascii = true;
  for (const char ch : line) ascii = ascii && static_cast<unsigned char>(ch) < 0x80;
  if (ascii) {
    std::string out(line);
    for (char& ch : out)
      if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    return out;
  }
  CMHA_CHECK(detail::find_invalid_utf8(line) == std::string_view::npos, "unicode_lower: input is not valid UTF-8");
  CMHA_CHECK(line.size() < (1u << 29), "unicode_lower: line too long");

  // UTF-8 -> UTF-16 -> full lowercase in the root locale (Python's str.lower
  // is locale-independent: full mappings, final sigma by context) -> UTF-8.
  UErrorCode err = U_ZERO_ERROR;
  int32_t len16 = 0;
  u_strFromUTF8(nullptr, 0, &len16, line.data(), static_cast<int32_t>(line.size()), &err);
  CMHA_CHECK(err == U_BUFFER_OVERFLOW_ERROR || U_SUCCESS(err), "unicode_lower: UTF-8 conversion failed");
  std::u16string src(static_cast<size_t>(len16), u'\0');
  err = U_ZERO_ERROR;
  u_strFromUTF8(reinterpret_cast<UChar*>(src.data()), len16, nullptr, line.data(), static_cast<int32_t>(line.size()),
                &err);
  CMHA_CHECK(U_SUCCESS(err), "unicode_lower: UTF-8 conversion failed");

  // Lowercasing can lengthen text (U+0130 becomes two code units); retry once
  // with the size ICU asks for.
  std::u16string lower(src.size() + 16, u'\0');
  err = U_ZERO_ERROR;
  int32_t len = u_strToLower(reinterpret_cast<UChar*>(lower.data()), static_cast<int32_t>(lower.size()),
                             reinterpret_cast<const UChar*>(src.data()), len16, "", &err);
  if (err == U_BUFFER_OVERFLOW_ERROR) {
    lower.assign(static_cast<size_t>(len), u'\0');
    err = U_ZERO_ERROR;
    len = u_strToLower(reinterpret_cast<UChar*>(lower.data()), len, reinterpret_cast<const UChar*>(src.data()), len16,
                       "", &err);
  }
  CMHA_CHECK(U_SUCCESS(err), std::string("unicode_lower: ICU lowercasing failed: ") + u_errorName(err));

  int32_t len8 = 0;
  err = U_ZERO_ERROR;
  u_strToUTF8(nullptr, 0, &len8, reinterpret_cast<const UChar*>(lower.data()), len, &err);
  CMHA_CHECK(err == U_BUFFER_OVERFLOW_ERROR || U_SUCCESS(err), "unicode_lower: UTF-8 conversion failed");
  std::string out(static_cast<size_t>(len8), '\0');
  err = U_ZERO_ERROR;
  u_strToUTF8(out.data(), len8, nullptr, reinterpret_cast<const UChar*>(lower.data()), len, &err);
  CMHA_CHECK(U_SUCCESS(err) || err == U_STRING_NOT_TERMINATED_WARNING, "unicode_lower: UTF-8 conversion failed");
  return out;
}

}  // namespace cmha::eval
