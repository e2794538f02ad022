#!/usr/bin/env python3
"""Interop fixtures from the real libraries (tests/unit/interop_real_test.cpp):
small timm and Hugging Face transformers vision transformers with random
weights, built by the libraries' own classes (the look-alikes of
interop_models.py stand in for them where only Debian's PyTorch is at hand):

  interop_real_<name>.safetensors     what the library saves: timm's state_dict
                                      (metadata {"format": "pt"}), or the
                                      model.safetensors of transformers'
                                      save_pretrained
  interop_real_<name>.io.safetensors  in.images and out, the model's logits in eval mode
  interop_real_<name>.config.json     transformers' config.json (save_pretrained's)

Run from the benchmark venv (exact versions in tests/bench/python/requirements.txt):

  $(tests/bench/python/bench_python.sh) tests/reference/fixtures_interop_real.py

The fixtures are committed: the tests need none of these packages.
"""
import os
import shutil
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402


def randomise(module, seed):
    """Every parameter uniform in [-0.5, 0.5): far from the libraries' inits, so a swapped
    or transposed tensor cannot go unnoticed."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * 0.5)


def images(seed, channels, size=8):
    return torch.rand(2, channels, size, size, generator=torch.Generator().manual_seed(seed)) * 2 - 1


def logits(model, x):
    model.eval()
    with torch.no_grad():
        out = model(x)
    return out.logits if hasattr(out, "logits") else out


def save_io(name, x, out):
    safetensors_io.save(os.path.join(OUT, f"interop_real_{name}.io.safetensors"), {"in.images": x, "out": out})


def timm_fixture(name, model, x, seed):
    randomise(model, seed)
    save_io(name, x, logits(model, x))
    safetensors_io.save(os.path.join(OUT, f"interop_real_{name}.safetensors"), model.state_dict(), {"format": "pt"})


def transformers_fixture(name, model, x, seed):
    randomise(model, seed)
    save_io(name, x, logits(model, x))
    tmp = tempfile.mkdtemp()
    try:
        model.save_pretrained(tmp)
        shutil.copy(os.path.join(tmp, "model.safetensors"), os.path.join(OUT, f"interop_real_{name}.safetensors"))
        shutil.copy(os.path.join(tmp, "config.json"), os.path.join(OUT, f"interop_real_{name}.config.json"))
    finally:
        shutil.rmtree(tmp)


def main():
    import timm
    import transformers
    from timm.models.deit import VisionTransformerDistilled
    from timm.models.vision_transformer import VisionTransformer
    from transformers import DeiTConfig, DeiTForImageClassificationWithTeacher, ViTConfig, ViTForImageClassification

    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    timm_fixture("timm_deit", VisionTransformerDistilled(img_size=8, patch_size=4, in_chans=3, num_classes=5,
                                                          embed_dim=16, depth=2, num_heads=4, mlp_ratio=2.0),
                 images(21, 3), 31)
    timm_fixture("timm_vit", VisionTransformer(img_size=8, patch_size=2, in_chans=1, num_classes=3, embed_dim=16,
                                               depth=1, num_heads=4, mlp_ratio=3.0),
                 images(22, 1), 32)
    vit = ViTConfig(image_size=8, patch_size=4, num_channels=3, hidden_size=16, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=32, num_labels=4)
    transformers_fixture("hf_vit", ViTForImageClassification(vit), images(23, 3), 33)
    deit = DeiTConfig(image_size=8, patch_size=4, num_channels=3, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=4, intermediate_size=24, layer_norm_eps=1e-6, num_labels=5)
    transformers_fixture("hf_deit", DeiTForImageClassificationWithTeacher(deit), images(24, 3), 34)
    print(f"generated the real-library interop fixtures in {OUT} (timm {timm.__version__}, "
          f"transformers {transformers.__version__}, torch {torch.__version__})")


if __name__ == "__main__":
    main()
