"""Unit tests of the local English-German corpus builder (stdlib unittest).

Run from the repository root:
    python3 -m unittest discover -s data/local_en_de -p 'test_*.py' -v

Everything runs on tiny synthetic inputs written by the tests themselves
(.mo files, HTML pages, Ding lines, Translation indexes); no network, no apt.
"""

import gettext
import io
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import aptfetch          # noqa: E402
import build_corpus      # noqa: E402
import corpus_sources as cs  # noqa: E402
import debdesc           # noqa: E402
import ding              # noqa: E402
import licences          # noqa: E402
import lohelp            # noqa: E402
import mofile            # noqa: E402
import textclean         # noqa: E402


class MoFileTest(unittest.TestCase):
    def test_roundtrip_utf8_plural_context(self):
        data = mofile.write_mo([
            ("Open", "Öffnen"),
            ("menu\x04File", "Datei"),
            ("%d file\x00%d files", "%d Datei\x00%d Dateien"),
            ("Untranslated", ""),
        ])
        pairs = mofile.read_mo_pairs(data)
        self.assertEqual(sorted(pairs), sorted([
            ("Open", "Öffnen"),
            ("File", "Datei"),            # msgctxt dropped
            ("%d file", "%d Datei"),       # singular with msgstr[0]
        ]))

    def test_writer_is_a_valid_mo_for_the_stdlib(self):
        data = mofile.write_mo([("Open", "Öffnen")])
        t = gettext.GNUTranslations(io.BytesIO(data))
        self.assertEqual(t.gettext("Open"), "Öffnen")

    def test_charset_from_header(self):
        data = mofile.write_mo([("Size", "Größe")], charset="ISO-8859-1")
        self.assertIn("Gr\xf6\xdfe".encode("latin-1"), data)
        self.assertEqual(mofile.read_mo_pairs(data), [("Size", "Größe")])

    def test_fallback_utf8_then_latin1_without_header(self):
        utf8 = mofile.write_mo([("Size", "Größe")], charset="utf-8", header=False)
        self.assertEqual(mofile.read_mo_pairs(utf8), [("Size", "Größe")])
        latin = mofile.write_mo([("Size", "Größe")], charset="latin-1", header=False)
        self.assertEqual(mofile.read_mo_pairs(latin), [("Size", "Größe")])

    def test_bad_file(self):
        with self.assertRaises(mofile.MoError):
            mofile.read_mo_pairs(b"not a mo file at all")


