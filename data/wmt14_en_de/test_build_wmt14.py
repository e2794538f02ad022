"""Unit tests of the WMT14 English-German builder (stdlib unittest, no network).

Run from the repository root:
    python3 -m unittest discover -s data/wmt14_en_de -p 'test_*.py' -v

The tests write tiny fake statmt.org archives (.tgz with the real member
paths, .sgm test files) and run extraction, cleaning and writing end to end
with downloading bypassed (--from-dir).
"""

import contextlib
import hashlib
import http.server
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import build_wmt14       # noqa: E402  (puts data/local_en_de on the path)
import fetch             # noqa: E402
import sgml              # noqa: E402
import textclean         # noqa: E402
from fetch import Wmt14Error  # noqa: E402

# Training pairs: (en, de, kept?).  The dropped ones are dropped by textclean,
# the kept "$1" pair shows that news text skips the placeholder balance check.
TRAIN_PAIRS = [
    ("Resumption of the session", "Wiederaufnahme der Sitzungsperiode", True),
    ("It cost $1 billion.", "Es kostete 1 Milliarde Dollar.", True),
    ("A line\u2028with a line separator.", "Eine Zeile\u2028mit Zeilentrenner.", True),
    ("  Extra   spaces\there. ", "Zusätzliche\u00a0Leerzeichen  hier.", True),
    ("Identical", "identical", False),                    # same on both sides
    ("", "Nur Deutsch.", False),                          # empty side
    ("1999", "1999", False),                              # no letters
    (" ".join(["word"] * 81), " ".join(["Wort"] * 81), False),   # > 80 English words
    ("Short.", "Dies ist ein viel zu langer deutscher Satz für so ein kurzes Original.", False),
]

# Dev/test lines that the training filter would drop: they must stay.
HARD_EVAL = [
    ("Identical", "identical"),
    ("2014", "2014"),
    ("", "Leer auf der Quellseite."),
    (" ".join(["word"] * 100), "Kurz."),
]


