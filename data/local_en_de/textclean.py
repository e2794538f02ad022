"""Cleaning and filtering of English/German string pairs (stdlib only).

Every function here is pure and deterministic: same input, same output.
"""

import html
import re
import unicodedata

# --------------------------------------------------------------------------
# accelerators (keyboard mnemonics)

# An HTML/XML entity such as &amp; &#169; &#x2014; -- never an accelerator.
_ENTITY_RE = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#[xX][0-9A-Fa-f]+);")
# "&File", "Sa&ve": an ampersand directly before a letter or digit.
_AMP_ACCEL_RE = re.compile(r"&(?=[^\W_])")
# "~File", "De~fault" (LibreOffice): a tilde directly before a letter or digit,
# not part of a path such as "~/" and not a doubled "~~".
_TILDE_ACCEL_RE = re.compile(r"(?<!~)~(?=[^\W\d_])")
# The word (identifier-like run) around an underscore.
_UNDERSCORE_TOKEN_RE = re.compile(r"[\w.-]*_[\w.-]*")
_UPPER_IDENT_RE = re.compile(r"^[A-Z0-9]+_[A-Z0-9]+$")


def _strip_amp(s):
    out = []
    pos = 0
    while pos < len(s):
        if s[pos] != "&":
            out.append(s[pos])
            pos += 1
            continue
        if s.startswith("&&", pos):          # escaped literal ampersand
            out.append("&")
            pos += 2
            continue
        m = _ENTITY_RE.match(s, pos)
        if m:                                  # keep entities for decoding
            out.append(m.group(0))
            pos = m.end()
            continue
        if _AMP_ACCEL_RE.match(s, pos):        # accelerator: drop the "&"
            pos += 1
            continue
        out.append("&")
        pos += 1
    return "".join(out)


def _mnemonic_underscore(s):
    """Index of a GTK-style mnemonic underscore in s, or -1.

    Only a string with exactly one "_", directly before a letter or digit,
    qualifies, and not when the token around it is an upper-case
    identifier such as FULL_NAME.
    """
    if s.count("_") != 1:
        return -1
    i = s.index("_")
    if i + 1 >= len(s) or not (s[i + 1].isalnum()):
        return -1
    m = None
    for m in _UNDERSCORE_TOKEN_RE.finditer(s):
        if m.start() <= i < m.end():
            break
    if m is not None and _UPPER_IDENT_RE.match(m.group(0)):
        return -1
    return i


def _underscore_token(s, i):
    for m in _UNDERSCORE_TOKEN_RE.finditer(s):
        if m.start() <= i < m.end():
            return m.group(0)
    return s[i:i + 2]


def strip_accelerators(en, de):
    """Remove keyboard accelerators from a pair: &File, _File, ~File.

    The underscore rule looks at both sides: an underscore token that
    appears verbatim on the other side too (push_macro, epoll_ctl) is an
    identifier, not a mnemonic, and is kept.
    """
    en = _strip_amp(en)
    de = _strip_amp(de)
    en = _TILDE_ACCEL_RE.sub("", en)
    de = _TILDE_ACCEL_RE.sub("", de)
    ie = _mnemonic_underscore(en)
    idd = _mnemonic_underscore(de)
    if ie >= 0:
        tok = _underscore_token(en, ie)
        if tok not in de:
            en = en[:ie] + en[ie + 1:]
    if idd >= 0:
        tok = _underscore_token(de, idd)
        if tok not in en:
            de = de[:idd] + de[idd + 1:]
    return en, de


# --------------------------------------------------------------------------
# markup

_HTML_TAGS = (
    "a abbr b big blockquote body br center cite code dd div dl dt em font "
    "h1 h2 h3 h4 h5 h6 head hr html i img kbd li link markup meta nobr ol p "
    "pre q qt s samp small span strike strong sub sup table tbody td th "
    "thead tr tt u ul var"
).split()
_TAG_RE = re.compile(
    r"</?(?:%s)(?:\s[^<>]*)?/?>" % "|".join(sorted(_HTML_TAGS, key=len, reverse=True)),
    re.IGNORECASE)
_BREAK_TAG_RE = re.compile(r"<(?:br|p|li|div|tr|h[1-6])(?:\s[^<>]*)?/?>", re.IGNORECASE)


def strip_markup(s):
    """Remove known HTML/Pango tags (not <file>-style placeholders), decode entities."""
    s = _BREAK_TAG_RE.sub(" ", s)
    s = _TAG_RE.sub("", s)
    return html.unescape(s)


