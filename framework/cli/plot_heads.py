#!/usr/bin/python3
"""Draws the cumulative energy curves of `cmha heads` to a PNG.

Reads the JSON `cmha heads` writes: for each attention layer, its type
(concat or collaborative), heads and key/query width D_k, and the cumulative
energy share of the leading principal components of W_Q, of W_K and of the
per-head products W_Q^(i) W_K^(i)^T stacked across heads. Three panels, one
curve per layer, as Figure 1 of Cordonnier, Loukas & Jaggi (2020); titles
name what the layers hold (concatenated per-head projections, or the shared
projections of collaborative attention), and the legend labels the guides:
the 90 % and 95 % energy levels and the key/query width D_k. Needs Debian's
python3-matplotlib.
"""
import argparse
import json
import os
import sys

# What W_Q, W_K and the per-head products are, by attention type (compress/head_energy.h).
QUERY = {"concat": "concatenated $W_Q$ (all heads)", "collaborative": r"shared $\tilde W_Q$ (collaborative)"}
KEY = {"concat": "concatenated $W_K$ (all heads)", "collaborative": r"shared $\tilde W_K$ (collaborative)"}
PRODUCTS = {"concat": r"per-head $W_Q^{(i)} W_K^{(i)\top}$, stacked",
            "collaborative": r"per-head $\tilde W_Q\,\mathrm{diag}(m_i)\,\tilde W_K^\top$, stacked"}
MIXED = {"query": "$W_Q$ (concatenated or shared)", "key": "$W_K$ (concatenated or shared)",
         "products": r"per-head $W_Q^{(i)} W_K^{(i)\top}$, stacked"}


def width_symbol(types):
    return r"$\tilde D_k$" if types == {"collaborative"} else "$D_k$"


def main():
    ap = argparse.ArgumentParser(prog="cmha heads", description=__doc__.splitlines()[0])
    ap.add_argument("curves", help="JSON written by cmha heads")
    ap.add_argument("-o", "--output", default="heads.png", help="PNG to write (default heads.png)")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import PercentFormatter
    except ImportError:
        sys.exit("cmha heads: needs matplotlib (apt-get install python3-matplotlib)")
    try:
        with open(args.curves, encoding="utf-8") as f:
            doc = json.load(f)
        layers = doc["layers"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"cmha heads: cannot read the curves '{args.curves}': {e}")
    if not layers:
        sys.exit("cmha heads: the checkpoint has no concat or collaborative attention layer to draw")
    types = {layer.get("type", "concat") for layer in layers}
    one_type = next(iter(types)) if len(types) == 1 else None
    titles = {"query": QUERY.get(one_type, MIXED["query"]), "key": KEY.get(one_type, MIXED["key"]),
              "products": PRODUCTS.get(one_type, MIXED["products"])}
    key_dims = sorted({layer["key_dim"] for layer in layers if layer.get("key_dim")})
    symbol = width_symbol(types)

    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8), sharey=True)
    if len(layers) <= 10:
        colours = [plt.get_cmap("tab10")(n) for n in range(len(layers))]
    else:
        colours = [plt.get_cmap("viridis")(n / (len(layers) - 1)) for n in range(len(layers))]
    for ax, key in zip(axes, ("query", "key", "products")):
        for colour, layer in zip(colours, layers):
            curve = layer[key]
            ax.plot(range(1, len(curve) + 1), curve, color=colour, linewidth=1.4, label=layer["layer"].rstrip("."))
        ax.axhline(0.90, color="0.35", linewidth=0.9, linestyle=":", label="90 % of the energy")
        ax.axhline(0.95, color="0.35", linewidth=0.9, linestyle="--", label="95 % of the energy")
        for n, d in enumerate(key_dims):
            # Which layers have this width, where the checkpoint mixes types.
            of = {layer.get("type", "concat") for layer in layers if layer.get("key_dim") == d}
            whose = "" if one_type else " of " + " and ".join(sorted(of))
            ax.axvline(d, color="tab:red", linewidth=1.0, linestyle=(0, (5, 2)) if n == 0 else (0, (2, 2)),
                       label=f"{width_symbol(of)} = {d} (key/query width{whose})")
        ax.set_title(titles[key], fontsize=11.5)
        ax.set_xlabel("principal components (dimensions)")
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("cumulative energy")
    axes[0].yaxis.set_major_formatter(PercentFormatter(xmax=1))
    axes[0].set_ylim(0, 1.02)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=8.5, frameon=False)
    # The headline: which attention, how many heads, how wide.
    name = os.path.basename(doc.get("checkpoint", "")) or "checkpoint"
    heads = sorted({layer.get("heads") for layer in layers if layer.get("heads")})
    what = f"{one_type} attention" if one_type else " and ".join(sorted(types)) + " attention"
    if len(heads) == 1:
        what += f", {heads[0]} heads"
    if len(key_dims) == 1:
        what += f", {symbol} = {key_dims[0]}"
    fig.suptitle(f"{name}: {what}, {len(layers)} layers — energy of the leading principal components", fontsize=12.5)
    fig.tight_layout(rect=(0, 0, 0.85, 1))
    fig.savefig(args.output, dpi=110)


if __name__ == "__main__":
    main()