def _tgz(path, members):
    """Write a .tgz holding {member path: bytes}."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))


def _text(lines):
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _sgm(setid, lang, docs, which):
    """docs: [(docid, [(en, de), ...])]; which 0 = English source, 1 = German reference."""
    tag = "srcset" if which == 0 else "refset"
    out = ['<%s setid="%s" srclang="any" trglang="de">' % (tag, setid)]
    for docid, segs in docs:
        out.append('<doc sysid="ref" docid="%s" genre="news" origlang="en">' % docid)
        out.append("<p>")
        for i, pair in enumerate(segs, 1):
            text = pair[which].replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
            out.append('<seg id="%d">%s</seg>' % (i, text))
        out.append("</p>")
        out.append("</doc>")
    out.append("</%s>" % tag)
    return ("\n".join(out) + "\n").encode("utf-8")


def _eval_pairs(n, prefix):
    pairs = list(HARD_EVAL)
    pairs.append(('Tom & "Jerry" <3', 'Tom & „Jerry“ <3'))
    while len(pairs) < n:
        k = len(pairs)
        pairs.append(("%s sentence number %d." % (prefix, k), "%s Satz Nummer %d." % (prefix, k)))
    return pairs


class Fixture:
    """A folder with the five archives, holding the given training pairs."""

    def __init__(self, root, train=None, dev_n=3000, test_n=3003):
        self.root = root
        self.downloads = os.path.join(root, "downloads")
        os.makedirs(self.downloads)
        train = [(e, d) for e, d, _ in TRAIN_PAIRS] if train is None else train
        # Europarl gets the test pairs; the other two sources one pair each.
        euro, cc, nc = train, [("Common crawl text.", "Text aus dem Netz.")], \
            [("News commentary.", "Nachrichtenkommentar.")]
        self.write("training-parallel-europarl-v7.tgz", {
            "training/europarl-v7.de-en.en": _text(e for e, _ in euro),
            "training/europarl-v7.de-en.de": _text(d for _, d in euro)})
        self.write("training-parallel-commoncrawl.tgz", {
            "commoncrawl.de-en.en": _text(e for e, _ in cc),
            "commoncrawl.de-en.de": _text(d for _, d in cc),
            "commoncrawl.fr-en.en": b"ignored\n"})
        self.write("training-parallel-nc-v9.tgz", {
            "training/news-commentary-v9.de-en.en": _text(e for e, _ in nc),
            "training/news-commentary-v9.de-en.de": _text(d for _, d in nc)})
        self.dev = _eval_pairs(dev_n, "Dev")
        self.write("dev.tgz", {
            "dev/newstest2013.en": _text(e for e, _ in self.dev),
            "dev/newstest2013.de": _text(d for _, d in self.dev),
            "dev/newstest2012.en": b"ignored\n"})
        self.test = _eval_pairs(test_n, "Test")
        half = len(self.test) // 2
        docs = [("1012-bbc", self.test[:half]), ("1017-cnn", self.test[half:])]
        self.write("test-full.tgz", {
            "test-full/newstest2014-deen-src.en.sgm": _sgm("newstest2014", "en", docs, 0),
            "test-full/newstest2014-deen-ref.de.sgm": _sgm("newstest2014", "de", docs, 1)})

    def write(self, name, members):
        _tgz(os.path.join(self.downloads, name), members)


def _read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8").split("\n")[:-1]


class SgmlTest(unittest.TestCase):
    SRC = ('<srcset setid="t" srclang="any">\n<doc docid="a" genre="news">\n'
           '<seg id="1">Fish &amp; chips &quot;cost&quot; &lt;5 &#8364;</seg>\n'
           '<seg id=2>Second</seg>\n</doc>\n<doc docid="b">\n<seg id="1">Third</seg>\n</doc>\n</srcset>\n')

    def test_entities_and_order(self):
        segs = sgml.read_segments(self.SRC, "s.sgm")
        self.assertEqual(segs, [(("a", "1"), 'Fish & chips "cost" <5 €'),
                                (("a", "2"), "Second"), (("b", "1"), "Third")])

    def test_ids_must_match(self):
        ref = self.SRC.replace('<seg id=2>', '<seg id="3">')
        with self.assertRaises(Wmt14Error) as c:
            sgml.aligned_pair(self.SRC, "src.sgm", ref, "ref.sgm")
        self.assertEqual(str(c.exception),
                         "segment 2 is doc a seg 2 in src.sgm but doc a seg 3 in ref.sgm")

    def test_counts_must_match(self):
        ref = self.SRC.replace('<seg id="1">Third</seg>\n', "")
        with self.assertRaises(Wmt14Error) as c:
            sgml.aligned_pair(self.SRC, "src.sgm", ref, "ref.sgm")
        self.assertEqual(str(c.exception), "src.sgm has 3 segments but ref.sgm has 2")

    def test_malformed(self):
        with self.assertRaisesRegex(Wmt14Error, r"^x\.sgm: the <seg> element at character 0 is outside a <doc>$"):
            sgml.read_segments('<seg id="1">a</seg>', "x.sgm")
        with self.assertRaisesRegex(Wmt14Error, r"^x\.sgm holds no <seg> element$"):
            sgml.read_segments("<srcset></srcset>", "x.sgm")


class BuildTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="wmt14_test_")
        self.out = os.path.join(self.tmp, "out")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def build(self, fx):
        log = []
        sums, stats = build_wmt14.build(self.out, downloads=fx.downloads, download=False, log=log.append)
        return sums, stats, log

    def test_end_to_end(self):
        fx = Fixture(self.tmp)
        sums, stats, log = self.build(fx)
        # Train: exactly what the shared textclean functions keep, in source order.
        expected = []
        for en, de in [(e, d) for e, d, _ in TRAIN_PAIRS] + [("Common crawl text.", "Text aus dem Netz."),
                                                             ("News commentary.", "Nachrichtenkommentar.")]:
            c = textclean.clean_pair(en, de, accelerators=False, markup=False, balance_placeholders=False)
            if c is not None and textclean.sentence_like(*c):
                expected.append(c)
        self.assertEqual(list(zip(_read(os.path.join(self.out, "train.en")),
                                  _read(os.path.join(self.out, "train.de")))), expected)
        self.assertEqual(len(expected), sum(k for _, _, k in TRAIN_PAIRS) + 2)
        self.assertIn(("It cost $1 billion.", "Es kostete 1 Milliarde Dollar."), expected)
        self.assertIn(("A line with a line separator.", "Eine Zeile mit Zeilentrenner."), expected)
        self.assertEqual(stats["europarl-v7"], {"raw": len(TRAIN_PAIRS), "not_utf8": 0,
                                               "clean": 6, "sentence_like": 4})
        # Dev and test: every line, in order, only whitespace-normalised.
        for split, pairs, n in (("dev", fx.dev, 3000), ("test", fx.test, 3003)):
            en, de = _read(os.path.join(self.out, split + ".en")), _read(os.path.join(self.out, split + ".de"))
            self.assertEqual(len(en), n)
            self.assertEqual(len(de), n)
            self.assertEqual(list(zip(en, de)), [(textclean.normalise_ws(e), textclean.normalise_ws(d))
                                                 for e, d in pairs])
            self.assertEqual(en[3], " ".join(["word"] * 100))      # too long for train, kept here
            self.assertEqual(de[0], "identical")
        self.assertEqual(_read(os.path.join(self.out, "test.en"))[4], 'Tom & "Jerry" <3')
        self.assertFalse([line for line in log if "note:" in line])
        # SHA256SUMS lists the six files' real hashes.
        for line in _read(os.path.join(self.out, "SHA256SUMS")):
            digest, name = line.split("  ")
            with open(os.path.join(self.out, name), "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), digest, name)

    def test_rerun_is_byte_identical_and_reuses_extraction(self):
        fx = Fixture(self.tmp, dev_n=10, test_n=10)
        sums1, _, log1 = self.build(fx)
        sums2, _, log2 = self.build(fx)
        self.assertEqual(sums1, sums2)
        self.assertTrue(any(line.startswith("  extracting ") for line in log1))
        self.assertFalse(any(line.startswith("  extracting ") for line in log2))
        self.assertTrue(any("note: test has 10 lines; the published set has 3003" in line for line in log1))

    def test_invalid_utf8_training_pair_is_dropped_and_counted(self):
        fx = Fixture(self.tmp, dev_n=5, test_n=5)
        fx.write("training-parallel-europarl-v7.tgz", {
            "training/europarl-v7.de-en.en": b"Good line.\nBad \xff line.\n",
            "training/europarl-v7.de-en.de": b"Gute Zeile.\nSchlechte Zeile.\n"})
        _, stats, _ = self.build(fx)
        self.assertEqual(stats["europarl-v7"]["not_utf8"], 1)
        self.assertEqual(_read(os.path.join(self.out, "train.en"))[0], "Good line.")

    def error_of(self, fx):
        with self.assertRaises(Wmt14Error) as c:
            self.build(fx)
        msg = str(c.exception)
        self.assertNotIn("\n", msg)
        return msg

    def test_missing_member_names_archive_and_member(self):
        fx = Fixture(self.tmp, dev_n=5, test_n=5)
        fx.write("training-parallel-nc-v9.tgz", {"training/news-commentary-v9.cs-en.en": b"x\n"})
        path = os.path.join(fx.downloads, "training-parallel-nc-v9.tgz")
        self.assertEqual(self.error_of(fx), "the archive %s (from %s) has no member named "
                         "news-commentary-v9.de-en.en" % (path, build_wmt14.NEWS_COMMENTARY.url))

    def test_corrupt_archive_names_file_and_url(self):
        fx = Fixture(self.tmp, dev_n=5, test_n=5)
        path = os.path.join(fx.downloads, "dev.tgz")
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[:len(data) // 2])         # a truncated download
        msg = self.error_of(fx)
        self.assertTrue(msg.startswith("the archive %s is corrupt or truncated (downloaded from %s"
                                       % (path, build_wmt14.DEV.url)), msg)

    def test_missing_archive_names_file_and_url(self):
        fx = Fixture(self.tmp, dev_n=5, test_n=5)
        path = os.path.join(fx.downloads, "test-full.tgz")
        os.remove(path)
        self.assertEqual(self.error_of(fx), "the archive %s is missing; download it from %s"
                         % (path, build_wmt14.TEST_FULL.url))

    def test_mismatched_line_counts_name_both_files(self):
        fx = Fixture(self.tmp, dev_n=5, test_n=5)
        fx.write("training-parallel-commoncrawl.tgz", {
            "commoncrawl.de-en.en": b"One.\nTwo.\nThree.\n",
            "commoncrawl.de-en.de": b"Eins.\nZwei.\n"})
        ext = os.path.join(self.out, "extracted")
        self.assertEqual(self.error_of(fx), "%s has more lines than %s (which ends after line 2)"
                         % (os.path.join(ext, "commoncrawl.de-en.en"), os.path.join(ext, "commoncrawl.de-en.de")))

    def test_invalid_utf8_in_dev_names_file_and_line(self):
        fx = Fixture(self.tmp, dev_n=5, test_n=5)
        fx.write("dev.tgz", {"dev/newstest2013.en": b"a\nb\xfe\n", "dev/newstest2013.de": b"c\nd\n"})
        self.assertEqual(self.error_of(fx), "%s line 2 is not valid UTF-8 (byte 2)"
                         % os.path.join(self.out, "extracted", "newstest2013.en"))

    def test_main_prints_one_error_line_and_exits_1(self):
        fx = Fixture(self.tmp, dev_n=5, test_n=5)
        os.remove(os.path.join(fx.downloads, "dev.tgz"))
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = build_wmt14.main(["--out", self.out, "--from-dir", fx.downloads])
        self.assertEqual(rc, 1)
        self.assertEqual(err.getvalue().count("\n"), 1)
        self.assertTrue(err.getvalue().startswith("error: the archive "), err.getvalue())


class FetchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="wmt14_fetch_")
        self.path = os.path.join(self.tmp, "dev.tgz")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_remote_size_takes_the_last_length_after_redirects(self):
        headers = (b"HTTP/1.1 301 Moved\r\nContent-Length: 231\r\nLocation: x\r\n\r\n"
                   b"HTTP/1.1 200 OK\r\ncontent-length: 12345\r\n\r\n")
        done = subprocess.CompletedProcess([], 0, headers, b"")
        with mock.patch.object(fetch.subprocess, "run", return_value=done):
            self.assertEqual(fetch.remote_size("curl", "http://x/dev.tgz"), 12345)
        with mock.patch.object(fetch.subprocess, "run", return_value=subprocess.CompletedProcess([], 0, b"", headers)):
            self.assertEqual(fetch.remote_size("wget", "http://x/dev.tgz"), 12345)
        with mock.patch.object(fetch.subprocess, "run", return_value=subprocess.CompletedProcess([], 6, b"", b"")):
            self.assertIsNone(fetch.remote_size("curl", "http://x/dev.tgz"))

    def test_present_with_the_right_size_is_not_downloaded(self):
        _tgz(self.path, {"a": b"x"})
        size = os.path.getsize(self.path)
        with mock.patch.object(fetch, "remote_size", return_value=size), \
                mock.patch.object(fetch.subprocess, "run") as run:
            fetch.download("http://x/dev.tgz", self.path, "curl", log=lambda s: None)
        run.assert_not_called()

    def test_partial_download_resumes_then_is_verified_and_renamed(self):
        _tgz(self.path + ".src", {"a": b"x" * 1000})
        with open(self.path + ".src", "rb") as f:
            full = f.read()
        with open(self.path + ".part", "wb") as f:
            f.write(full[:10])

        def fake_curl(cmd, **kw):
            self.assertEqual(cmd[cmd.index("-C") + 1], "-")        # continue, not restart
            with open(cmd[cmd.index("-o") + 1], "ab") as f:
                f.write(full[10:])
            return subprocess.CompletedProcess(cmd, 0)
        with mock.patch.object(fetch, "remote_size", return_value=len(full)), \
                mock.patch.object(fetch.subprocess, "run", side_effect=fake_curl):
            fetch.download("http://x/dev.tgz", self.path, "curl", log=lambda s: None)
        self.assertFalse(os.path.exists(self.path + ".part"))
        self.assertEqual(fetch.verify_archive(self.path), {"a": 1000})

    def test_failed_download_names_url_and_file(self):
        with mock.patch.object(fetch, "remote_size", return_value=None), \
                mock.patch.object(fetch.subprocess, "run", return_value=subprocess.CompletedProcess([], 22)):
            with self.assertRaises(Wmt14Error) as c:
                fetch.download("http://x/dev.tgz", self.path, "curl", log=lambda s: None)
        self.assertEqual(str(c.exception), "downloading http://x/dev.tgz failed (curl exit status 22); "
                         "run again to retry, resuming from %s.part" % self.path)

    def test_corrupt_download_is_removed_and_named(self):
        def fake_wget(cmd, **kw):
            with open(cmd[cmd.index("-O") + 1], "wb") as f:
                f.write(b"<html>not found</html>")
            return subprocess.CompletedProcess(cmd, 0)
        with mock.patch.object(fetch, "remote_size", return_value=None), \
                mock.patch.object(fetch.subprocess, "run", side_effect=fake_wget):
            with self.assertRaisesRegex(Wmt14Error, r"dev\.tgz\.part is corrupt or truncated \(downloaded "
                                                    r"from http://x/dev\.tgz"):
                fetch.download("http://x/dev.tgz", self.path, "wget", log=lambda s: None)
        self.assertFalse(os.path.exists(self.path + ".part"))


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder with Content-Length and "Range: bytes=N-" (resume) support."""

    def send_head(self):
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            self.send_error(404)
            return None
        size = os.path.getsize(path)
        m = re.match(r"bytes=(\d+)-$", self.headers.get("Range", ""))
        start = int(m.group(1)) if m else 0
        if start >= size > 0:
            self.send_response(416)
            self.send_header("Content-Range", "bytes */%d" % size)
            self.end_headers()
            return None
        f = open(path, "rb")
        f.seek(start)
        self.send_response(206 if m else 200)
        if m:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
        self.send_header("Content-Length", str(size - start))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        return f

    def log_message(self, *args):
        pass


