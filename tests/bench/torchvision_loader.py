#!/usr/bin/python3
"""The reference for image_loader_bench: DeiT's train or eval transforms in
torchvision 0.14 on PIL (Debian python3-torchvision), over an ImageFolder, with
a DataLoader of W worker processes of one thread each, batches of 32.

  train: RandomResizedCrop(224, bicubic), RandomHorizontalFlip, RandAugment(2 ops,
         magnitude 9, bicubic), ToTensor, Normalize, RandomErasing(0.25, per-pixel
         normal values), then per batch mixup (α 0.8) or CutMix (α 1.0), one of the
         two with probability 1/2, as timm's Mixup(mode="batch")
  eval:  Resize(256, bicubic), CenterCrop(224), ToTensor, Normalize

Prints one JSON line: {"images": N, "seconds": s, "images_per_s": N / s,
"images_per_cpu_s": N / the CPU time of this process and its workers}: on a
loaded machine the CPU time is the fairer "per core" measure.

  /usr/bin/python3 tests/bench/torchvision_loader.py DIR --mode train|eval --workers W [--stride K]
"""
import argparse
import json
import resource
import time

import torch
import torchvision
from torchvision import transforms as T

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
BICUBIC = T.InterpolationMode.BICUBIC


def mix(images, rng):
    """timm's batch mixup/CutMix: the batch mixed with itself reversed."""
    B, _, H, W = images.shape
    if rng.random() < 0.5:
        lam = float(torch.distributions.Beta(1.0, 1.0).sample())
        cut = (1 - lam) ** 0.5
        ch, cw = int(H * cut), int(W * cut)
        cy, cx = rng.randrange(H), rng.randrange(W)
        y0, y1 = max(cy - ch // 2, 0), min(cy + ch // 2, H)
        x0, x1 = max(cx - cw // 2, 0), min(cx + cw // 2, W)
        images[:, :, y0:y1, x0:x1] = images.flip(0)[:, :, y0:y1, x0:x1]
    else:
        lam = float(torch.distributions.Beta(0.8, 0.8).sample())
        images.mul_(lam).add_(images.flip(0).mul_(1 - lam))
    return images


def one_thread(_):
    torch.set_num_threads(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--mode", choices=["train", "eval"], default="train")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--stride", type=int, default=1, help="every k-th file of the sorted list only")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.mode == "train":
        tf = T.Compose([T.RandomResizedCrop(224, interpolation=BICUBIC), T.RandomHorizontalFlip(),
                        T.RandAugment(num_ops=2, magnitude=9, interpolation=BICUBIC), T.ToTensor(),
                        T.Normalize(MEAN, STD), T.RandomErasing(p=0.25, value="random")])
    else:
        tf = T.Compose([T.Resize(256, interpolation=BICUBIC), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)])
    ds = torchvision.datasets.ImageFolder(a.dir, tf)
    if a.stride > 1:
        ds = torch.utils.data.Subset(ds, range(0, len(ds), a.stride))
    import random
    rng = random.Random(1)
    loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=a.mode == "train", num_workers=a.workers,
                                         worker_init_fn=one_thread, drop_last=a.mode == "train")
    def cpu_seconds():
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    c0, t0 = cpu_seconds(), time.perf_counter()
    n = 0
    for images, _ in loader:
        if a.mode == "train":
            images = mix(images, rng)
        n += images.shape[0]
    del loader  # the workers exit and are waited for: their CPU time is counted
    s, c = time.perf_counter() - t0, cpu_seconds() - c0
    print(json.dumps({"images": n, "seconds": s, "images_per_s": n / s, "images_per_cpu_s": n / c}))


if __name__ == "__main__":
    main()
