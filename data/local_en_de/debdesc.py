"""Debian's translated package descriptions (Translation-en / Translation-de).

Each stanza has Package, Description-md5 and Description-LL; the md5 is
that of the English description, so it keys the pairing.  The first line
of a description is the short description (paired 1:1); the rest is the
long description, whose paragraphs (separated by " ." lines) are paired
only when both languages have the same number of paragraphs.
"""

import re

_DESC_FIELD_RE = re.compile(r"^Description-([A-Za-z_]+):(.*)$")


_BULLET_RE = re.compile(r"^\s*[*+\u2022-]\s+")


def _segments(lines):
    """Split a paragraph's lines into segments: the lead text, then one per
    bullet item ("* item", "- item", marker removed); continuation lines
    join their item."""
    segs = []
    for ln in lines:
        text = ln.strip()
        if not text:
            continue
        if _BULLET_RE.match(ln):
            segs.append([_BULLET_RE.sub("", ln).strip()])
        elif not segs:
            segs.append([text])
        else:
            segs[-1].append(text)
    return [" ".join(x) for x in segs]


def parse_translation(text):
    """{md5: (short, [paragraph])} of a Translation-LL file; a paragraph is a
    list of segments (see _segments), each its lines joined by spaces.
    When a md5 appears more than once (several packages share a
    description), the first stanza in file order wins; they are identical.
    """
    out = {}
    for stanza in re.split(r"\n[ \t]*\n", text):
        md5 = None
        short = None
        long_lines = []
        in_desc = False
        for line in stanza.split("\n"):
            if not line:
                continue
            if line.startswith((" ", "\t")):
                if in_desc:
                    long_lines.append(line[1:])
                continue
            in_desc = False
            if line.startswith("Description-md5:"):
                md5 = line.split(":", 1)[1].strip()
                continue
            m = _DESC_FIELD_RE.match(line)
            if m and m.group(1) != "md5":
                short = m.group(2).strip()
                in_desc = True
        if md5 is None or short is None or md5 in out:
            continue
        paras = []
        cur = []
        for ln in long_lines:
            if ln.strip() == ".":
                if cur:
                    paras.append(_segments(cur))
                cur = []
            else:
                cur.append(ln)
        if cur:
            paras.append(_segments(cur))
        out[md5] = (short, paras)
    return out


def description_pairs(en_text, de_text):
    """Yield (md5, part, en, de) sorted by md5; part is "short" or "pN"."""
    en = parse_translation(en_text)
    de = parse_translation(de_text)
    for md5 in sorted(set(en) & set(de)):
        es, ep = en[md5]
        ds, dp = de[md5]
        yield md5, "short", es, ds
        if len(ep) != len(dp):
            continue
        for i, (a, b) in enumerate(zip(ep, dp)):
            if len(a) == len(b):
                # same bullet structure: pair the lead text and each item
                for j, (x, y) in enumerate(zip(a, b)):
                    yield md5, "p%d.%d" % (i + 1, j + 1), x, y
            else:
                yield md5, "p%d" % (i + 1), " ".join(a), " ".join(b)
