// sacreBLEU's TER tokenizer (tokenizers/tokenizer_ter.py, after Tercom's
// Normalizer.java). Each rule is one Python re.sub over the whole line:
// matches found left to right, never overlapping, on code points.
#include <string>

#include "eval/bleu.h"
#include "eval/ter.h"
#include "tensor/error.h"

namespace cmha::eval {

namespace {

bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }

// Every occurrence of `from` (non-overlapping, left to right) becomes `to`.
std::u32string replace_all(const std::u32string& s, std::u32string_view from, std::u32string_view to) {
  std::u32string out;
  size_t i = 0;
  while (true) {
    const size_t j = s.find(from, i);
    if (j == std::u32string::npos) break;
    out.append(s, i, j - i);
    out += to;
    i = j + from.size();
  }
  out.append(s, i, std::u32string::npos);
  return out;
}

// re.sub(r"([A])([B])", "<l>\1<m>\2<r>"): each two-character match of the
// classes `first`, `second` rewritten with the given spaces around.
template <typename First, typename Second>
std::u32string pair_rule(const std::u32string& s, First first, Second second, const char32_t* before,
                         const char32_t* between, const char32_t* after) {
  std::u32string out;
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      out += before;
      out.push_back(s[i]);
      out += between;
      out.push_back(s[i + 1]);
      out += after;
      i += 2;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

// re.sub(r"([class])", r" \1 "): a space on each side of every match.
template <typename Class>
std::u32string space_around(const std::u32string& s, Class in_class) {
  std::u32string out;
  for (const char32_t c : s) {
    if (in_class(c)) {
      out.push_back(U' ');
      out.push_back(c);
      out.push_back(U' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

template <typename Class>
std::u32string remove_class(const std::u32string& s, Class in_class) {
  std::u32string out;
  for (const char32_t c : s)
    if (!in_class(c)) out.push_back(c);
  return out;
}

// The character class [{-~[-` -&(-+:-@/]: ASCII punctuation and the space,
// except ' , - . which the later rules handle.
bool is_western_punct(char32_t c) {
  return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
         (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == 0x2F;
}

std::u32string normalize_general_and_western(std::u32string s) {
  s = replace_all(s, U"\n-", U"");  // end-of-line hyphenation
  s = replace_all(s, U"\n", U" ");
  s = replace_all(s, U"&quot;", U"\"");
  s = replace_all(s, U"&amp;", U"&");
  s = replace_all(s, U"&lt;", U"<");
  s = replace_all(s, U"&gt;", U">");
  s = U" " + s + U" ";
  s = space_around(s, is_western_punct);
  s = replace_all(s, U"'s ", U" 's ");  // possessives
  if (s.size() >= 2 && s.compare(s.size() - 2, 2, U"'s") == 0) s = s.substr(0, s.size() - 2) + U" 's";  // r"'s$"
  const auto is_period_or_comma = [](char32_t c) { return c == U'.' || c == U','; };
  const auto not_digit = [](char32_t c) { return !is_digit(c); };
  s = pair_rule(s, not_digit, is_period_or_comma, U"", U" ", U" ");   // r"([^0-9])([\.,])" -> r"\1 \2 "
  s = pair_rule(s, is_period_or_comma, not_digit, U" ", U" ", U"");   // r"([\.,])([^0-9])" -> r" \1 \2"
  s = pair_rule(s, is_digit, [](char32_t c) { return c == U'-'; }, U"", U" ", U" ");  // r"([0-9])(-)" -> r"\1 \2 "
  return s;
}

// TercomTokenizer.ASIAN_PUNCT and FULL_WIDTH_PUNCT.
bool is_asian_punct(char32_t c) {
  return c == 0x3001 || c == 0x3002 || (c >= 0x3008 && c <= 0x3011) || (c >= 0x3014 && c <= 0x301F) ||
         (c >= 0xFF61 && c <= 0xFF65) || c == 0x30FB;
}
bool is_full_width_punct(char32_t c) {
  switch (c) {
    case 0xFF0E: case 0xFF0C: case 0xFF1F: case 0xFF1A: case 0xFF1B: case 0xFF01: case 0xFF02: case 0xFF08:
    case 0xFF09:
      return true;
    default:
      return false;
  }
}

std::u32string normalize_asian(std::u32string s) {
  // CJK ideographs (and extension A), strokes and radicals, compatibility
  // ideographs and forms, enclosed letters and the range up to U+3F22: one
  // character per word.
  s = space_around(s, [](char32_t c) { return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF); });
  s = space_around(s, [](char32_t c) { return (c >= 0x31C0 && c <= 0x31EF) || (c >= 0x2E80 && c <= 0x2EFF); });
  s = space_around(s, [](char32_t c) {
    return (c >= 0x3300 && c <= 0x33FF) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE4F);
  });
  s = space_around(s, [](char32_t c) { return c >= 0x3200 && c <= 0x3F22; });
  // sacreBLEU's Hiragana, Katakana and Katakana-extension rules are anchored
  // at the start of the line (r"(^|^[...])([...]+)(?=$|^[...])"), which here
  // always begins with the space the western rules put there: they never
  // match, so they are left out.
  s = space_around(s, is_asian_punct);
  s = space_around(s, is_full_width_punct);
  return s;
}

}  // namespace

std::string ter_tokenize(std::string_view line, const TerOptions& o) {
  CMHA_CHECK(detail::find_invalid_utf8(line) == std::string_view::npos, "ter_tokenize: input is not valid UTF-8");
  std::u32string s(detail::py_rstrip(detail::decode_utf8(line)));  // TER._preprocess_segment: sent.rstrip()
  if (s.empty()) return {};
  if (!o.case_sensitive) s = detail::decode_utf8(unicode_lower(detail::encode_utf8(s)));
  if (o.normalized) {
    s = normalize_general_and_western(std::move(s));
    if (o.asian_support) s = normalize_asian(std::move(s));
  }
  if (o.no_punct) {
    s = remove_class(s, [](char32_t c) { return std::u32string_view(U".,?:;!\"()").find(c) != std::u32string_view::npos; });
    if (o.asian_support) s = remove_class(s, [](char32_t c) { return is_asian_punct(c) || is_full_width_punct(c); });
  }
  std::u32string joined;
  for (const auto& word : detail::py_split(s)) {
    if (!joined.empty()) joined.push_back(U' ');
    joined += word;
  }
  return detail::encode_utf8(joined);
}

}  // namespace cmha::eval