class LoopbackDownloadTest(unittest.TestCase):
    """The real curl and wget command lines against a server on 127.0.0.1."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="wmt14_http_")
        self.served = os.path.join(self.tmp, "served")
        os.makedirs(self.served)
        _tgz(os.path.join(self.served, "dev.tgz"), {"dev/newstest2013.en": os.urandom(200000)})
        with open(os.path.join(self.served, "dev.tgz"), "rb") as f:
            self.full = f.read()

        def handler(*args, **kw):
            return _RangeHandler(*args, directory=self.served, **kw)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = "http://127.0.0.1:%d/" % self.server.server_address[1]

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.tmp)

    def check_tool(self, tool):
        if not shutil.which(tool):
            self.skipTest("%s is not installed" % tool)
        self.assertEqual(fetch.remote_size(tool, self.base + "dev.tgz"), len(self.full))
        self.assertIsNone(fetch.remote_size(tool, self.base + "missing.tgz"))
        path = os.path.join(self.tmp, tool, "dev.tgz")
        os.makedirs(os.path.dirname(path))
        with open(path + ".part", "wb") as f:
            f.write(self.full[:70000])              # an interrupted download
        with mock.patch.object(fetch.subprocess, "run", wraps=_quiet_run):
            fetch.download(self.base + "dev.tgz", path, tool, log=lambda s: None)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), self.full)
        self.assertFalse(os.path.exists(path + ".part"))
        with self.assertRaisesRegex(Wmt14Error, r"^downloading %smissing\.tgz failed \(%s exit status \d+\)"
                                    % (re.escape(self.base), tool)):
            with mock.patch.object(fetch.subprocess, "run", wraps=_quiet_run):
                fetch.download(self.base + "missing.tgz", os.path.join(self.tmp, tool, "missing.tgz"), tool,
                               log=lambda s: None)

    def test_curl_resumes(self):
        self.check_tool("curl")

    def test_wget_resumes(self):
        self.check_tool("wget")


_real_run = subprocess.run


def _quiet_run(cmd, **kw):
    """subprocess.run with the download tools' progress output discarded."""
    kw.setdefault("stdout", subprocess.DEVNULL)
    kw.setdefault("stderr", subprocess.DEVNULL)
    return _real_run(cmd, **kw)


class WrapperTest(unittest.TestCase):
    def test_help(self):
        script = os.path.join(os.path.dirname(HERE), "prepare_wmt14_en_de.sh")
        r = subprocess.run(["bash", script, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"--from-dir DIR", r.stdout)


if __name__ == "__main__":
    unittest.main()
