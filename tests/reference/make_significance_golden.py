#!/usr/bin/env python3
"""Regenerates tests/data/significance-golden/: sacreBLEU 2.6.0's paired
significance tests and confidence intervals, and numpy's default_rng(12345)
streams they are drawn from, for cmha's tests (CI only reads the files).

sacreBLEU and numpy come from pip, at the versions of the benchmark venv
(tests/bench/python/requirements.txt), into a git-ignored virtual
environment: that venv (tests/bench/python/make_venv.sh), or one with only
what this script imports:

    python3 -m venv .venv-sacrebleu
    .venv-sacrebleu/bin/pip install -c tests/bench/python/requirements.txt sacrebleu numpy
    .venv-sacrebleu/bin/python tests/reference/make_significance_golden.py

It writes
  rng.json              SeedSequence(12345).generate_state(4, uint64), the
                        PCG64 state it seeds, raw 64-bit outputs, 32-bit
                        outputs, Generator.choice and Generator.integers(2,
                        dtype=bool) draws (the calls sacreBLEU makes)
  case1.sys2.de         a perturbed copy of bleu-golden/case1.hyp.de (a
                        second system; case1.ref2.de is the third)
  case2.sys2            a perturbed copy of bleu-golden/case2.hyp
  results.json          for each test: the full-precision scores, bootstrap
                        means, 95 % half-widths and p-values (sacreBLEU's own
                        functions), and "cli": its command lines with their
                        exact standard output and exit status; "accuracy":
                        cmha eval's bootstrap interval of top-1 on a fixed
                        0/1 vector, and exact McNemar p-values
The numpy version is recorded: under numpy 2 (NEP 50) sacreBLEU computes
resampled chrF in float32 (its statistics are float32 arrays), under numpy 1
in float64. cmha reproduces numpy 2's float32 sums, so numpy stays at 2
(tests/bench/python/requirements.txt pins 2.4.6). Under it sacreBLEU 2.6.0's
`--paired-bs -m chrf -f json` crashes (exit 1: "Object of type float32 is
not JSON serializable"); for a command line that crashes so, the script
runs sacreBLEU's own main() once more in a Python whose json.dumps writes a
numpy float as the double it holds (float(x), the only change), and records
that output with "json_numpy_floats_as_double": true.
"""
import json
import os
import random
import subprocess
import sys

import numpy as np
import sacrebleu
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest, _bootstrap_resample, estimate_ci

HERE = os.path.dirname(os.path.abspath(__file__))
BLEU_GOLDEN = os.path.normpath(os.path.join(HERE, "..", "data", "bleu-golden"))
GOLDEN = os.path.normpath(os.path.join(HERE, "..", "data", "significance-golden"))
assert sacrebleu.__version__ == "2.6.0", sacrebleu.__version__


def read_segments(path):
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip() for line in f]


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")


def perturb(line, rng, kept):
    """Another system's output: a word dropped, doubled or swapped with its
    neighbour, or a word replaced by one from elsewhere; `kept` of 4 + kept
    lines unchanged."""
    words = line.split(" ")
    kind = rng.randrange(4 + kept) - kept + 2
    if kind < 2 or len(words) < 3:
        return line
    i = rng.randrange(len(words) - 1)
    if kind == 2:
        del words[i]
    elif kind == 3:
        words.insert(i, words[i])
    elif kind == 4:
        words[i], words[i + 1] = words[i + 1], words[i]
    else:
        words[i] = rng.choice(words)
    return " ".join(words)


def rng_streams():
    out = {"numpy": np.__version__}
    ss = np.random.SeedSequence(12345)
    out["seed_sequence_pool"] = [int(x) for x in ss.pool]
    out["generate_state_uint32_8"] = [int(x) for x in ss.generate_state(8, np.uint32)]
    out["generate_state_uint64_4"] = [str(int(x)) for x in ss.generate_state(4, np.uint64)]
    bg = np.random.PCG64(12345)
    st = bg.state["state"]
    out["pcg64_state"] = str(st["state"])
    out["pcg64_inc"] = str(st["inc"])
    out["random_raw_8"] = [str(int(x)) for x in bg.random_raw(8)]
    g = np.random.default_rng(12345)
    out["uint32_9"] = [int(x) for x in g.integers(0, 2**32, size=9, dtype=np.uint32)]
    # The calls sacreBLEU makes, each from a fresh default_rng(12345).
    for n in (1, 3, 26, 304):
        g = np.random.default_rng(12345)
        out[f"choice_{n}_x_5"] = [int(x) for x in g.choice(n, size=(5, n), replace=True).ravel()]
    g = np.random.default_rng(12345)
    # A bound near 2^32: Lemire's rejection is taken often.
    out["choice_3000000000_x_64"] = [int(x) for x in g.choice(3000000000, size=64, replace=True)]
    g = np.random.default_rng(12345)
    out["bool_3_x_50"] = [int(x) for x in g.integers(2, size=(3, 50), dtype=bool).ravel()]
    # Booleans then indices from one generator (sacreBLEU's AR with a confidence estimate).
    g = np.random.default_rng(12345)
    out["bool_then_choice_bool"] = [int(x) for x in g.integers(2, size=(2, 7), dtype=bool).ravel()]
    out["bool_then_choice_choice"] = [int(x) for x in g.choice(7, size=(2, 7), replace=True).ravel()]
    return out


