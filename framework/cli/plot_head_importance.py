#!/usr/bin/python3
"""Draws each attention layer's head importance (`cmha heads --importance`).

Reads DIR/importance.json (the loss with each head alone masked, and its
increase over the unmasked loss) and writes one bar chart per layer,
DIR/PLACE.LAYER.png: one bar per head, on one y scale for all layers so that
they compare. Needs Debian's python3-matplotlib.
"""
import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser(prog="plot_head_importance.py", description=__doc__.splitlines()[0])
    ap.add_argument("json", help="importance.json written by cmha heads --importance")
    ap.add_argument("-o", "--output-dir", default=".", help="directory for the PNGs")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_head_importance.py: needs matplotlib (apt-get install python3-matplotlib)")
    with open(args.json, encoding="utf-8") as f:
        doc = json.load(f)
    layers = doc.get("layers", [])
    if not layers:
        sys.exit(f"plot_head_importance.py: {args.json} has no layers")
    values = [v for layer in layers for v in layer["increase"]]
    low, high = min(0.0, min(values)), max(0.0, max(values))
    pad = 0.05 * (high - low or 1.0)
    for layer in layers:
        inc = layer["increase"]
        fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * len(inc) + 1.5), 3.4))
        colours = ["tab:red" if v > 0 else "tab:blue" for v in inc]
        ax.bar(range(len(inc)), inc, color=colours)
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_ylim(low - pad, high + pad)
        ax.set_xticks(range(len(inc)))
        ax.set(xlabel="head", ylabel="loss increase (nats)",
               title=f"{layer['layer']} ({layer['type']})\nunmasked loss {doc['base_loss']:.4f}")
        ax.title.set_fontsize(9)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        out = os.path.join(args.output_dir, f"{layer['layer']}.png")
        fig.savefig(out, dpi=100)
        plt.close(fig)
    print(f"wrote {len(layers)} PNGs to {args.output_dir}")


if __name__ == "__main__":
    main()