class CleanTest(unittest.TestCase):
    def test_accelerators(self):
        c = textclean.clean_pair
        self.assertEqual(c("_First", "_Erster"), ("First", "Erster"))
        self.assertEqual(c("Page _width:", "Seiten_breite:"), ("Page width:", "Seitenbreite:"))
        self.assertEqual(c("&Help", "&Hilfe"), ("Help", "Hilfe"))
        self.assertEqual(c("~File", "~Datei"), ("File", "Datei"))
        self.assertEqual(c("De~fault", "Stan~dard"), ("Default", "Standard"))
        self.assertEqual(c("Cut && paste", "Ausschneiden && einfügen"),
                         ("Cut & paste", "Ausschneiden & einfügen"))

    def test_identifiers_are_not_accelerators(self):
        self.assertEqual(
            textclean.clean_pair("invalid #pragma push_macro directive",
                                 "ungültige #pragma push_macro Direktive"),
            ("invalid #pragma push_macro directive", "ungültige #pragma push_macro Direktive"))
        self.assertEqual(textclean.clean_pair("set SCHED_DEADLINE", "SCHED_DEADLINE setzen"),
                         ("set SCHED_DEADLINE", "SCHED_DEADLINE setzen"))
        self.assertEqual(textclean.clean_pair("Go to ~/docs", "Gehe zu ~/docs"),
                         ("Go to ~/docs", "Gehe zu ~/docs"))

    def test_markup_and_entities(self):
        self.assertEqual(
            textclean.clean_pair("<b>Bold</b> text &amp; more", "<b>Fetter</b> Text &amp; mehr"),
            ("Bold text & more", "Fetter Text & mehr"))
        # <file> is a placeholder, not a tag
        self.assertEqual(textclean.clean_pair("Usage: %s <file>", "Aufruf: %s <Datei>"),
                         ("Usage: %s <file>", "Aufruf: %s <Datei>"))
        self.assertEqual(textclean.clean_pair("Keys (Ctrl+&lt;key&gt;)", "Tasten (Strg+&lt;Taste&gt;)"),
                         ("Keys (Ctrl+<key>)", "Tasten (Strg+<Taste>)"))

    def test_whitespace(self):
        self.assertEqual(textclean.normalise_ws("  a\n\tb\u00a0c\u00add  "), "a b cd")
        # NFC: a decomposed umlaut becomes one code point
        self.assertEqual(textclean.normalise_ws("Gro\u0308sse"), "Grösse")

    def test_drops(self):
        c = textclean.clean_pair
        self.assertIsNone(c("", "Leer"))
        self.assertIsNone(c("OK", "ok"))                 # identical
        self.assertIsNone(c("%s: %d", "%s: %d."))         # placeholders only
        self.assertIsNone(c("%s files", "Dateien"))       # unbalanced
        self.assertIsNone(c("<b></b>", "<b> </b>"))       # empty after markup
        self.assertIsNotNone(c("%s: %d files", "%2$d Dateien: %1$s"))  # reordered is fine
        self.assertIsNotNone(c("100% done", "100 % fertig"))

    def test_placeholders(self):
        p = textclean.placeholders
        self.assertEqual(p("%1$s and %2$d, 50%% off"), ["%d", "%s"])
        self.assertEqual(p("%qs in %<foo%>"), ["%qs"])
        self.assertEqual(p("{0} of {count} at %(name)s"), ["%(name)s", "{0}", "{count}"])
        self.assertEqual(p("%PRODUCTNAME and $1"), ["$1", "%PRODUCTNAME"])

    def test_sentence_like(self):
        s = textclean.sentence_like
        self.assertTrue(s("File", "Datei"))
        self.assertFalse(s(" ".join(["word"] * 81), " ".join(["Wort"] * 81)))
        self.assertFalse(s("A fairly long English sentence here.", "Ja."))   # ratio
        self.assertTrue(s("Yes", "Jawohl, gerne"))   # short strings: no ratio test


HELP_EN = """<html><head><title>T</title><script>var x = "<p id='par_id9'>no</p>";</script></head>
<body><h1 id="hd_id1"><a name="x"></a>Deleting Tables</h1>
<p id="par_id2" class="paragraph">Press <span class="switchinline"><span hidden="true" id="MACtext_1" class="MAC">Command
</span><span hidden="true" id="defaulttext_1">Ctrl</span></span>+A and <b>Delete</b>.</p>
<p id="par_id3" class="code">Sub Main</p>
<p id="par_id4" class="paragraph">Only in English.</p>
<p id="par_id5" class="paragraph">First copy.</p><p id="par_id5" class="paragraph">Second copy.</p>
<p id="bm_module"></p><img src="x.png" alt="Icon"><br>
</body></html>"""
HELP_DE = """<html><head><title>T</title></head>
<body><h1 id="hd_id1"><a name="x"></a>Tabellen löschen</h1>
<p id="par_id2" class="paragraph">Drücken Sie <span class="switchinline"><span hidden="true" id="MACtext_1" class="MAC">Befehl</span><span hidden="true" id="defaulttext_1">Strg</span></span>+A und <b>Entf</b>.</p>
<p id="par_id3" class="code">Sub Main</p>
<p id="par_id5" class="paragraph">Erste Kopie.</p><p id="par_id5" class="paragraph">Zweite Kopie.</p>
</body></html>"""


