#!/usr/bin/python3
"""A set of ImageNet-like JPEGs for the image pipeline benchmarks, made from
the natural photos that Debian packages ship (python3-skimage's data and
python3-matplotlib's sample data): each file is a random crop (a third of the
photo's area or more, 4:3 or 3:4) rescaled to 500×375 or 375×500 (ImageNet's
most common sizes) and saved at JPEG quality 85..95 (4:2:0, as most photos),
into an ImageFolder <out>/<photo>/<n>.jpg. Seeded: the same set every time.

  /usr/bin/python3 tests/bench/make_photo_set.py OUT_DIR [COUNT=2000]

Needs python3-pil, python3-skimage and python3-matplotlib (Debian).
"""
import os
import random
import sys

from PIL import Image

SKIMAGE = "/usr/lib/python3/dist-packages/skimage/data/"
PHOTOS = [SKIMAGE + f for f in ("astronaut.png", "chelsea.png", "coffee.png", "hubble_deep_field.jpg", "ihc.png",
                                "motorcycle_left.png", "motorcycle_right.png", "retina.jpg", "rocket.jpg")]
PHOTOS.append("/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg")


def main():
    out, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    missing = [p for p in PHOTOS if not os.path.isfile(p)]
    if missing:
        sys.exit(f"{missing[0]}: missing (apt-get install python3-skimage python3-matplotlib)")
    rng = random.Random(2024)
    sources = [Image.open(p).convert("RGB") for p in PHOTOS]
    for i in range(count):
        k = i % len(sources)
        src = sources[k]
        W, H = src.size
        landscape = rng.random() < 0.75
        aspect = 4 / 3 if landscape else 3 / 4
        area = W * H * rng.uniform(1 / 3, 1.0)
        w = min(W, round((area * aspect) ** 0.5))
        h = min(H, round(w / aspect))
        w = min(w, round(h * aspect))
        left, top = rng.randint(0, W - w), rng.randint(0, H - h)
        size = (500, 375) if landscape else (375, 500)
        im = src.crop((left, top, left + w, top + h)).resize(size, Image.LANCZOS)
        if rng.random() < 0.5:
            im = im.transpose(Image.FLIP_LEFT_RIGHT)
        folder = os.path.join(out, os.path.splitext(os.path.basename(PHOTOS[k]))[0])
        os.makedirs(folder, exist_ok=True)
        im.save(os.path.join(folder, f"{i:05d}.jpg"), quality=rng.randint(85, 95))
    print(f"{count} JPEGs in {out}")


if __name__ == "__main__":
    main()
