#!/usr/bin/python3
"""PyTorch side of the training-step benchmark: the same model, batch and
optimiser as `cmha bench RECIPE` (tests/reference/reference_models.py mirrors
cmha's modules name for name), printing one JSON line in the same format.

  /usr/bin/python3 tests/bench/pytorch_transformer_bench.py recipes/bench/X.yaml --steps 20 --threads 2
  python3 tests/bench/pytorch_transformer_bench.py X.yaml --device cuda --bf16 --set bench.batch_size=256

On a GPU (tests/gpu/check.sh) it times each step to the end of its work
(loss.item() waits for the queue), with TF32 off as in cmha; --bf16 is
torch.autocast(bfloat16) around forward and loss, as cmha's train.bf16.

Install libopenblas0-openmp first: Debian's torch otherwise runs on the
reference BLAS. The recipe is read with the same defaults as cmha for the
keys the benchmark uses (run `cmha train --dump-config` to see them all).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from reference_models import Transformer, VisionTransformer  # noqa: E402


def load_recipe(path):
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    merged = {}
    inc = data.pop("include", [])
    for item in inc if isinstance(inc, list) else [inc]:
        merge(merged, load_recipe(os.path.join(os.path.dirname(path), item)))
    merge(merged, data)
    return merged


def merge(dst, src):
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            merge(dst[k], v)
        else:
            dst[k] = v


def blas_in_use():
    with open("/proc/self/maps") as f:
        maps = f.read()
    for name in ("openblas", "mkl", "blis", "libblas"):
        if name in maps:
            return name
    return "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("recipe")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                    help="override a recipe key, as cmha's key.path=value")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    r = load_recipe(args.recipe)
    for item in args.set:
        key, value = item.split("=", 1)
        node = r
        *parents, last = key.split(".")
        for k in parents:
            node = node.setdefault(k, {})
        node[last] = yaml.safe_load(value)
    m, att, bench = r.get("model", {}), r.get("model", {}).get("attention", {}), r.get("bench", {})
    d = m.get("d_model", 512)
    kind = att.get("type", "concat")
    att_kw = dict(kind=kind, heads=att.get("heads", 8), key_dim=att.get("key_dim", 0), bias=True)
    torch.manual_seed(1)
    vit = m.get("kind", "transformer") == "vit"
    if vit:  # the DeiT recipes: random images and labels, as `cmha bench` on a vit recipe
        c = dict(image_size=m.get("image_size", 224), patch_size=m.get("patch_size", 16), channels=m.get("channels", 3),
                 num_classes=m.get("num_classes", 1000), d_model=d, depth=m.get("depth", 12),
                 ffn_dim=m.get("ffn_dim", 3072), distillation_token=m.get("distillation_token", False),
                 attention=att_kw)
        model = VisionTransformer(c)
    else:
        c = dict(vocab=m.get("vocab_size", 8000), d_model=d, ffn_dim=m.get("ffn_dim", 2048),
                 encoder_layers=m.get("encoder_layers", 6), decoder_layers=m.get("decoder_layers", 6),
                 pre_norm=m.get("pre_norm", False),
                 final_norm=m.get("encoder_final_norm", False) and m.get("decoder_final_norm", False),
                 dropout=m.get("dropout", 0.1), encoder_attention=att_kw, decoder_attention=att_kw,
                 cross_attention=att_kw)
        model = Transformer(c)
        torch.nn.init.normal_(model.src_embed.weight, 0.0, d ** -0.5)  # as cmha and fairseq
    if kind == "collaborative":  # cmha's default mixing init: blocks of ones
        for mod in model.modules():
            if hasattr(mod, "mixing"):
                with torch.no_grad():
                    h, dk = mod.mixing.shape
                    mod.mixing.zero_()
                    for i in range(h):
                        mod.mixing[i, i * (dk // h):(i + 1) * (dk // h)] = 1
    model.to(device)
    model.train()
    opt_cfg = r.get("optim", {})
    betas = tuple(opt_cfg.get("betas", [0.9, 0.98]))
    lr, eps = float(opt_cfg.get("lr", 5e-4)), float(opt_cfg.get("eps", 1e-9))
    if opt_cfg.get("name", "adam") == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, eps=eps,
                                weight_decay=float(opt_cfg.get("weight_decay", 0.0)))
    else:
        opt = torch.optim.Adam(model.parameters(), lr=lr, betas=betas, eps=eps)
    smoothing = r.get("train", {}).get("label_smoothing", 0.1)
    g = torch.Generator().manual_seed(3)
    if vit:
        b = bench.get("batch_size", 128)
        images = torch.randn(b, c["channels"], c["image_size"], c["image_size"], generator=g).to(device)
        labels = torch.randint(0, c["num_classes"], (b,), generator=g).to(device)
        units, unit = b, "images"

        def step_loss():
            return F.cross_entropy(model(images).float(), labels, label_smoothing=smoothing)
    else:
        b, s_len, t = bench.get("batch_size", 128), bench.get("src_len", 32), bench.get("tgt_len", 33)
        src = torch.randint(4, c["vocab"], (b, s_len), generator=g)
        tgt = torch.randint(4, c["vocab"], (b, t), generator=g)
        tgt_in, labels = tgt[:, :-1], tgt[:, 1:].reshape(-1)
        src_pad = torch.zeros(b, s_len, dtype=torch.bool)
        src, tgt_in, labels, src_pad = (x.to(device) for x in (src, tgt_in, labels, src_pad))
        units, unit = b * (t - 1), "tokens"

        def step_loss():
            logits = model(src, src_pad, tgt_in)
            return F.cross_entropy(logits.reshape(-1, c["vocab"]).float(), labels, label_smoothing=smoothing)
    times, losses = [], []
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
            loss = step_loss()
        loss.backward()
        opt.step()
        losses.append(loss.item())  # waits for the device: the step ends here
        ms = (time.perf_counter() - t0) * 1000
        if i >= args.warmup:
            times.append(ms)
    med = statistics.median(times)
    print(json.dumps({"framework": "pytorch " + torch.__version__, "blas": blas_in_use() if device.type == "cpu" else "cuda", "recipe": args.recipe,
                      "attention": kind, "device": str(device), "bf16": args.bf16, "parameters": sum(p.numel() for p in model.parameters()),
                      "threads": args.threads, "unit": unit, "target_tokens": units, "steps": len(times),
                      "step_ms_median": med, unit + "_per_s": units / (med / 1000), "units_per_s": units / (med / 1000),
                      "first_loss": losses[0], "last_loss": losses[-1]}))


if __name__ == "__main__":
    main()