class HelpTest(unittest.TestCase):
    def test_pairs_by_id(self):
        pairs = lohelp.pair_pages(HELP_EN, HELP_DE)
        got = {(i, n): (textclean.normalise_ws(e), textclean.normalise_ws(d)) for i, n, e, d in pairs}
        self.assertEqual(got, {
            ("hd_id1", 0): ("Deleting Tables", "Tabellen löschen"),
            ("par_id2", 0): ("Press Ctrl+A and Delete.", "Drücken Sie Strg+A und Entf."),
            ("par_id5", 0): ("First copy.", "Erste Kopie."),
            ("par_id5", 1): ("Second copy.", "Zweite Kopie."),
        })

    def test_tree_pairing(self):
        with tempfile.TemporaryDirectory() as tmp:
            for lang, text in (("en", HELP_EN), ("de", HELP_DE)):
                os.makedirs(os.path.join(tmp, lang, "text", "a"))
                with open(os.path.join(tmp, lang, "text", "a", "p.html"), "w", encoding="utf-8") as f:
                    f.write(text)
            with open(os.path.join(tmp, "en", "only_en.html"), "w") as f:
                f.write(HELP_EN)
            rows = list(lohelp.help_pairs(os.path.join(tmp, "en"), os.path.join(tmp, "de")))
            self.assertEqual([(r[0], r[1]) for r in rows], [
                (os.path.join("text", "a", "p.html"), "hd_id1"),
                (os.path.join("text", "a", "p.html"), "par_id2"),
                (os.path.join("text", "a", "p.html"), "par_id5"),
                (os.path.join("text", "a", "p.html"), "par_id5#1"),
            ])


class DingTest(unittest.TestCase):
    def test_example_sentences(self):
        line = ("Abendessen {n} | Abendbrot essen | Das Abendessen hat mir geschmeckt. :: "
                "supper | to have supper | I enjoyed my supper.\n")
        self.assertEqual(ding.line_pairs(line),
                         [("I enjoyed my supper.", "Das Abendessen hat mir geschmeckt.")])

    def test_rules(self):
        lp = ding.line_pairs
        self.assertEqual(lp("# comment :: x"), [])
        self.assertEqual(lp("Halt! :: Stop!"), [])                       # < 3 English words
        self.assertEqual(lp("a | Geh weg! :: a"), [])                    # sub-entry counts differ
        self.assertEqual(lp("Komm her! [ugs.] :: Come over here! [coll.]"),
                         [("Come over here!", "Komm her!")])             # annotations removed
        self.assertEqual(lp("Wie geht's?; Wie geht es dir? :: How are you?; How is it going?"),
                         [("How are you?", "Wie geht's?"), ("How is it going?", "Wie geht es dir?")])
        self.assertEqual(lp("Ich kam; ich sah. :: I came; I saw it."),
                         [("I came; I saw it.", "Ich kam; ich sah.")])
        self.assertEqual(lp("Ja. :: Yes, it is.; Sure it is."), [])      # alternatives mismatch


TRANS_EN = """Package: foo
Description-md5: 11111111111111111111111111111111
Description-en: tool to frobnicate files
 Foo frobnicates files quickly.
 It is very fast.
 .
 Features:
  * speed
  * safety

Package: bar
Description-md5: 22222222222222222222222222222222
Description-en: bar library
 First paragraph.
 .
 Second paragraph.

Package: only-en
Description-md5: 33333333333333333333333333333333
Description-en: not translated
"""
TRANS_DE = """Package: foo
Description-md5: 11111111111111111111111111111111
Description-de: Werkzeug zum Frobnizieren von Dateien
 Foo frobniziert Dateien schnell.
 Es ist sehr schnell.
 .
 Funktionen:
  * Geschwindigkeit
  * Sicherheit

Package: bar
Description-md5: 22222222222222222222222222222222
Description-de: Bar-Bibliothek
 Ein einziger Absatz.
"""


