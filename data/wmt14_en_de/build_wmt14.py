#!/usr/bin/env python3
"""Build the WMT14 English->German data of Vaswani et al. (2017) as plain text.

Usually run through data/prepare_wmt14_en_de.sh; see data/README.md.  Stdlib
only.  Train = Europarl v7 + Common Crawl + News Commentary v9, cleaned and
filtered with the local corpus' own functions (data/local_en_de/textclean.py);
dev = newstest2013 and test = the full newstest2014 (3003 lines), whitespace-
normalised but never filtered.  SentencePiece is left to `cmha train`.
"""

import argparse
import hashlib
import itertools
import os
import shutil
import sys
import tarfile
import time
from collections import namedtuple

HERE = os.path.dirname(os.path.abspath(__file__))
LOCAL = os.path.join(os.path.dirname(HERE), "local_en_de")
for _p in (HERE, LOCAL):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import build_corpus      # noqa: E402  (the local corpus: TEXT_FILES, combined_checksum)
import fetch             # noqa: E402
import sgml              # noqa: E402
import textclean         # noqa: E402
from fetch import Wmt14Error  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "work", "wmt14_en_de")

Archive = namedtuple("Archive", "file url")
# A parallel text: `en` and `de` are member basenames inside `archive`.
Text = namedtuple("Text", "name archive en de")

EUROPARL = Archive("training-parallel-europarl-v7.tgz",
                   "http://statmt.org/wmt13/training-parallel-europarl-v7.tgz")
COMMONCRAWL = Archive("training-parallel-commoncrawl.tgz",
                      "http://statmt.org/wmt13/training-parallel-commoncrawl.tgz")
NEWS_COMMENTARY = Archive("training-parallel-nc-v9.tgz",
                          "http://statmt.org/wmt14/training-parallel-nc-v9.tgz")
DEV = Archive("dev.tgz", "http://statmt.org/wmt14/dev.tgz")
TEST_FULL = Archive("test-full.tgz", "http://statmt.org/wmt14/test-full.tgz")
ARCHIVES = [EUROPARL, COMMONCRAWL, NEWS_COMMENTARY, DEV, TEST_FULL]

TRAIN_TEXTS = [
    Text("europarl-v7", EUROPARL, "europarl-v7.de-en.en", "europarl-v7.de-en.de"),
    Text("commoncrawl", COMMONCRAWL, "commoncrawl.de-en.en", "commoncrawl.de-en.de"),
    Text("news-commentary-v9", NEWS_COMMENTARY, "news-commentary-v9.de-en.en",
         "news-commentary-v9.de-en.de"),
]
DEV_TEXT = Text("newstest2013", DEV, "newstest2013.en", "newstest2013.de")
TEST_TEXT = Text("newstest2014", TEST_FULL, "newstest2014-deen-src.en.sgm",
                 "newstest2014-deen-ref.de.sgm")
# The published sizes: a different count means another release of the set.
EXPECTED_LINES = {"dev": 3000, "test": 3003}

# News, parliament and web text: no UI accelerators, no markup to strip, and
# "$1 billion" or "{0}" are prose, not format strings that must balance.
NEWS_CLEAN = dict(accelerators=False, markup=False, balance_placeholders=False)


# --------------------------------------------------------------------------
# archives: download, verify, extract the members we read

def members_of(text):
    return [text.en, text.de]


def fetch_all(downloads, log=print):
    tool = fetch.downloader()
    if tool is None:
        raise Wmt14Error("neither curl nor wget is installed; install one (apt-get install curl) "
                         "or pass --from-dir with the archives already downloaded")
    os.makedirs(downloads, exist_ok=True)
    for a in ARCHIVES:
        fetch.download(a.url, os.path.join(downloads, a.file), tool, log=log)


def _find_member(listing, basename, path, url):
    hits = sorted(n for n in listing if n.rsplit("/", 1)[-1] == basename)
    if not hits:
        raise Wmt14Error("the archive %s (from %s) has no member named %s" % (path, url, basename))
    return hits[0]


