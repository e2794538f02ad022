#!/usr/bin/python3
"""Regenerates every PyTorch reference fixture under tests/reference/fixtures/.

Run with Debian's PyTorch:  /usr/bin/python3 tests/reference/make_fixtures.py
Each fixtures_<area>.py module defines generate(emit); emit writes one file:
  in.<name>   the inputs          out        the op's output
  grad_out    the upstream grad   grad.<name> d(Σ out·grad_out)/d input
CI never runs this: it only reads the files.
"""
import glob
import importlib
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402


def emit(name, inputs, fn, extra=None, seed=0):
    """Runs fn(**inputs), backpropagates a random grad_out, saves everything."""
    leaves = {k: (v.clone().requires_grad_(True) if v.is_floating_point() else v.clone())
              for k, v in inputs.items()}
    out = fn(**leaves)
    g = torch.Generator().manual_seed(1000 + seed)
    grad_out = torch.rand(out.shape, generator=g, dtype=torch.float32) * 2 - 1
    tensors = {"out": out.detach().float() if out.is_floating_point() else out.detach(), "grad_out": grad_out}
    if out.requires_grad:
        out.backward(grad_out.to(out.dtype))
    for k, v in leaves.items():
        tensors["in." + k] = v.detach()
        if v.is_floating_point() and v.grad is not None:
            tensors["grad." + k] = v.grad.float()
    for k, v in (extra or {}).items():
        tensors[k] = v
    safetensors_io.save(os.path.join(OUT, name + ".safetensors"), tensors)


def main():
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(HERE, "fixtures_*.py"))):
        module = importlib.import_module(os.path.basename(path)[:-3])
        module.generate(emit)
        print("generated", module.__name__)


if __name__ == "__main__":
    main()