class DescriptionsTest(unittest.TestCase):
    def test_pairs(self):
        got = list(debdesc.description_pairs(TRANS_EN, TRANS_DE))
        self.assertEqual(got, [
            ("11111111111111111111111111111111", "short",
             "tool to frobnicate files", "Werkzeug zum Frobnizieren von Dateien"),
            ("11111111111111111111111111111111", "p1.1",
             "Foo frobnicates files quickly. It is very fast.",
             "Foo frobniziert Dateien schnell. Es ist sehr schnell."),
            ("11111111111111111111111111111111", "p2.1", "Features:", "Funktionen:"),
            ("11111111111111111111111111111111", "p2.2", "speed", "Geschwindigkeit"),
            ("11111111111111111111111111111111", "p2.3", "safety", "Sicherheit"),
            # bar: paragraph counts differ (2 vs 1), so only the short description
            ("22222222222222222222222222222222", "short", "bar library", "Bar-Bibliothek"),
        ])


class LicenceTest(unittest.TestCase):
    def test_dep5(self):
        text = ("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
                "Files: *\nCopyright: x\nLicense: GPL-3+\n\n"
                "Files: lib/*\nCopyright: y\nLicense: LGPL-2.1+\n\n"
                "License: GPL-3+\n text\n")
        self.assertEqual(licences.licences_of(text), (["GPL-3+", "LGPL-2.1+"], True))

    def test_freeform(self):
        text = ("This is free software; you can redistribute it under the terms of the GNU "
                "General Public License as published by the Free Software Foundation; either "
                "version 2 of the License, or (at your option) any later version.\n")
        self.assertEqual(licences.licences_of(text), (["GPL-2+"], False))


class AptErrorsTest(unittest.TestCase):
    def _fake(self, rc, stdout="", stderr=""):
        return subprocess.CompletedProcess([], rc, stdout, stderr)

    def test_unknown_package_is_named(self):
        with mock.patch.object(aptfetch, "_run", return_value=self._fake(
                100, stderr="E: Unable to locate package no-such-pkg\n")):
            with self.assertRaises(aptfetch.FetchError) as e:
                aptfetch.print_uris("/dev/null", ["git", "no-such-pkg"])
        self.assertIn("'no-such-pkg'", str(e.exception))

    def test_uri_parsing(self):
        out = ("'http://deb.debian.org/debian/pool/main/g/git/git_1%3a2.39.5_amd64.deb' "
               "git_1%3a2.39.5_amd64.deb 7264380 SHA256:abcd\n")
        with mock.patch.object(aptfetch, "_run", return_value=self._fake(0, stdout=out)):
            got = aptfetch.print_uris("/dev/null", ["git"])
        self.assertEqual(got["git"][1:], ("git_1%3a2.39.5_amd64.deb", 7264380, "SHA256:abcd"))

    def test_missing_tool_is_named(self):
        with mock.patch.object(aptfetch.shutil, "which", return_value=None):
            with self.assertRaises(aptfetch.FetchError) as e:
                aptfetch.need_tool("dpkg-deb")
        self.assertIn("'dpkg-deb'", str(e.exception))

    @unittest.skipUnless(os.path.exists(aptfetch.KEYRING), "no Debian keyring here")
    def test_private_config_stays_in_work(self):
        with tempfile.TemporaryDirectory() as tmp:
            conf = aptfetch.write_apt_config(tmp)
            with open(conf) as f:
                text = f.read()
            self.assertIn('Acquire::Languages { "en"; "de"; };', text)
            for line in text.splitlines():
                if line.startswith("Dir::") and "status" not in line and '""' not in line:
                    self.assertIn(tmp, line)
            self.assertEqual(os.listdir(os.path.join(tmp, "apt", "parts")), [])


