#!/usr/bin/env python3
"""Regenerates the sacreBLEU golden cases in tests/data/bleu-golden/ from the
sacrebleu 2.6.0 package of the benchmark venv's pins
(tests/bench/python/requirements.txt; not a dependency of cmha or of CI):
that venv (tests/bench/python/make_venv.sh), or one with only what this
script imports, in a git-ignored folder:

    python3 -m venv .venv-sacrebleu
    .venv-sacrebleu/bin/pip install -c tests/bench/python/requirements.txt sacrebleu numpy
    .venv-sacrebleu/bin/python tests/reference/make_metric_golden.py

It writes
  case1.expected.json  BLEU of case1 in four settings (scores rounded as before)
  case1.ref2.de        a perturbed copy of case1.ref.de: the second reference
  case2.hyp, case2.ref, case2.ref2   short edge cases (empty lines, punctuation,
                       entities, Unicode spaces and cases, CJK, long and very
                       unequal lines for TER's beam and shift limits)
  case<N>.metrics.json every metric setting below: sacreBLEU's corpus score
                       (full precision), its sufficient statistics summed over
                       the corpus, its signature; and "cli": sacreBLEU's command
                       lines with their exact standard output.
CI never runs this: the tests only read the files.
"""
import json
import os
import platform
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "data", "bleu-golden")

try:
    import sacrebleu  # noqa: E402
    from sacrebleu.metrics import BLEU, CHRF, TER  # noqa: E402
    from sacrebleu.utils import sum_of_lists  # noqa: E402
except ModuleNotFoundError as e:
    sys.exit(f"cannot import sacrebleu in {sys.executable}: {e} (see the instructions above)")
if sacrebleu.__version__ != "2.6.0":
    sys.exit(f"{sys.executable} has sacrebleu {sacrebleu.__version__}; the golden cases are sacreBLEU 2.6.0's")


def path(name):
    return os.path.join(GOLDEN, name)


def read_segments(name):
    # As sacreBLEU's command line reads a file: '\n'-separated, each line rstripped.
    with open(path(name), encoding="utf-8", newline="\n") as f:
        return [line.rstrip() for line in f]


