#!/usr/bin/python3
"""Fixtures of checkpoint interop (framework/interop/import_export.h, tests/unit/interop_test.cpp):
small random timm, Hugging Face and fairseq models (interop_models.py), each as
  interop_<name>.safetensors     the state dict as its framework names it, with
                                 metadata {"format": "pt"} as PyTorch tools save it
  interop_<name>.io.safetensors  in.<input> and out, the model's output on them
plus interop_hf_deit.config.json (Hugging Face's config.json of that model) and
interop_fairseq_post_legacy.safetensors, the post-norm model's state dict in
fairseq's old layout (fused in_proj_weight, no output_projection, _float_tensor).

Run alone:  /usr/bin/python3 tests/reference/fixtures_interop.py  (or through make_fixtures.py).
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402
from interop_models import (FairseqTransformerModel, HfDeiTForImageClassificationWithTeacher,  # noqa: E402
                            HfViTForImageClassification, TimmVisionTransformer)


def randomise(module, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * 0.5)


def save(name, model, inputs, seed):
    randomise(model, seed)
    model.eval()
    with torch.no_grad():
        out = model(*inputs.values())
    safetensors_io.save(os.path.join(OUT, f"interop_{name}.safetensors"), model.state_dict(), {"format": "pt"})
    io = {"in." + k: v for k, v in inputs.items()}
    io["out"] = out
    safetensors_io.save(os.path.join(OUT, f"interop_{name}.io.safetensors"), io)
    return model


def images(seed, channels, size=8):
    return torch.rand(2, channels, size, size, generator=torch.Generator().manual_seed(seed)) * 2 - 1


def legacy_fairseq(state):
    """The state dict as fairseq wrote it before 2019: q, k, v fused into in_proj_*, the
    output projection tied through decoder.embed_tokens, sinusoidal positions' _float_tensor."""
    old = {}
    for k, v in state.items():
        if k.endswith(".q_proj.weight") or k.endswith(".q_proj.bias"):
            base, kind = k.rsplit(".q_proj.", 1)
            parts = [state[f"{base}.{p}_proj.{kind}"] for p in "qkv"]
            old[f"{base}.in_proj_{kind}"] = torch.cat(parts, 0)
        elif ".k_proj." in k or ".v_proj." in k or k == "decoder.output_projection.weight":
            continue
        else:
            old[k] = v
    for stack in ("encoder", "decoder"):
        old[f"{stack}.embed_positions._float_tensor"] = torch.zeros(1)
    return old


def generate(_emit=None):
    os.makedirs(OUT, exist_ok=True)
    # timm: a distilled DeiT, and a plain ViT whose attention is wider than the model (attn_dim).
    save("timm_deit", TimmVisionTransformer(8, 4, 3, 5, 16, 2, 4, 2.0, distilled=True), {"images": images(1, 3)}, 11)
    save("timm_vit", TimmVisionTransformer(8, 2, 1, 3, 16, 1, 4, 3.0, attn_dim=24), {"images": images(2, 1)}, 12)
    # Hugging Face: ViTForImageClassification (eps 1e-12, no config file) and a DeiT with its config.json.
    vit = dict(image_size=8, patch_size=4, num_channels=3, hidden_size=16, num_hidden_layers=2,
               num_attention_heads=2, intermediate_size=32, layer_norm_eps=1e-12, num_labels=4)
    save("hf_vit", HfViTForImageClassification(vit), {"images": images(3, 3)}, 13)
    deit = dict(image_size=8, patch_size=4, num_channels=3, hidden_size=16, num_hidden_layers=1,
                num_attention_heads=4, intermediate_size=24, layer_norm_eps=1e-6, num_labels=5)
    save("hf_deit", HfDeiTForImageClassificationWithTeacher(deit), {"images": images(4, 3)}, 14)
    config = {k: v for k, v in deit.items() if k != "num_labels"}
    config.update(model_type="deit", architectures=["DeiTForImageClassificationWithTeacher"], hidden_act="gelu",
                  qkv_bias=True, id2label={str(i): f"LABEL_{i}" for i in range(5)})
    with open(os.path.join(OUT, "interop_hf_deit.config.json"), "w") as f:
        json.dump(config, f, indent=2)
    # fairseq: right-padded sources (pad 1, eos 2), prev_output_tokens starting with eos.
    tokens = {"src": torch.tensor([[4, 5, 6, 7, 2], [8, 9, 10, 2, 1]]), "tgt": torch.tensor([[2, 5, 6, 7], [2, 9, 4, 3]])}
    post = dict(vocab=13, embed_dim=16, ffn_embed_dim=32, layers=2, heads=4, normalize_before=False,
                learned_pos=False, share_all_embeddings=True, activation_fn="relu", no_scale_embedding=False)
    model = save("fairseq_post", FairseqTransformerModel(post), tokens, 15)
    safetensors_io.save(os.path.join(OUT, "interop_fairseq_post_legacy.safetensors"),
                        legacy_fairseq(model.state_dict()), {"format": "pt"})
    pre = dict(vocab=11, embed_dim=16, ffn_embed_dim=24, layers=2, heads=2, normalize_before=True,
               learned_pos=True, max_positions=8, share_all_embeddings=False, activation_fn="gelu",
               no_scale_embedding=True)
    save("fairseq_pre", FairseqTransformerModel(pre), tokens, 16)


if __name__ == "__main__":
    torch.manual_seed(0)
    generate()
    print("generated the interop fixtures in", OUT)