def make_fake_work(work):
    """A work folder with tiny unpacked 'packages' and Translation indexes."""
    pkgs = os.path.join(work, "pkgs")

    def put(path, data):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode("utf-8"))

    for i, pkg in enumerate(cs.GETTEXT_PACKAGES):
        entries = [("Open file %d" % i, "Datei %d öffnen" % i),
                   ("_Quit", "_Beenden"),                   # same pair in every package
                   ("Cancel", "Abbrechen" if i % 2 else "Abbruch")]
        put(os.path.join(pkgs, pkg, "usr/share/locale/de/LC_MESSAGES/%s.mo" % pkg),
            mofile.write_mo(entries))
        put(os.path.join(pkgs, pkg, "usr/share/locale/fr/LC_MESSAGES/%s.mo" % pkg),
            mofile.write_mo([("Open", "Ouvrir")]))        # not German: ignored
        put(os.path.join(pkgs, pkg + ".stamp"), "%s_1.0_all.deb\n" % pkg)
    put(os.path.join(pkgs, "git/usr/share/doc/git/copyright"),
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
        "Files: *\nCopyright: x\nLicense: GPL-2\n")
    put(os.path.join(pkgs, cs.LIBREOFFICE_UI_PACKAGE, cs.LIBREOFFICE_UI_DIR, "sw.mo"),
        mofile.write_mo([("STR_A\x04~Save Document", "Dokument ~speichern"),
                         ("STR_B\x04Insert <b>Table</b>", "Tabelle <b>einfügen</b>")]))
    put(os.path.join(pkgs, cs.GCC_PACKAGE, "usr/share/locale/de/LC_MESSAGES/gcc-12.mo"),
        mofile.write_mo([("%qs is deprecated", "%qs ist veraltet"),
                         ("%qs is unused", "ist unbenutzt")]))  # unbalanced: dropped
    for pkg, d, text in ((cs.HELP_EN_PACKAGE, cs.HELP_EN_DIR, HELP_EN),
                         (cs.HELP_DE_PACKAGE, cs.HELP_DE_DIR, HELP_DE)):
        put(os.path.join(pkgs, pkg, d, "text/shared/a.html"), text)
    put(os.path.join(pkgs, cs.DING_PACKAGE, cs.DING_FILE),
        "# Version :: test\n"
        "Abendessen {n} | Das Abendessen hat mir geschmeckt. :: supper | I enjoyed my supper.\n"
        "Wie geht's? :: How are you doing?\n")
    lists = os.path.join(work, "apt", "lists")
    put(os.path.join(lists, "x_debian_dists_bookworm_main_i18n_Translation-en"), TRANS_EN)
    put(os.path.join(lists, "x_debian_dists_bookworm_main_i18n_Translation-de"), TRANS_DE)


class BuildTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def _build(self, name, sources=None):
        work = os.path.join(self.tmp, name)
        make_fake_work(work)
        build_corpus.build(work, sources or list(cs.SOURCE_NAMES), fetch=False, log=lambda *a: None)
        return work

    def _read(self, work, fn):
        with open(os.path.join(work, fn), "rb") as f:
            return f.read()

    def test_outputs_and_split_rules(self):
        work = self._build("a")
        en = {}
        total = 0
        for split in ("train", "dev", "test"):
            e = self._read(work, split + ".en").decode("utf-8").splitlines()
            d = self._read(work, split + ".de").decode("utf-8").splitlines()
            self.assertEqual(len(e), len(d))
            total += len(e)
            for s in e:
                en.setdefault(s, set()).add(split)
            if split != "train":
                self.assertEqual(len(e), len(set(e)))     # one reference per sentence
        self.assertTrue(all(len(v) == 1 for v in en.values()))   # never in two splits
        self.assertIn("Quit", en)
        self.assertIn("Save Document", en)
        self.assertIn("Insert Table", en)
        self.assertIn("Press Ctrl+A and Delete.", en)
        self.assertIn("I enjoyed my supper.", en)
        self.assertIn("Features:", en)
        self.assertNotIn("%qs is unused", en)
        self.assertNotIn("Open", en)                   # French catalogue ignored
        tsv = self._read(work, "sources.tsv").decode("utf-8").splitlines()
        self.assertEqual(tsv[0], "split\tline\tsource\torigin")
        self.assertEqual(len(tsv) - 1, total)
        # "Cancel" has two German versions; both kept if it landed in train
        cancel = [r for r in tsv[1:] if r.split("\t")[0] == next(iter(en["Cancel"]))]
        self.assertTrue(cancel)
        lic = self._read(work, "LICENSES.md").decode("utf-8")
        self.assertIn("| gettext | git | 1.0 | GPL-2 | GPL-2 |", lic)
        sums = self._read(work, "SHA256SUMS").decode("ascii").splitlines()
        self.assertEqual([s.split()[1] for s in sums], build_corpus.TEXT_FILES)

    def test_deterministic_bytes(self):
        a = self._build("a")
        b = self._build("b")
        for fn in build_corpus.TEXT_FILES + ["sources.tsv", "LICENSES.md", "SHA256SUMS"]:
            self.assertEqual(self._read(a, fn), self._read(b, fn), fn)

    def test_deterministic_across_hash_seeds(self):
        outs = []
        for seed in ("1", "2"):
            work = os.path.join(self.tmp, "seed" + seed)
            make_fake_work(work)
            env = dict(os.environ, PYTHONHASHSEED=seed)
            r = subprocess.run([sys.executable, os.path.join(HERE, "build_corpus.py"),
                                "--no-fetch", "--out", work],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("combined checksum", r.stdout)
            outs.append([self._read(work, f) for f in build_corpus.TEXT_FILES + ["sources.tsv"]])
        self.assertEqual(outs[0], outs[1])

    def test_sources_option(self):
        work = self._build("d", sources=["ding"])
        lines = sorted((self._read(work, "train.en") + self._read(work, "dev.en")
                        + self._read(work, "test.en")).decode("utf-8").splitlines())
        self.assertEqual(lines, ["How are you doing?", "I enjoyed my supper."])
        with self.assertRaises(SystemExit):
            with mock.patch("sys.stderr", new=io.StringIO()):
                build_corpus.parse_args(["--sources", "nope"])

    def test_missing_input_names_it(self):
        work = os.path.join(self.tmp, "m")
        make_fake_work(work)
        shutil.rmtree(os.path.join(work, "pkgs", "git"))
        with self.assertRaises(aptfetch.FetchError) as e:
            build_corpus.build(work, ["gettext"], fetch=False, log=lambda *a: None)
        self.assertIn("'git'", str(e.exception))


class SplitTest(unittest.TestCase):
    def test_split_of_is_stable(self):
        self.assertEqual(build_corpus.split_of("Open"), build_corpus.split_of("Open"))
        counts = {"train": 0, "dev": 0, "test": 0}
        for i in range(20000):
            counts[build_corpus.split_of("sentence %d" % i)] += 1
        expect = 20000 * build_corpus.DEV_FRACTION
        self.assertTrue(0.7 * expect < counts["dev"] < 1.3 * expect, counts)
        self.assertTrue(0.7 * expect < counts["test"] < 1.3 * expect, counts)

    def test_dev_keeps_one_reference(self):
        en = next("s%d" % i for i in range(100000) if build_corpus.split_of("s%d" % i) == "dev")
        pairs = {(en, "B"): {"gettext": "x"}, (en, "A"): {"ding": "y"},
                 (en, "C"): {"ding": "z", "gcc": "w"}}
        out = build_corpus.assign_splits(pairs)
        self.assertEqual(out["dev"], [(en, "C", "gcc", "w")])   # most sources agree
        self.assertEqual(out["train"], [])


if __name__ == "__main__":
    unittest.main()
