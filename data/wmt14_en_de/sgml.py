"""The WMT test sets' SGML: <doc docid=...> elements holding <seg id=...> lines.

    <srcset setid="newstest2014" srclang="any">
    <doc sysid="ref" docid="1012-bbc" genre="news" origlang="en">
    <p>
    <seg id="1">India and Japan prime ministers meet in Tokyo</seg>
"""

import html
import re

from fetch import Wmt14Error

# A <doc ...> opening tag or a whole <seg ...>...</seg> element, in file order.
_TAG_RE = re.compile(r"<doc\b([^>]*)>|<seg\b([^>]*)>(.*?)</seg\s*>", re.IGNORECASE | re.DOTALL)
_ATTR_RE = re.compile(r"""\b([A-Za-z_:][-\w:.]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")


def _attrs(text):
    return {m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None)
            for m in _ATTR_RE.finditer(text)}


def read_segments(text, name):
    """[((docid, segid), segment text)] in file order, entities unescaped.

    A segment outside a <doc> or without an id is an error naming `name`.
    """
    out = []
    docid = None
    for m in _TAG_RE.finditer(text):
        if m.group(1) is not None:
            docid = _attrs(m.group(1)).get("docid")
            if docid is None:
                raise Wmt14Error("%s: a <doc> element at character %d has no docid" % (name, m.start()))
            continue
        segid = _attrs(m.group(2)).get("id")
        if docid is None or segid is None:
            raise Wmt14Error("%s: the <seg> element at character %d is %s"
                             % (name, m.start(), "outside a <doc>" if docid is None else "missing its id"))
        out.append(((docid, segid), html.unescape(m.group(3))))
    if not out:
        raise Wmt14Error("%s holds no <seg> element" % name)
    return out


def aligned_pair(src_text, src_name, ref_text, ref_name):
    """The source and reference segment lists, checked to hold the same ids in the same order."""
    src = read_segments(src_text, src_name)
    ref = read_segments(ref_text, ref_name)
    if len(src) != len(ref):
        raise Wmt14Error("%s has %d segments but %s has %d" % (src_name, len(src), ref_name, len(ref)))
    for i, ((sid, _), (rid, _)) in enumerate(zip(src, ref)):
        if sid != rid:
            raise Wmt14Error("segment %d is doc %s seg %s in %s but doc %s seg %s in %s"
                             % (i + 1, sid[0], sid[1], src_name, rid[0], rid[1], ref_name))
    return [s for _, s in src], [r for _, r in ref]
