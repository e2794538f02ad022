#!/usr/bin/python3
"""Draws a sweep's metric against one grid key (`cmha sweep`'s sweep.png).

Reads DIR/sweep.csv (name, the grid keys, the result columns) and draws one
line per combination of the other grid keys, e.g. top-1 against key_dim with
one line per attention type. A power-of-two x axis is drawn in log2 scale.
Needs Debian's python3-matplotlib.
"""
import argparse
import csv
import math
import sys

# Axis labels with units for the results.json keys and grid keys sweeps use most.
METRIC_LABELS = {"top1": "top-1 accuracy (%)", "top5": "top-5 accuracy (%)", "ema_top1": "EMA top-1 accuracy (%)",
                 "ema_top5": "EMA top-5 accuracy (%)", "bleu": "BLEU (sacreBLEU)",
                 "bleu_compound": "BLEU (tokenized, compound-split)", "loss": "loss (nats)"}
KEY_LABELS = {"key_dim": "key/query width $D_k$", "heads": "heads", "d_model": "model width", "depth": "blocks",
              "parameters": "parameters", "attention_parameters": "attention parameters",
              "key_query_parameters": "key/query parameters", "train_flops_per_token": "training FLOPs per token",
              "train_flops_per_image": "training FLOPs per image",
              "kv_cache_bytes_per_token": "decoding cache bytes per token",
              "kv_cache_key_bytes_per_token": "decoding key-cache bytes per token"}


def is_percent(metric):
    return metric.endswith("top1") or metric.endswith("top5")


def main():
    ap = argparse.ArgumentParser(prog="plot_sweep.py", description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="sweep.csv written by cmha sweep")
    ap.add_argument("--keys", required=True, help="the grid keys, comma-separated")
    ap.add_argument("--x", required=True, help="the grid key or result column on the x axis")
    ap.add_argument("--lines", default=None,
                    help="the grid keys whose combinations are the lines, comma-separated (default: the keys but --x)")
    ap.add_argument("--metric", required=True, help="the result column on the y axis")
    ap.add_argument("--replicates", default="", help="the grid key whose values are replicates (train.seed)")
    ap.add_argument("-o", "--output", default="sweep.png", help="PNG to write")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_sweep.py: needs matplotlib (apt-get install python3-matplotlib)")
    with open(args.csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    keys = args.keys.split(",")
    others = ([k for k in keys if k != args.x] if args.lines is None else [k for k in args.lines.split(",") if k])
    others = [k for k in others if k != args.replicates]
    lines = {}
    for r in rows:
        if r.get(args.metric, "") == "" or r.get(args.x, "") == "":
            continue
        label = ", ".join(f"{k.rsplit('.', 1)[-1]}={r[k]}" for k in others) or args.metric
        lines.setdefault(label, []).append((float(r[args.x]), float(r[args.metric])))
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    xs = sorted({x for pts in lines.values() for x, _ in pts})
    for label, pts in lines.items():
        if not args.replicates:
            ax.plot(*zip(*sorted(pts)), "o-", label=label)
            continue
        by_x = {}
        for x, y in pts:
            by_x.setdefault(x, []).append(y)
        px = sorted(by_x)
        means = [sum(by_x[x]) / len(by_x[x]) for x in px]
        stds = [math.sqrt(sum((y - m) ** 2 for y in by_x[x]) / (len(by_x[x]) - 1)) if len(by_x[x]) > 1 else 0.0
                for x, m in zip(px, means)]
        n = max(len(v) for v in by_x.values())
        bar = ax.errorbar(px, means, yerr=stds, fmt="o-", capsize=3, label=f"{label} (mean ± std, n={n})")
        ax.plot(*zip(*pts), ".", color=bar[0].get_color(), alpha=0.3)
    if xs and all(x > 0 and math.log2(x).is_integer() for x in xs) and len(xs) > 2:
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{x:g}" for x in xs])
    x_name = args.x.rsplit(".", 1)[-1]
    ax.set(xlabel=f"{KEY_LABELS.get(x_name, x_name)} ({args.x})", ylabel=METRIC_LABELS.get(args.metric, args.metric),
           title=f"{args.metric} against {x_name}")
    if is_percent(args.metric):
        from matplotlib.ticker import PercentFormatter
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=100))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
