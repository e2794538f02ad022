"""Example sentences from the Ding dictionary (Debian package trans-de-en).

A line is "German :: English"; each side holds sub-entries separated by
" | " that correspond one to one.  Most sub-entries are words or phrases;
the ones that are whole example sentences are kept: both sides end in
".", "!" or "?" and the English side has at least 3 words.
"""

import re

SENTENCE_END = (".", "!", "?")
MIN_EN_WORDS = 3

# Ding's annotations: {f} {pl} {vt} (grammar), [coll.] [Br.] (usage labels),
# <abbreviations>.  Round brackets are real text and stay.
_ANNOTATION_RE = re.compile(r"\s*(?:\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>)")


def strip_annotations(s):
    return re.sub(r"\s+", " ", _ANNOTATION_RE.sub("", s)).strip()


def _is_sentence(s):
    return s.endswith(SENTENCE_END)


def line_pairs(line):
    """[(en, de)] example sentences of one dictionary line."""
    line = line.rstrip("\n")
    if not line or line.startswith("#") or " :: " not in line:
        return []
    de_side, en_side = line.split(" :: ", 1)
    de_subs = de_side.split(" | ")
    en_subs = en_side.split(" | ")
    if len(de_subs) != len(en_subs):
        return []
    out = []
    for de, en in zip(de_subs, en_subs):
        de = strip_annotations(de)
        en = strip_annotations(en)
        if not de or not en:
            continue
        de_alts = de.split("; ")
        en_alts = en.split("; ")
        if len(de_alts) > 1 or len(en_alts) > 1:
            # "; " separates alternatives.  Pair them only when both sides
            # list the same number of complete sentences; otherwise the
            # sub-entry is one sentence that contains a semicolon.
            if (len(de_alts) == len(en_alts)
                    and all(_is_sentence(x) for x in de_alts + en_alts)):
                cand = list(zip(en_alts, de_alts))
            elif any(_is_sentence(x) for x in de_alts[:-1] + en_alts[:-1]):
                continue          # mismatched lists of alternative sentences
            else:
                cand = [(en, de)]
        else:
            cand = [(en, de)]
        for e, d in cand:
            if _is_sentence(e) and _is_sentence(d) and len(e.split()) >= MIN_EN_WORDS:
                out.append((e, d))
    return out


def ding_pairs(path):
    """Yield (line number, en, de) for the example sentences of a Ding file."""
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for no, line in enumerate(f, 1):
            for en, de in line_pairs(line):
                yield no, en, de
