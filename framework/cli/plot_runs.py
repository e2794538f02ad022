#!/usr/bin/python3
"""Draws the curves of one or several cmha runs to a PNG (`cmha plot`).

Reads RUN_DIR/metrics.jsonl of each run and draws a grid of panels against
updates: training loss, validation loss, validation BLEU, validation top-1
and top-5 accuracy (%), learning rate, gradient norm and training
throughput, those the runs logged. Every run has one colour in every panel and one entry in
the figure's legend. Rows written before the metrics were renamed
(`accuracy`, `units_per_s`) are read too. Needs Debian's python3-matplotlib.
"""
import argparse
import json
import os
import sys

# Names of older metrics.jsonl rows → today's (run/metrics_log.h).
RENAMED = {"accuracy": "top1"}
THROUGHPUT = {"tokens_per_s": "token", "samples_per_s": "sample", "units_per_s": None}


def read_rows(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        sys.exit(f"cmha plot: '{path}' does not exist (is '{run_dir}' a run directory?)")
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"cmha plot: {path}:{number}: not a JSON row ({e.msg})")
            if not isinstance(row, dict) or "update" not in row:
                sys.exit(f"cmha plot: {path}:{number}: a row without an 'update'")
            for old, new in RENAMED.items():
                if old in row and new not in row:
                    row[new] = row.pop(old)
            for key, unit in THROUGHPUT.items():
                if key in row:
                    row["throughput"] = row.pop(key)
                    row["unit"] = unit
            rows.append(row)
    return rows


def run_labels(dirs):
    """The run directories' names; their last two path components where names repeat."""
    names = [os.path.basename(os.path.normpath(d)) or d for d in dirs]
    if len(set(names)) == len(names):
        return names
    return [os.path.join(*os.path.normpath(d).split(os.sep)[-2:]) for d in dirs]


def unit_of(runs):
    units = {r.get("unit") for rows in runs.values() for r in rows if "throughput" in r}
    units.discard(None)
    return units.pop() if len(units) == 1 else "unit"


def panels(unit):
    """(title, y label, split, [(field, line style, series label)], percent) of every panel, in order."""
    return [
        ("training loss", f"loss (nats per {unit})", "train", [("loss", "-", None)], False),
        ("validation loss", f"loss (nats per {unit})", "valid",
         [("loss", "-", "training objective"), ("nll_loss", "--", "NLL (no label smoothing)")], False),
        ("validation BLEU", "BLEU", "valid", [("bleu", "-", None)], False),
        ("validation top-1 accuracy", f"top-1 accuracy (% of {unit}s)", "valid", [("top1", "-", None)], True),
        ("validation top-5 accuracy", f"top-5 accuracy (% of {unit}s)", "valid", [("top5", "-", None)], True),
        ("learning rate", "learning rate", "train", [("lr", "-", None)], False),
        ("gradient norm", "L2 norm (before clipping)", "train", [("gnorm", "-", None)], False),
        ("training throughput", f"{unit}s per second", "train", [("throughput", "-", None)], False),
    ]


def main():
    ap = argparse.ArgumentParser(prog="cmha plot", description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run directories (train.save_dir)")
    ap.add_argument("-o", "--output", default="curves.png", help="PNG to write (default curves.png)")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
        from matplotlib.ticker import PercentFormatter
    except ImportError:
        sys.exit("cmha plot: needs matplotlib (apt-get install python3-matplotlib)")
    runs = dict(zip(run_labels(args.runs), (read_rows(r) for r in args.runs)))
    unit = unit_of(runs)

    def points(rows, split, field):
        pts = [(r["update"], r[field]) for r in rows
               if r.get("split") == split and isinstance(r.get(field), (int, float))]
        return sorted(pts)

    present = [p for p in panels(unit)
               if any(points(rows, p[2], s[0]) for rows in runs.values() for s in p[3])]
    if not present:
        sys.exit("cmha plot: the runs' metrics.jsonl hold no rows to draw")
    cols = {1: 1, 2: 2, 3: 3, 4: 2}.get(len(present), 3 if len(present) in (5, 6, 9) else 4)
    nrows = (len(present) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 3.6 * nrows + 0.9), squeeze=False)
    colours = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(runs)}
    for ax, (title, ylabel, split, series, percent) in zip(axes.flat, present):
        styles_used = []
        for name, rows in runs.items():
            for field, style, label in series:
                pts = points(rows, split, field)
                if not pts:
                    continue
                marker = "o" if split == "valid" else None
                ax.plot(*zip(*pts), linestyle=style, marker=marker, markersize=3.5, linewidth=1.3,
                        color=colours[name])
                if (style, label) not in styles_used:
                    styles_used.append((style, label))
        if len(styles_used) > 1:  # which line style is which series (the colours are the runs)
            ax.legend([Line2D([], [], color="0.3", linestyle=s) for s, _ in styles_used],
                      [label for _, label in styles_used], fontsize=7.5, loc="best")
        if title == "learning rate":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        if percent:
            ax.yaxis.set_major_formatter(PercentFormatter(xmax=100))
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("update")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(present):]:
        ax.set_visible(False)
    handles = [Line2D([], [], color=colours[name], linewidth=2.5) for name in runs]
    fig.legend(handles, list(runs), loc="upper center", ncol=min(len(runs), 4), fontsize=11, frameon=False,
               bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.55 / fig.get_figheight() * ((len(runs) + 3) // 4)))
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output} (panels: {', '.join(p[0] for p in present)})")


if __name__ == "__main__":
    main()
