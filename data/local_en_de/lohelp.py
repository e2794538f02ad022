"""Pairing of the LibreOffice help pages (libreoffice-help-en-us + -de).

Both packages ship the same tree of HTML files (help/en-US/..., help/de/...),
and every translatable element carries the same id in both languages
(par_idNNN, hd_idNNN, ...).  Elements are paired on (file path, id,
occurrence of that id in the file) -- exact, no alignment heuristics.
"""

import os
from html.parser import HTMLParser

# Elements whose text is a translatable unit.
UNIT_TAGS = frozenset("p h1 h2 h3 h4 h5 h6".split())
# Elements that never close (HTMLParser does not know HTML's void elements).
VOID_TAGS = frozenset("area base br col embed hr img input link meta param source track wbr".split())
# Units whose class marks them as code, not prose.
SKIP_CLASSES = frozenset("code codeintable smathcode bascode pycode".split())
# Ids that are page furniture, not text.
SKIP_IDS = frozenset("bm_module bm_system bm_HID".split())
# Elements whose content is never text.
SKIP_CONTENT_TAGS = frozenset("script style head title".split())


class _UnitParser(HTMLParser):
    """Collects {(id, n): text} of the unit elements of one page.

    Switch-inline variants ("Command" for macOS, "Ctrl" elsewhere) are
    hidden spans; only the default variant (id starting with "default")
    is kept, as a reader on Linux or Windows sees it.
    """

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []          # [tag, suppress(bool), unit_key or None]
        self.units = {}
        self.seen = {}
        self.buffers = {}

    def _suppressed(self):
        return any(item[1] for item in self.stack)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in VOID_TAGS:
            if tag == "br":
                self._text(" ")
            return
        suppress = tag in SKIP_CONTENT_TAGS
        hidden = "hidden" in a and a.get("hidden") not in ("false",)
        if hidden and not (a.get("id") or "").startswith("default"):
            suppress = True
        key = None
        uid = a.get("id")
        if tag in UNIT_TAGS and uid and uid not in SKIP_IDS and not self._suppressed():
            classes = set((a.get("class") or "").split())
            if not (classes & SKIP_CLASSES):
                n = self.seen.get(uid, 0)
                self.seen[uid] = n + 1
                key = (uid, n)
                self.buffers[key] = []
        self.stack.append([tag, suppress, key])

    def handle_startendtag(self, tag, attrs):
        if tag == "br":
            self._text(" ")

    def handle_endtag(self, tag):
        if tag in VOID_TAGS:
            return
        # pop to the matching open element (tolerates unclosed children)
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                for item in self.stack[i:]:
                    self._close(item)
                del self.stack[i:]
                return

    def _close(self, item):
        key = item[2]
        if key is not None:
            self.units[key] = "".join(self.buffers.pop(key))

    def _text(self, data):
        if self._suppressed():
            return
        for item in self.stack:
            if item[2] is not None:
                self.buffers[item[2]].append(data)

    def handle_data(self, data):
        self._text(data)

    def close(self):
        super().close()
        for item in self.stack:
            self._close(item)
        self.stack = []


def page_units(html_text):
    """{(id, occurrence): raw text} of one help page."""
    p = _UnitParser()
    p.feed(html_text)
    p.close()
    return p.units


def _read(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def list_pages(root):
    """Sorted relative paths of the .html files under root."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in filenames:
            if fn.endswith(".html"):
                out.append(os.path.relpath(os.path.join(dirpath, fn), root))
    out.sort()
    return out


def pair_pages(en_html, de_html):
    """[(id, n, en_text, de_text)] for the ids present in both pages, sorted."""
    ue = page_units(en_html)
    ud = page_units(de_html)
    out = []
    for key in sorted(set(ue) & set(ud)):
        out.append((key[0], key[1], ue[key], ud[key]))
    return out


def help_pairs(en_root, de_root):
    """Yield (relative file, id, en, de) for every shared page and id, in sorted order."""
    de_pages = set(list_pages(de_root))
    for rel in list_pages(en_root):
        if rel not in de_pages:
            continue
        for uid, n, en, de in pair_pages(_read(os.path.join(en_root, rel)),
                                         _read(os.path.join(de_root, rel))):
            yield rel, uid if n == 0 else "%s#%d" % (uid, n), en, de
