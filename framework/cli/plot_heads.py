#!/usr/bin/python3
"""Draws the cumulative energy curves of `cmha heads` to a PNG.

Reads the JSON `cmha heads` writes: for each attention layer, the cumulative
energy share of the leading principal components of W_Q, of W_K and of the
per-head products W_Q^(i) W_K^(i)^T stacked across heads. Three panels, one
curve per layer, as Figure 1 of Cordonnier, Loukas & Jaggi (2020). Needs
Debian's python3-matplotlib.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(prog="cmha heads", description=__doc__.splitlines()[0])
    ap.add_argument("curves", help="JSON written by cmha heads")
    ap.add_argument("-o", "--output", default="heads.png", help="PNG to write (default heads.png)")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("cmha heads: needs matplotlib (apt-get install python3-matplotlib)")
    try:
        with open(args.curves, encoding="utf-8") as f:
            doc = json.load(f)
        layers = doc["layers"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"cmha heads: cannot read the curves '{args.curves}': {e}")
    panels = [("query", "concatenated $W_Q$"), ("key", "concatenated $W_K$"),
              ("products", "$W_Q^{(i)} W_K^{(i)\\top}$ stacked across heads")]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5), sharey=True)
    cmap = plt.get_cmap("viridis")
    for ax, (key, title) in zip(axes, panels):
        for n, layer in enumerate(layers):
            curve = layer[key]
            ax.plot(range(1, len(curve) + 1), curve, color=cmap(n / max(1, len(layers) - 1)),
                    label=layer["layer"].rstrip("."))
        for level in (0.9, 0.95):
            ax.axhline(level, color="grey", linewidth=0.6, linestyle=":")
        ax.set_title(title)
        ax.set_xlabel("principal components")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("cumulative energy")
    axes[0].set_ylim(0, 1.02)
    axes[-1].legend(fontsize="small", loc="lower right")
    fig.suptitle(doc.get("checkpoint", ""))
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)


if __name__ == "__main__":
    main()
