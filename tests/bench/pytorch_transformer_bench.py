#!/usr/bin/env python3
"""PyTorch side of the training-step benchmark: the same model, batch and
optimiser as `cmha bench RECIPE` (tests/reference/reference_models.py mirrors
cmha's modules name for name), printing one JSON line in the same format.

  $(tests/bench/python/bench_python.sh) tests/bench/pytorch_transformer_bench.py recipes/bench/X.yaml --steps 20 --threads 2
  python3 tests/bench/pytorch_transformer_bench.py X.yaml --device cuda --bf16 --set bench.batch_size=256
  ... --compile default   (or --compile max-autotune-no-cudagraphs): torch.compile of forward and loss

The interpreter: the venv of tests/bench/python/make_venv.sh (PyTorch 2.15);
Debian's /usr/bin/python3 (PyTorch 1.13) still runs it, eager only. The JSON
line names the interpreter, the torch version and the BLAS it measured.

On a GPU (tests/gpu/check.sh) it times each step to the end of its work
(loss.item() waits for the queue), with TF32 off as in cmha; --bf16 is
torch.autocast(bfloat16) around forward and loss, as cmha's train.bf16.

Under Debian's torch, install libopenblas0-openmp first: it otherwise runs
on the reference BLAS. The recipe is read with the same defaults as cmha for the
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
    """The BLAS of torch's f32 GEMMs: the build's BLAS_INFO (MKL is linked
    statically into PyPI's wheels), else the library mapped into the process."""
    import re
    found = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    if found and found.group(1) not in ("open", "generic"):
        return found.group(1)
    with open("/proc/self/maps") as f:
        maps = f.read()
    for name in ("openblas", "mkl", "blis", "libblas"):
        if name in maps:
            return name
    return "unknown"


class StepBench:
    """The model, optimiser, batch and loss of `cmha bench RECIPE` in PyTorch.

    step(loss_fn) runs one training step (zero_grad, forward and loss under
    bf16 autocast when asked, backward, the optimiser) and returns its
    milliseconds, ending when the loss is known (on a GPU, loss.item() waits
    for the queue). loss_fn is self.loss or a torch.compile of it."""

    def __init__(self, recipe, overrides=(), device="cpu", bf16=False):
        self.device = device = torch.device(device)
        self.bf16 = bf16
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        r = load_recipe(recipe)
        for item in overrides:
            key, value = item.split("=", 1)
            node = r
            *parents, last = key.split(".")
            for k in parents:
                node = node.setdefault(k, {})
            node[last] = yaml.safe_load(value)
        m, att, bench = r.get("model", {}), r.get("model", {}).get("attention", {}), r.get("bench", {})
        d = m.get("d_model", 512)
        self.kind = kind = att.get("type", "concat")
        att_kw = dict(kind=kind, heads=att.get("heads", 8), key_dim=att.get("key_dim", 0), bias=True)
        torch.manual_seed(1)
        vit = m.get("kind", "transformer") == "vit"
        if vit:  # the DeiT recipes: random images and labels, as `cmha bench` on a vit recipe
            c = dict(image_size=m.get("image_size", 224), patch_size=m.get("patch_size", 16),
                     channels=m.get("channels", 3), num_classes=m.get("num_classes", 1000), d_model=d,
                     depth=m.get("depth", 12), ffn_dim=m.get("ffn_dim", 3072),
                     distillation_token=m.get("distillation_token", False), attention=att_kw)
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
        self.model = model.to(device)
        model.train()
        opt_cfg = r.get("optim", {})
        betas = tuple(opt_cfg.get("betas", [0.9, 0.98]))
        lr, eps = float(opt_cfg.get("lr", 5e-4)), float(opt_cfg.get("eps", 1e-9))
        if opt_cfg.get("name", "adam") == "adamw":
            self.opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, eps=eps,
                                         weight_decay=float(opt_cfg.get("weight_decay", 0.0)))
        else:
            self.opt = torch.optim.Adam(model.parameters(), lr=lr, betas=betas, eps=eps)
        smoothing = r.get("train", {}).get("label_smoothing", 0.1)
        g = torch.Generator().manual_seed(3)
        if vit:
            b = bench.get("batch_size", 128)
            images = torch.randn(b, c["channels"], c["image_size"], c["image_size"], generator=g).to(device)
            labels = torch.randint(0, c["num_classes"], (b,), generator=g).to(device)
            self.units, self.unit = b, "images"

            def loss():
                return F.cross_entropy(model(images).float(), labels, label_smoothing=smoothing)
        else:
            b, s_len, t = bench.get("batch_size", 128), bench.get("src_len", 32), bench.get("tgt_len", 33)
            src = torch.randint(4, c["vocab"], (b, s_len), generator=g)
            tgt = torch.randint(4, c["vocab"], (b, t), generator=g)
            tgt_in, labels = tgt[:, :-1], tgt[:, 1:].reshape(-1)
            src_pad = torch.zeros(b, s_len, dtype=torch.bool)
            src, tgt_in, labels, src_pad = (x.to(device) for x in (src, tgt_in, labels, src_pad))
            self.units, self.unit = b * (t - 1), "tokens"

            def loss():
                logits = model(src, src_pad, tgt_in)
                return F.cross_entropy(logits.reshape(-1, c["vocab"]).float(), labels, label_smoothing=smoothing)
        self.loss = loss
        self.losses = []

    def compiled(self, mode):
        """torch.compile of forward and loss (Inductor; mode None is its default);
        the backward is compiled with it (AOTAutograd), the optimiser runs eagerly."""
        return torch.compile(self.loss, mode=mode)

    def step(self, loss_fn):
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            loss = loss_fn()
        loss.backward()
        self.opt.step()
        self.losses.append(loss.item())  # waits for the device: the step ends here
        return (time.perf_counter() - t0) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("recipe")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--compile", default="none", metavar="MODE",
                    help="none (eager), default, or a torch.compile mode such as max-autotune-no-cudagraphs")
    ap.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                    help="override a recipe key, as cmha's key.path=value")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    b = StepBench(args.recipe, args.set, args.device, args.bf16)
    fn = b.loss if args.compile == "none" else b.compiled(None if args.compile == "default" else args.compile)
    times = [b.step(fn) for _ in range(args.warmup + args.steps)][args.warmup:]
    med = statistics.median(times)
    print(json.dumps({"framework": "pytorch " + torch.__version__, "python": sys.executable,
                      "compile": args.compile, "blas": blas_in_use() if b.device.type == "cpu" else "cuda",
                      "recipe": args.recipe, "attention": b.kind, "device": str(b.device), "bf16": args.bf16,
                      "parameters": sum(p.numel() for p in b.model.parameters()),
                      "threads": args.threads, "unit": b.unit, "target_tokens": b.units, "steps": len(times),
                      "step_ms_median": med, b.unit + "_per_s": b.units / (med / 1000),
                      "units_per_s": b.units / (med / 1000),
                      "first_loss": b.losses[0], "last_loss": b.losses[-1]}))


if __name__ == "__main__":
    main()