def extract_members(downloads, extracted, texts, log=print):
    """Verify every archive and extract the members the texts read into `extracted`.

    Returns {basename: extracted path}.  A member already extracted with the
    archive's size for it is not extracted again.
    """
    os.makedirs(extracted, exist_ok=True)
    paths = {}
    for a in ARCHIVES:
        wanted = [b for t in texts if t.archive == a for b in members_of(t)]
        if not wanted:
            continue
        path = os.path.join(downloads, a.file)
        if not os.path.exists(path):
            raise Wmt14Error("the archive %s is missing; download it from %s" % (path, a.url))
        listing = fetch.verify_archive(path, a.url)
        todo = {}
        for b in wanted:
            name = _find_member(listing, b, path, a.url)
            out = os.path.join(extracted, b)
            paths[b] = out
            if not (os.path.exists(out) and os.path.getsize(out) == listing[name]):
                todo[name] = out
        if todo:
            log("  extracting %s from %s" % (", ".join(sorted(os.path.basename(o) for o in todo.values())),
                                              a.file))
            # One streaming pass over the archive: a gzip stream cannot seek back cheaply.
            with tarfile.open(path, "r|gz") as tar:
                for m in tar:
                    if m.name in todo:
                        tmp = todo[m.name] + ".tmp"
                        with tar.extractfile(m) as src, open(tmp, "wb") as dst:
                            shutil.copyfileobj(src, dst, 1 << 20)
                        os.replace(tmp, todo[m.name])
    return paths


# --------------------------------------------------------------------------
# reading

def _lines(path):
    """The lines of a file as bytes, split on b'\\n' only.

    str.splitlines() would also split on U+2028, U+0085 and form feeds, which
    occur inside Common Crawl sentences and would misalign the two sides.
    """
    with open(path, "rb") as f:
        for raw in f:
            yield raw[:-1] if raw.endswith(b"\n") else raw


def read_parallel(en_path, de_path):
    """Yield (line number, en bytes, de bytes); mismatched line counts are an error."""
    missing = object()
    n = 0
    for en, de in itertools.zip_longest(_lines(en_path), _lines(de_path), fillvalue=missing):
        n += 1
        if en is missing or de is missing:
            longer, shorter = (de_path, en_path) if en is missing else (en_path, de_path)
            raise Wmt14Error("%s has more lines than %s (which ends after line %d)" % (longer, shorter, n - 1))
        yield n, en, de


def _decode_strict(b, path, line):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Wmt14Error("%s line %d is not valid UTF-8 (byte %d)" % (path, line, e.start + 1))


class LineWriter:
    """Writes UTF-8 lines and hashes them on the way."""

    def __init__(self, path):
        self.path = path
        self.sha = hashlib.sha256()
        self.count = 0
        self.f = open(path, "wb")

    def write(self, line):
        data = (line + "\n").encode("utf-8")
        self.f.write(data)
        self.sha.update(data)
        self.count += 1

    def close(self):
        self.f.close()
        return self.sha.hexdigest()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


# --------------------------------------------------------------------------
# the three splits

def clean_text(text, paths, w_en, w_de, log=print):
    """Clean and filter one training text into the writers; returns its counters."""
    t0 = time.time()
    st = {"raw": 0, "not_utf8": 0, "clean": 0, "sentence_like": 0}
    for _, en_b, de_b in read_parallel(paths[text.en], paths[text.de]):
        st["raw"] += 1
        try:
            en, de = en_b.decode("utf-8"), de_b.decode("utf-8")
        except UnicodeDecodeError:
            st["not_utf8"] += 1
            continue
        pair = textclean.clean_pair(en, de, **NEWS_CLEAN)
        if pair is None:
            continue
        st["clean"] += 1
        if not textclean.sentence_like(*pair):
            continue
        st["sentence_like"] += 1
        w_en.write(pair[0])
        w_de.write(pair[1])
    log("  %-20s raw %8d  not UTF-8 %6d  cleaned %8d  sentence-like (kept) %8d  (%.1fs)"
        % (text.name, st["raw"], st["not_utf8"], st["clean"], st["sentence_like"], time.time() - t0))
    return st


def build_train(paths, out, log=print):
    """Clean and filter the training texts with textclean; returns ({file: sha256}, stats)."""
    stats = {}
    with LineWriter(os.path.join(out, "train.en")) as w_en, LineWriter(os.path.join(out, "train.de")) as w_de:
        for text in TRAIN_TEXTS:
            stats[text.name] = clean_text(text, paths, w_en, w_de, log=log)
        return {"train.en": w_en.close(), "train.de": w_de.close()}, stats