# --------------------------------------------------------------------------
# whitespace and Unicode

_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"), None)
_WS_RE = re.compile(r"\s+")


def normalise_ws(s):
    """NFC, drop soft hyphens and zero-width characters, collapse whitespace."""
    s = unicodedata.normalize("NFC", s)
    s = s.translate(_INVISIBLE)
    s = s.replace("\u00a0", " ").replace("\u202f", " ")
    return _WS_RE.sub(" ", s).strip()


# --------------------------------------------------------------------------
# placeholders

# printf (with positional %1$s, flags, width, precision, length, and GCC's
# %qs/%qD/%qE... ), Python %(name)s, brace {0} / {name}, LibreOffice %1 $1
# $(ARG1) %PRODUCTNAME, shell-like ${VAR}.
_PLACEHOLDER_RE = re.compile(
    r"%\([A-Za-z_][A-Za-z0-9_]*\)[-+#0]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]"
    r"|%(?:\d+\$)?[-+#0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?"
    r"(?:hh|h|ll|l|L|q|j|z|t|w|I64|I32|I|H|D|DD)*[diouxXeEfFgGaAcspnCSmqDTEVKZ]"
    r"|%[A-Z][A-Z0-9_]*[A-Z0-9]"
    r"|%[0-9]+"
    r"|\$\{[A-Za-z0-9_]+\}|\$\([A-Za-z0-9_]+\)|\$[0-9]+"
    r"|\{[0-9]*\}|\{[A-Za-z_][A-Za-z0-9_]*\}"
)
_POSITIONAL_RE = re.compile(r"^%\d+\$")


def placeholders(s):
    """Sorted list of the placeholders in s, positions removed (%2$s -> %s)."""
    s = s.replace("%%", "")
    found = []
    for m in _PLACEHOLDER_RE.finditer(s):
        tok = _POSITIONAL_RE.sub("%", m.group(0))
        found.append(tok)
    found.sort()
    return found


def placeholders_balanced(en, de):
    return placeholders(en) == placeholders(de)


_LETTER_RE = re.compile(r"[^\W\d_]")


def has_text(s):
    """True when s has a letter once placeholders are removed."""
    return bool(_LETTER_RE.search(_PLACEHOLDER_RE.sub(" ", s.replace("%%", ""))))


# --------------------------------------------------------------------------
# pair-level cleaning and the sentence filter

def clean_pair(en, de, accelerators=True, markup=True, balance_placeholders=True):
    """Return the cleaned (en, de), or None when the pair must be dropped.

    Dropped: empty sides, identical sides (case-insensitively), a side with
    no letters beyond placeholders, unbalanced placeholders (only when
    balance_placeholders is true: news text has no format strings, and its
    "$1 billion" is a price the translation may reword as "1 Mrd. Dollar").
    """
    if accelerators:
        en, de = strip_accelerators(en, de)
    if markup:
        en, de = strip_markup(en), strip_markup(de)
    en, de = normalise_ws(en), normalise_ws(de)
    if not en or not de:
        return None
    if en.casefold() == de.casefold():
        return None
    if not has_text(en) or not has_text(de):
        return None
    if balance_placeholders and not placeholders_balanced(en, de):
        return None
    return en, de


# The sentence-like filter used for train/dev/test:
#   - English 1..80 words, German 1..120 words (whitespace tokens);
#   - each side at most 600 characters;
#   - when the longer side has >= 30 characters, the character-length ratio
#     of the two sides lies within [1/3, 3] (catches truncated or misaligned
#     pairs);
MIN_EN_WORDS = 1
MAX_EN_WORDS = 80
MAX_DE_WORDS = 120
MAX_CHARS = 600
RATIO_MIN_CHARS = 30
MAX_RATIO = 3.0


def sentence_like(en, de):
    ne, nd = len(en.split()), len(de.split())
    if not (MIN_EN_WORDS <= ne <= MAX_EN_WORDS):
        return False
    if not (1 <= nd <= MAX_DE_WORDS):
        return False
    if len(en) > MAX_CHARS or len(de) > MAX_CHARS:
        return False
    le, ld = len(en), len(de)
    if max(le, ld) >= RATIO_MIN_CHARS:
        if ld > MAX_RATIO * le or le > MAX_RATIO * ld:
            return False
    return True
