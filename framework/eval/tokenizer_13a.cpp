// sacreBLEU's default tokenizer "13a": the normalisation of NIST's
// mteval-v13a.pl (Western punctuation split off, "." and "," kept inside
// numbers, "-" split after a digit), and the ##AT## compound split of the
// tensor2tensor / fairseq WMT14 EN-DE evaluations.
//
// Each rule is a regular-expression substitution applied to the whole line,
// left to right and without overlapping matches (Python's re.sub): a rule
// on a pair of characters that matches at i consumes i and i+1, and the
// search resumes at i+2. The rules are written here as scans with the same
// semantics, on code points.
#include <string>

#include "eval/bleu.h"

namespace cmha::eval::detail {

namespace {

void replace_all(std::u32string& s, std::u32string_view from, std::u32string_view to) {
  if (s.find(from) == std::u32string::npos) return;
  std::u32string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(from, pos);
    if (hit == std::u32string::npos) break;
    out.append(s, pos, hit - pos);
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s, pos, std::u32string::npos);
  s.swap(out);
}

bool is_ascii_digit(char32_t c) { return c >= U'0' && c <= U'9'; }

// The character class of mteval-v13a's first rule: {|}~ [\]^_` space!"#$%&
// ()*+ :;<=>?@ and /. Not in it: ' , - . (handled below), digits, letters.
bool is_13a_split_char(char32_t c) {
  return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
         (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == 0x2F;
}

// How a matched pair (a, b) is rewritten.
enum class PairForm {
  kSpaceAfterEach,  // "a b "  (the regex replacement r'\1 \2 ')
  kSpaceBeforeEach  // " a b"  (r' \1 \2')
};

// re.sub(r'(A)(B)', form, s) for single-character classes A and B.
template <typename First, typename Second>
std::u32string sub_pairs(const std::u32string& s, First first, Second second, PairForm form) {
  std::u32string out;
  out.reserve(s.size() + s.size() / 4 + 8);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      if (form == PairForm::kSpaceAfterEach) {
        out.push_back(s[i]);
        out.push_back(U' ');
        out.push_back(s[i + 1]);
        out.push_back(U' ');
      } else {
        out.push_back(U' ');
        out.push_back(s[i]);
        out.push_back(U' ');
        out.push_back(s[i + 1]);
      }
      i += 2;
    } else {
      out.push_back(s[i]);
      ++i;
    }
  }
  return out;
}

}  // namespace

std::u32string tokenize_13a_raw(std::u32string line) {
  // Language-independent part: drop <skipped> markers, join words broken
  // across lines, and undo the four HTML escapes mteval knows (in this
  // order, so "&amp;lt;" becomes "<").
  replace_all(line, U"<skipped>", U"");
  replace_all(line, U"-\n", U"");
  replace_all(line, U"\n", U" ");
  replace_all(line, U"&quot;", U"\"");
  replace_all(line, U"&amp;", U"&");
  replace_all(line, U"&lt;", U"<");
  replace_all(line, U"&gt;", U">");

  // The padding lets a final "." or "," see the non-digit that follows it.
  std::u32string s;
  s.reserve(line.size() + line.size() / 2 + 2);
  s.push_back(U' ');
  for (const char32_t c : line) {
    if (is_13a_split_char(c)) {
      s.push_back(U' ');
      s.push_back(c);
      s.push_back(U' ');
    } else {
      s.push_back(c);
    }
  }
  s.push_back(U' ');

  const auto non_digit = [](char32_t c) { return !is_ascii_digit(c); };
  const auto period_comma = [](char32_t c) { return c == U'.' || c == U','; };
  // Period and comma split off unless preceded by a digit ...
  s = sub_pairs(s, non_digit, period_comma, PairForm::kSpaceAfterEach);
  // ... and unless followed by one ...
  s = sub_pairs(s, period_comma, non_digit, PairForm::kSpaceBeforeEach);
  // ... and a dash split off after a digit.
  s = sub_pairs(s, is_ascii_digit, [](char32_t c) { return c == U'-'; }, PairForm::kSpaceAfterEach);
  return s;
}

std::u32string compound_split_raw(std::u32string_view line) {
  // Perl `s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g` on bytes: \s is ASCII
  // whitespace only, and the character after a split hyphen is consumed, so
  // it cannot start the next match ("a-b-c" -> "a ##AT##-##AT## b-c").
  const auto non_space = [](char32_t c) {
    return !(c == U' ' || c == U'\t' || c == U'\n' || c == U'\v' || c == U'\f' || c == U'\r');
  };
  static constexpr std::u32string_view kJoin = U" ##AT##-##AT## ";
  std::u32string out;
  out.reserve(line.size() + 16);
  size_t i = 0;
  while (i < line.size()) {
    if (i + 2 < line.size() && non_space(line[i]) && line[i + 1] == U'-' && non_space(line[i + 2])) {
      out.push_back(line[i]);
      out.append(kJoin);
      out.push_back(line[i + 2]);
      i += 3;
    } else {
      out.push_back(line[i]);
      ++i;
    }
  }
  return out;
}

}  // namespace cmha::eval::detail