def accuracy_tests():
    """A classifier's top-1 bootstrap interval as cmha eval draws it (the
    images resampled like sacreBLEU's segments) and exact McNemar p-values
    (math.comb, exact rationals)."""
    from fractions import Fraction
    from math import comb
    correct = np.array([1 if (i * 7) % 10 < 8 else 0 for i in range(300)], dtype=np.int64)
    g = np.random.default_rng(12345)
    idxs = g.choice(len(correct), size=(1000, len(correct)), replace=True)
    top1s = np.sort(100.0 * correct[idxs].sum(1) / len(correct))
    out = {"correct": [int(x) for x in correct], "top1": 100.0 * correct.sum() / len(correct),
           "low": float(top1s[1000 // 40]), "high": float(top1s[1000 - 1000 // 40 - 1])}
    mcnemar = []
    for b, c in ((0, 0), (3, 0), (10, 12), (40, 20), (7, 30), (500, 560), (0, 9)):
        n, k = b + c, min(b, c)
        p = 1.0 if n == 0 else float(min(Fraction(1), 2 * sum(Fraction(comb(n, j), 2 ** n) for j in range(k + 1))))
        mcnemar.append({"only_a": b, "only_b": c, "p_value": p})
    out["mcnemar"] = mcnemar
    return out


def plain(x):
    return None if x is None else float(x)


def api_results(systems, refs, test_type):
    """sacreBLEU's PairedTest on BLEU and chrF, values at full precision."""
    metrics = {"BLEU": BLEU(references=refs), "CHRF": CHRF(references=refs)}
    sigs, scores = PairedTest(list(systems), metrics, references=None, test_type=test_type)()
    out = {"signatures": {k: v.format() for k, v in sigs.items()}, "systems": scores["System"]}
    for name, results in scores.items():
        if name == "System":
            continue
        out[name] = [{"score": plain(r.score), "p_value": plain(r.p_value), "mean": plain(r.mean), "ci": plain(r.ci)}
                     for r in results]
    return out


def confidence_results(hyps, refs):
    out = {}
    for name, metric in (("BLEU", BLEU(references=refs)), ("chrF2", CHRF(references=refs))):
        stats = metric._extract_corpus_statistics(hyps, None)
        score = metric._aggregate_and_compute(stats)
        _, bs = _bootstrap_resample(stats, metric, 1000)
        score.estimate_ci(bs)
        out[name] = {"score": float(score.score), "mean": float(score._mean), "ci": float(score._ci),
                     "resampled_first_5": [float(x.score) for x in bs[:5]]}
    return out


# sacreBLEU's command line with json.dumps taught numpy's floats (see the top).
JSON_NUMPY_FLOATS = """
import json, sys
import numpy
_dumps = json.dumps
def _as_double(o):
    if isinstance(o, numpy.floating):
        return float(o)
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")
json.dumps = lambda obj, **kw: _dumps(obj, default=_as_double, **kw)
from sacrebleu.sacrebleu import main
sys.argv[0] = "sacrebleu"
sys.exit(main())
"""


def run_cli(args):
    env = dict(os.environ)
    env.pop("NO_COLOR", None)
    env.pop("SACREBLEU_SEED", None)
    p = subprocess.run([os.path.join(os.path.dirname(sys.executable), "sacrebleu")] + args, cwd=GOLDEN,
                       capture_output=True, text=True, env=env)
    out = {"args": args, "stdout": p.stdout, "status": p.returncode}
    if p.returncode != 0 and "float32 is not JSON serializable" in p.stderr:
        p = subprocess.run([sys.executable, "-c", JSON_NUMPY_FLOATS] + args, cwd=GOLDEN, capture_output=True,
                           text=True, env=env)
        assert p.returncode == 0, (args, p.stderr)
        out = {"args": args, "stdout": p.stdout, "status": 0, "json_numpy_floats_as_double": True}
    return out


def main():
    os.makedirs(GOLDEN, exist_ok=True)
    rng = random.Random(31)
    write_lines(os.path.join(GOLDEN, "case1.sys2.de"),
                [perturb(l, rng, 36) for l in read_segments(os.path.join(BLEU_GOLDEN, "case1.hyp.de"))])
    write_lines(os.path.join(GOLDEN, "case2.sys2"),
                [perturb(l, rng, 2) for l in read_segments(os.path.join(BLEU_GOLDEN, "case2.hyp"))])
    with open(os.path.join(GOLDEN, "rng.json"), "w") as f:
        json.dump(rng_streams(), f, indent=1)
        f.write("\n")

    g = "../bleu-golden/"
    c1_ref = [read_segments(os.path.join(BLEU_GOLDEN, "case1.ref.de"))]
    c1_sys = [("Baseline: " + g + "case1.hyp.de", read_segments(os.path.join(BLEU_GOLDEN, "case1.hyp.de"))),
              ("case1.sys2.de", read_segments(os.path.join(GOLDEN, "case1.sys2.de"))),
              (g + "case1.ref2.de", read_segments(os.path.join(BLEU_GOLDEN, "case1.ref2.de")))]
    c2_refs = [read_segments(os.path.join(BLEU_GOLDEN, "case2.ref")),
               read_segments(os.path.join(BLEU_GOLDEN, "case2.ref2"))]
    c2_sys = [("Baseline: " + g + "case2.hyp", read_segments(os.path.join(BLEU_GOLDEN, "case2.hyp"))),
              ("case2.sys2", read_segments(os.path.join(GOLDEN, "case2.sys2")))]
    results = {
        "sacrebleu": sacrebleu.__version__, "numpy": np.__version__, "python": sys.version.split()[0],
        "case1_bs": api_results(c1_sys, c1_ref, "bs"),
        "case1_ar": api_results(c1_sys, c1_ref, "ar"),
        "case2_bs": api_results(c2_sys, c2_refs, "bs"),
        "case2_ar": api_results(c2_sys, c2_refs, "ar"),
        "case1_confidence": confidence_results(c1_sys[0][1], c1_ref),
        "case2_confidence": confidence_results(c2_sys[1][1], c2_refs),
        "accuracy": accuracy_tests(),
    }
    c1 = [g + "case1.ref.de", "-i", g + "case1.hyp.de", "case1.sys2.de", g + "case1.ref2.de"]
    c2 = [g + "case2.ref", g + "case2.ref2", "-i", g + "case2.hyp", "case2.sys2"]
    results["cli"] = [
        run_cli(c1 + ["--paired-bs", "-f", "text"]),
        run_cli(c1 + ["-m", "bleu", "chrf", "--paired-bs", "-f", "text"]),
        run_cli(c1 + ["-m", "bleu", "chrf", "--paired-ar", "-f", "text"]),
        run_cli(c1 + ["-m", "bleu", "--paired-bs", "-f", "json"]),
        run_cli(c1 + ["-m", "bleu", "chrf", "--paired-ar", "-f", "json"]),
        # numpy 2 makes resampled chrF float32, which sacreBLEU's JSON cannot write (see run_cli).
        run_cli(c1 + ["-m", "chrf", "--paired-bs", "-f", "json"]),
        run_cli(c1 + ["-m", "chrf", "--paired-bs", "-w", "1", "-f", "text"]),
        run_cli(c2 + ["-m", "bleu", "chrf", "--paired-bs", "-f", "text"]),
        run_cli(c2 + ["-m", "bleu", "chrf", "--paired-ar", "-w", "3", "-f", "text"]),
        run_cli([g + "case1.ref.de", "-i", g + "case1.hyp.de", "-m", "bleu", "chrf", "--confidence"]),
        run_cli([g + "case1.ref.de", "-i", g + "case1.hyp.de", "-m", "bleu", "chrf", "--confidence", "-f", "json"]),
        run_cli([g + "case2.ref", g + "case2.ref2", "-i", "case2.sys2", "--confidence", "-w", "1"]),
    ]
    with open(os.path.join(GOLDEN, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
