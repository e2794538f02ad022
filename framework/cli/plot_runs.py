#!/usr/bin/python3
"""Draws the curves of one or several cmha runs to a PNG (`cmha plot`).

Reads RUN_DIR/metrics.jsonl of each run: training loss and validation loss
against updates on the left, every other validation metric (accuracy, BLEU,
perplexity, ...) on the right. Needs Debian's python3-matplotlib.
"""
import argparse
import json
import os
import sys


def read_rows(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        sys.exit(f"cmha plot: '{path}' does not exist (is '{run_dir}' a run directory?)")
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"cmha plot: {path}:{number}: not a JSON row ({e.msg})")
    return rows


def main():
    ap = argparse.ArgumentParser(prog="cmha plot", description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run directories (train.save_dir)")
    ap.add_argument("-o", "--output", default="curves.png", help="PNG to write (default curves.png)")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("cmha plot: needs matplotlib (apt-get install python3-matplotlib)")
    runs = {os.path.basename(os.path.normpath(r)) or r: read_rows(r) for r in args.runs}
    metrics = sorted({k for rows in runs.values() for row in rows if row.get("split") == "valid"
                      for k in row if k not in ("split", "update", "epoch", "loss")})
    fig, axes = plt.subplots(1, 1 + len(metrics), figsize=(6 * (1 + len(metrics)), 4.5), squeeze=False)
    loss_ax = axes[0][0]
    for name, rows in runs.items():
        train = [(r["update"], r["loss"]) for r in rows if r.get("split") == "train" and "loss" in r]
        valid = [(r["update"], r["loss"]) for r in rows if r.get("split") == "valid" and "loss" in r]
        if train:
            loss_ax.plot(*zip(*train), label=f"{name} train")
        if valid:
            loss_ax.plot(*zip(*valid), "o-", label=f"{name} valid")
        for ax, m in zip(axes[0][1:], metrics):
            pts = [(r["update"], r[m]) for r in rows if r.get("split") == "valid" and m in r]
            if pts:
                ax.plot(*zip(*pts), "o-", label=name)
    loss_ax.set(title="loss", xlabel="update", ylabel="loss per unit")
    for ax, m in zip(axes[0][1:], metrics):
        ax.set(title=f"validation {m}", xlabel="update", ylabel=m)
    for ax in axes[0]:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