def write_unfiltered(split, en_lines, de_lines, out, log=print):
    """Write an evaluation split: every line kept, only textclean.normalise_ws applied.

    Dropping or reordering a dev/test line would make scores incomparable
    with every published number on the set.
    """
    changed = 0
    with LineWriter(os.path.join(out, split + ".en")) as w_en, LineWriter(os.path.join(out, split + ".de")) as w_de:
        for en, de in zip(en_lines, de_lines):
            ne, nd = textclean.normalise_ws(en), textclean.normalise_ws(de)
            changed += (ne != en.strip()) + (nd != de.strip())
            w_en.write(ne)
            w_de.write(nd)
        n = w_en.count
        sums = {split + ".en": w_en.close(), split + ".de": w_de.close()}
    log("  %-20s %d lines, all kept (%d sides changed by whitespace/Unicode normalisation)"
        % (split, n, changed))
    if split in EXPECTED_LINES and n != EXPECTED_LINES[split]:
        log("  note: %s has %d lines; the published set has %d" % (split, n, EXPECTED_LINES[split]))
    return sums, n


def read_dev(paths):
    en, de = [], []
    for n, e, d in read_parallel(paths[DEV_TEXT.en], paths[DEV_TEXT.de]):
        en.append(_decode_strict(e, paths[DEV_TEXT.en], n))
        de.append(_decode_strict(d, paths[DEV_TEXT.de], n))
    return en, de


def read_test(paths):
    texts = []
    for b in (TEST_TEXT.en, TEST_TEXT.de):
        with open(paths[b], "rb") as f:
            data = f.read()
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise Wmt14Error("%s is not valid UTF-8 (byte %d)" % (paths[b], e.start + 1))
    return sgml.aligned_pair(texts[0], paths[TEST_TEXT.en], texts[1], paths[TEST_TEXT.de])


def build(out, downloads=None, download=True, log=print):
    """The whole pipeline; returns (sums, stats).  downloads defaults to OUT/downloads."""
    t0 = time.time()
    out = os.path.abspath(out)
    downloads = os.path.abspath(downloads or os.path.join(out, "downloads"))
    os.makedirs(out, exist_ok=True)
    if download:
        log("downloading into %s:" % downloads)
        fetch_all(downloads, log=log)
    log("verifying and extracting:")
    paths = extract_members(downloads, os.path.join(out, "extracted"),
                            TRAIN_TEXTS + [DEV_TEXT, TEST_TEXT], log=log)
    log("train (textclean.clean_pair %s, then textclean.sentence_like):"
        % ", ".join("%s=%s" % kv for kv in sorted(NEWS_CLEAN.items())))
    sums, stats = build_train(paths, out, log=log)
    log("dev and test (never filtered):")
    s, stats["dev"] = write_unfiltered("dev", *read_dev(paths), out, log=log)
    sums.update(s)
    s, stats["test"] = write_unfiltered("test", *read_test(paths), out, log=log)
    sums.update(s)
    lines = "".join("%s  %s\n" % (sums[f], f) for f in build_corpus.TEXT_FILES)
    with open(os.path.join(out, "SHA256SUMS"), "w", encoding="utf-8") as f:
        f.write(lines)
    stats["_time"] = time.time() - t0
    return sums, stats


def report(sums, stats, out, log=print):
    kept = sum(stats[t.name]["sentence_like"] for t in TRAIN_TEXTS)
    raw = sum(stats[t.name]["raw"] for t in TRAIN_TEXTS)
    log("")
    log("train %d of %d pairs kept, dev %d, test %d" % (kept, raw, stats["dev"], stats["test"]))
    log("sha256 (also in %s):" % os.path.join(out, "SHA256SUMS"))
    for f in build_corpus.TEXT_FILES:
        log("  %s  %s" % (sums[f], f))
    log("combined checksum (sha256 of SHA256SUMS): %s" % build_corpus.combined_checksum(sums))
    log("outputs in %s (built in %.1fs)" % (out, stats.get("_time", 0.0)))


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="prepare_wmt14_en_de.sh",
        description="Download the WMT14 English-German data (Europarl v7, Common Crawl, News "
                    "Commentary v9; newstest2013 as dev, the full newstest2014 as test) and write "
                    "plain-text train/dev/test files for cmha train.")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help="output folder; downloads go to DIR/downloads (default: %(default)s)")
    p.add_argument("--from-dir", metavar="DIR",
                   help="use the five .tgz archives already in DIR; download nothing")
    p.add_argument("--no-download", action="store_true",
                   help="use the archives already in OUT/downloads; download nothing")
    return p.parse_args(argv)


def main(argv=None):
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)   # progress before errors
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        sums, stats = build(args.out, downloads=args.from_dir,
                            download=not (args.no_download or args.from_dir))
    except Wmt14Error as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    report(sums, stats, os.path.abspath(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
