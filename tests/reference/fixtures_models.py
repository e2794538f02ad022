"""Fixtures for the attention family, the transformer and the vision transformer.

Every parameter is randomised (biases, norms and mixing matrices too) so
that every gradient is non-trivial. File layout: param.<name>, in.<name>,
out, grad_out, grad.param.<name>, grad.in.<name>.
"""
import os

import torch

import safetensors_io
from reference_models import Attention, Transformer, VisionTransformer

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
TYPES = ["concat", "collaborative", "talking_heads", "grouped"]


def randomise(module, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * 0.5)


def save(name, module, inputs, run, seed):
    module.eval()
    module.zero_grad(set_to_none=True)
    leaves = {k: (v.clone().requires_grad_(True) if v.is_floating_point() else v) for k, v in inputs.items()}
    out = run(module, **leaves)
    grad_out = torch.rand(out.shape, generator=torch.Generator().manual_seed(seed + 7)) * 2 - 1
    out.backward(grad_out)
    t = {"out": out.detach(), "grad_out": grad_out}
    for k, v in module.state_dict().items():
        t["param." + k] = v
    for k, p in module.named_parameters():
        t["grad.param." + k] = p.grad
    for k, v in leaves.items():
        t["in." + k] = v.detach()
        if v.is_floating_point():
            t["grad.in." + k] = v.grad
    safetensors_io.save(os.path.join(OUT, name + ".safetensors"), t)


def attention_kwargs(kind):
    kw = dict(kind=kind, heads=4, key_dim=8 if kind == "collaborative" else 16, value_dim=12, bias=True)
    if kind == "grouped":
        kw["kv_heads"] = 2
    return kw


def generate(_emit):
    g = torch.Generator().manual_seed(3)
    x = torch.rand(2, 5, 16, generator=g) - 0.5
    y = torch.rand(2, 7, 16, generator=g) - 0.5
    pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])
    for i, kind in enumerate(TYPES):
        att = Attention(d_model=16, **attention_kwargs(kind))
        randomise(att, 10 + i)
        save(f"attn_{kind}_cross", att, {"x": x, "y": y, "pad": pad},
             lambda m, x, y, pad: m(x, y, key_padding=pad), 20 + i)
        save(f"attn_{kind}_causal", att, {"x": x}, lambda m, x: m(x, x, causal=True), 30 + i)

    src = torch.tensor([[3, 4, 5, 6, 7], [8, 9, 10, 1, 1]])
    src_pad = src == 1
    tgt = torch.tensor([[2, 5, 6, 7], [2, 9, 4, 3]])
    mixes = {"concat": ("concat", "concat", "concat"),
             "collaborative": ("collaborative", "collaborative", "collaborative"),
             "mixed": ("collaborative", "talking_heads", "grouped")}
    for norm in ("post", "pre"):
        for label, (enc, dec, cross) in mixes.items():
            c = dict(vocab=11, d_model=16, ffn_dim=32, encoder_layers=2, decoder_layers=2,
                     pre_norm=norm == "pre", final_norm=True, dropout=0.0,
                     encoder_attention=attention_kwargs(enc), decoder_attention=attention_kwargs(dec),
                     cross_attention=attention_kwargs(cross))
            model = Transformer(c)
            randomise(model, 40)
            save(f"transformer_{norm}_{label}", model, {"src": src, "src_pad": src_pad, "tgt": tgt},
                 lambda m, src, src_pad, tgt: m(src, src_pad, tgt), 50)

    images = torch.rand(2, 3, 8, 8, generator=g)
    for i, kind in enumerate(TYPES):
        c = dict(image_size=8, patch_size=4, channels=3, num_classes=5, d_model=16, depth=2, ffn_dim=32,
                 distillation_token=kind == "concat", attention=attention_kwargs(kind))
        model = VisionTransformer(c)
        randomise(model, 60 + i)
        save(f"vit_{kind}", model, {"images": images}, lambda m, images: m(images), 70 + i)