def write_lines(name, lines):
    with open(path(name), "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            assert "\n" not in line
            f.write(line + "\n")


# --- The second reference of case1: a perturbed copy --------------------------

def perturb(line, rng):
    """A plausible alternative translation: neighbours swapped, a word dropped
    or doubled, a word's case changed, punctuation changed; some lines kept."""
    words = line.split(" ")
    kind = rng.randrange(6)
    if kind == 0 or len(words) < 3:
        return line
    i = rng.randrange(len(words) - 1)
    if kind == 1:
        words[i], words[i + 1] = words[i + 1], words[i]
    elif kind == 2:
        del words[i]
    elif kind == 3:
        words.insert(i, words[i])
    elif kind == 4:
        words[i] = words[i].swapcase()
    else:
        words = [w.replace(",", "").replace(".", "!") for w in words]
    return " ".join(words)


def make_case1_ref2():
    rng = random.Random(2)
    write_lines("case1.ref2.de", [perturb(line, rng) for line in read_segments("case1.ref.de")])


# --- case2: edge cases ----------------------------------------------------------

def long_lines():
    rng = random.Random(7)
    vocab = ("der die das und ist ein eine nicht mit für auf dem den zu von im es sich "
             "Haus Baum Katze Hund läuft schnell über Straße Brücke heute morgen").split()
    ref = [rng.choice(vocab) for _ in range(75)]
    hyp = list(ref)
    # Blocks moved far apart (past TER's shift distance of 50), words replaced.
    hyp = hyp[60:] + hyp[10:60] + hyp[:10]
    for k in range(0, 75, 9):
        hyp[k] = rng.choice(vocab)
    many = [rng.choice(vocab[:4]) for _ in range(60)]  # few types: many shift candidates
    many_hyp = list(many)
    rng.shuffle(many_hyp)
    return " ".join(hyp), " ".join(ref), " ".join(many_hyp), " ".join(many)


def make_case2():
    long_hyp, long_ref, many_hyp, many_ref = long_lines()
    # (hypothesis, reference, second reference)
    rows = [
        ("", "Ein Satz ohne Übersetzung.", "Ein Satz, nicht übersetzt."),
        ("Eine Übersetzung ohne Referenz.", "", "Eine Übersetzung."),
        ("", "", ""),
        ("...", "?!", "..."),
        ("Er sagte &quot;Hallo&quot; &amp; ging &lt;heim&gt;.", "Er sagte \"Hallo\" & ging <heim>.",
         "Er sagte: &quot;Hallo&quot; und ging."),
        ("John's car's wheel is Mary's", "John's car's wheel is Mary's.", "The wheel of John's car's"),
        ("3.14, 1,000 und 2-3 Äpfel; 10-20 Stück.", "3,14, 1.000 und 2-3 Äpfel; 10 - 20 Stück.",
         "Pi ist 3.14 und 1,000 Äpfel."),
        ("ÄÖÜ STRASSE ẞ İstanbul ΟΔΟΣ", "äöü Straße ß istanbul οδος", "Äöü strasse ẞ İSTANBUL Οδός"),
        ("a\u00a0b\u2009c\u200bd\u3000e f\u2028g", "a b c\u200bd e f g", "a\u00a0b c d e"),
        ("我爱北京天安门。", "我爱北京。", "我爱天安门！"),
        ("これはペンです。カタカナ、テスト", "これはペンです。", "ペンです"),
        ("（测试）！ 全角，标点：", "(测试)! 全角, 标点:", "（测试）"),
        (long_hyp, long_ref, long_ref[::-1]),
        ("Wort", long_ref + " " + long_ref, long_ref),
        (many_hyp, many_ref, many_hyp),
        ("the the the the the cat", "the cat the cat the cat", "a cat"),
        ("a\tb c\td", "a b c d", "a\tb"),
        ("THE Cat SAT on THE Mat", "the cat sat on the mat", "The Cat sat on the mat."),
        ("(hi) hi! (hi hi) x", "(hi) hi! hi) (hi x", "hi hi hi hi x"),
        ("E-Mail-Adresse, 3--4 und -x y-", "E-Mail Adresse, 3-4 und x y", "Email-Adresse 3 -- 4"),
        ("It's the cat's", "It is the cat's", "It's the cats"),
        ("Preis: 5€ (ca.) 1995. x.5.y 7,-", "Preis: 5 € (ca.) 1995. x.5.y 7,-", "Preis 5 Euro ca 1995"),
        ("Ein ganz normaler Satz mit einigen Wörtern.", "Ein ganz normaler Satz mit einigen Wörtern.",
         "Ein normaler Satz mit Wörtern."),
        ("Noch ein Satz, der fast stimmt.", "Noch ein Satz, der beinahe stimmt.", "Und noch ein Satz."),
        ("x", "y", "x"),
        ("𝄞 music 𝄞", "𝄞 Musik 𝄞", "music"),
    ]
    write_lines("case2.hyp", [r[0] for r in rows])
    write_lines("case2.ref", [r[1] for r in rows])
    write_lines("case2.ref2", [r[2] for r in rows])


# --- Scoring ----------------------------------------------------------------------

def make_metric(kind, opts):
    return {"bleu": BLEU, "chrf": CHRF, "ter": TER}[kind](**opts)


def score_setting(hyp_file, ref_files, kind, opts, cli_args):
    hyps = read_segments(hyp_file)
    refs = [read_segments(r) for r in ref_files]
    metric = make_metric(kind, opts)
    stats = sum_of_lists(metric._extract_corpus_statistics(hyps, refs))
    score = metric.corpus_score(hyps, refs)
    out = {
        "hyp": hyp_file,
        "refs": ref_files,
        "args": cli_args,
        "name": score.name,
        "score": score.score,
        "signature": metric.get_signature().format(),
    }
    if kind == "bleu":
        # The counts before smoothing (add-k adds k to BLEUScore.counts and .totals).
        order = metric.max_ngram_order
        out.update(sys_len=score.sys_len, ref_len=score.ref_len, counts=[int(x) for x in stats[2:2 + order]],
                   totals=[int(x) for x in stats[2 + order:]], bp=score.bp, verbose=score._verbose)
    elif kind == "chrf":
        out["stats"] = [int(x) for x in stats]  # [hyp, ref, match] per order: chars 1..nc, then words 1..nw
    else:
        out.update(num_edits=stats[0], ref_length=stats[1])
    return out


# Settings: name -> (metric, its constructor options, the equivalent command-line options).
CASE1_SETTINGS = {
    "chrf": ("chrf", {}, ["-m", "chrf"]),
    "chrf_pp": ("chrf", {"word_order": 2}, ["-m", "chrf", "--chrf-word-order", "2"]),
    "chrf_lc_ws": ("chrf", {"lowercase": True, "whitespace": True},
                   ["-m", "chrf", "--chrf-lowercase", "--chrf-whitespace"]),
    "chrf_beta1_eps": ("chrf", {"beta": 1, "char_order": 4, "word_order": 1, "eps_smoothing": True},
                       ["-m", "chrf", "--chrf-beta", "1", "--chrf-char-order", "4", "--chrf-word-order", "1",
                        "--chrf-eps-smoothing"]),
    "ter": ("ter", {}, ["-m", "ter"]),
    "ter_cs": ("ter", {"case_sensitive": True}, ["-m", "ter", "--ter-case-sensitive"]),
    "ter_norm_nopunct": ("ter", {"normalized": True, "no_punct": True},
                         ["-m", "ter", "--ter-normalized", "--ter-no-punct"]),
    "bleu_char": ("bleu", {"tokenize": "char"}, ["-tok", "char"]),
    "bleu_floor": ("bleu", {"smooth_method": "floor", "smooth_value": 0.5}, ["-s", "floor", "-sv", "0.5"]),
}
CASE2_SETTINGS = dict(CASE1_SETTINGS)
CASE2_SETTINGS.update({
    "bleu": ("bleu", {}, ["-m", "bleu"]),
    "bleu_lc_intl": ("bleu", {"lowercase": True, "tokenize": "intl"}, ["-lc", "-tok", "intl"]),
    "bleu_addk": ("bleu", {"smooth_method": "add-k"}, ["-s", "add-k"]),
    "bleu_none": ("bleu", {"smooth_method": "none", "tokenize": "none"}, ["-s", "none", "-tok", "none"]),
    "ter_norm_asian": ("ter", {"normalized": True, "asian_support": True},
                       ["-m", "ter", "--ter-normalized", "--ter-asian-support"]),
    "ter_nopunct_asian": ("ter", {"no_punct": True, "asian_support": True, "case_sensitive": True},
                          ["-m", "ter", "--ter-no-punct", "--ter-asian-support", "--ter-case-sensitive"]),
})


def sacrebleu_cli(args, stdin_file=None):
    env = dict(os.environ, SACREBLEU_FORMAT="")
    stdin = open(path(stdin_file), "rb") if stdin_file else subprocess.DEVNULL
    r = subprocess.run([sys.executable, "-m", "sacrebleu", *args], cwd=GOLDEN, stdin=stdin,
                       capture_output=True, env=env)
    assert r.returncode == 0, (args, r.stderr.decode())
    return {"args": args, "stdin": stdin_file, "stdout": r.stdout.decode("utf-8")}


def make_metrics(case, hyp, ref, ref2, settings, cli_cases):
    out = {
        "sacrebleu": sacrebleu.__version__,
        "python": platform.python_version(),
        "settings": {},
        "cli": [sacrebleu_cli(args, stdin) for args, stdin in cli_cases],
    }
    for name, (kind, opts, args) in settings.items():
        out["settings"][name] = score_setting(hyp, [ref], kind, opts, args)
        out["settings"][name + "_2refs"] = score_setting(hyp, [ref, ref2], kind, opts, args)
    with open(path(case + ".metrics.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


def make_case1_expected():
    # The BLEU settings of the first golden case (the layout tests/unit/bleu_test.cpp reads).
    hyps, refs = read_segments("case1.hyp.de"), [read_segments("case1.ref.de")]
    out = {}
    for name, opts in [("13a_mixed", {}), ("13a_lower", {"lowercase": True}), ("none_mixed", {"tokenize": "none"}),
                       ("intl_mixed", {"tokenize": "intl"})]:
        bleu = BLEU(**opts)
        s = bleu.corpus_score(hyps, refs)
        out[name] = {"score": round(s.score, 4), "counts": list(s.counts), "totals": list(s.totals),
                     "sys_len": s.sys_len, "ref_len": s.ref_len, "bp": round(s.bp, 6),
                     "signature": bleu.get_signature().format()}
    with open(path("case1.expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)


def main():
    make_case1_ref2()
    make_case2()
    make_case1_expected()
    h1, r1, r1b = "case1.hyp.de", "case1.ref.de", "case1.ref2.de"
    make_metrics("case1", h1, r1, r1b, CASE1_SETTINGS, [
        ([r1, "-i", h1, "-m", "bleu", "chrf", "ter", "-f", "text", "-w", "4"], None),
        ([r1, "-m", "bleu", "chrf", "ter", "-f", "json", "-w", "2"], h1),
        ([r1, r1b, "-i", h1, "-m", "chrf", "ter", "bleu", "--chrf-word-order", "2", "-f", "json"], None),
        ([r1, r1b, "-i", h1, "-f", "text", "-w", "3", "-lc", "-tok", "intl"], None),
        ([r1, "-i", h1, "-f", "text", "-b", "-m", "bleu", "ter"], None),
        ([r1, "-i", h1, "-f", "json", "-b"], None),
    ])
    h2, r2, r2b = "case2.hyp", "case2.ref", "case2.ref2"
    make_metrics("case2", h2, r2, r2b, CASE2_SETTINGS, [
        ([r2, "-i", h2, "-m", "bleu", "chrf", "ter", "-f", "text", "-w", "4"], None),
        # Not from standard input: sacreBLEU reads its tab-separated columns as several systems.
        ([r2, r2b, "-i", h2, "-m", "bleu", "chrf", "ter", "-f", "json", "-w", "4", "--chrf-word-order", "2",
          "--ter-normalized", "--ter-asian-support", "-s", "floor"], None),
        ([r2, "-i", h2, "-m", "ter", "-f", "text", "--ter-no-punct", "--ter-case-sensitive", "-w", "6"], None),
    ])


if __name__ == "__main__":
    main()
