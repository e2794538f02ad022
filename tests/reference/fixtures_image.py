"""Fixtures for the image transforms (framework/data/image_transforms.h,
rand_augment.h): one file, image_transforms.safetensors, whose tensors are
uint8 images stored as i32 [H, W, C] (f32 [C, H, W] for the normalisation).

in.rgb [13, 17, 3] and in.grey [13, 17, 1] are random; every other tensor is
torchvision.transforms.functional applied to them as uint8 tensors (resize
with antialias=True, which computes in f32 and rounds once), except the
geometric RandAugment ops, which timm runs through PIL's Image.transform /
Image.rotate with bicubic resampling and the ImageNet-mean fill: those are
PIL on the same pixels (PIL is what torchvision uses for PIL images).

image_decode.safetensors: small image files written under fixtures/images/
(PNG: RGB, grey, palette, RGBA, grey+alpha, 16-bit grey; JPEG: RGB, grey,
CMYK) and what PIL decodes them to: <file>.rgb = convert("RGB"),
<file>.grey = convert("L"), as i32 [H, W, C]. The 16-bit grey PNG is
written by hand (PIL cannot) and its expected pixels are the high bytes.
"""
import os
import struct
import zlib

import numpy as np
import torch
import torchvision.transforms.functional as F
from PIL import Image
from torchvision.transforms import InterpolationMode

import safetensors_io

HERE = os.path.dirname(os.path.abspath(__file__))
FILL = (124, 116, 104)


def hwc(t):  # CHW uint8 -> HWC i32
    return t.permute(1, 2, 0).contiguous().to(torch.int32)


def pil_of(t):  # CHW uint8 -> PIL
    return Image.fromarray(t.permute(1, 2, 0).squeeze(-1).numpy() if t.shape[0] == 1 else t.permute(1, 2, 0).numpy())


def from_pil(im):
    t = torch.as_tensor(np.array(im))
    if t.dim() == 2:
        t = t.unsqueeze(-1)
    return t.to(torch.int32)


def generate(emit):
    g = torch.Generator().manual_seed(11)
    rgb = torch.randint(0, 256, (3, 13, 17), generator=g, dtype=torch.uint8)
    grey = torch.randint(40, 200, (1, 13, 17), generator=g, dtype=torch.uint8)
    bic, bil = InterpolationMode.BICUBIC, InterpolationMode.BILINEAR
    out = {"in.rgb": hwc(rgb), "in.grey": hwc(grey)}
    for name, img in (("rgb", rgb), ("grey", grey)):
        out[f"resize_down.{name}"] = hwc(F.resize(img, [7, 9], bic, antialias=True))
        out[f"resize_up.{name}"] = hwc(F.resize(img, [20, 25], bic, antialias=True))
        out[f"auto_contrast.{name}"] = hwc(F.autocontrast(img))
        out[f"equalize.{name}"] = hwc(F.equalize(img))
        out[f"contrast_0.3.{name}"] = hwc(F.adjust_contrast(img, 0.3))
        out[f"contrast_1.7.{name}"] = hwc(F.adjust_contrast(img, 1.7))
        out[f"sharpness_0.3.{name}"] = hwc(F.adjust_sharpness(img, 0.3))
        out[f"sharpness_1.7.{name}"] = hwc(F.adjust_sharpness(img, 1.7))
    out["resize_bilinear_down.rgb"] = hwc(F.resize(rgb, [7, 9], bil, antialias=True))
    out["resize_shorter_10.rgb"] = hwc(F.resize(rgb, 10, bic, antialias=True))
    out["resized_crop.rgb"] = hwc(F.resized_crop(rgb, 2, 3, 9, 11, [8, 8], bic, antialias=True))
    out["center_crop_8x9.rgb"] = hwc(F.center_crop(rgb, [8, 9]))
    out["hflip.rgb"] = hwc(F.hflip(rgb))
    out["invert.rgb"] = hwc(F.invert(rgb))
    out["posterize_3.rgb"] = hwc(F.posterize(rgb, 3))
    out["solarize_100.rgb"] = hwc(F.solarize(rgb, 100))
    for f in (0.3, 1.7):
        out[f"color_{f}.rgb"] = hwc(F.adjust_saturation(rgb, f))
        out[f"brightness_{f}.rgb"] = hwc(F.adjust_brightness(rgb, f))
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    out["normalize.rgb"] = F.normalize(rgb.float() / 255, mean, std)
    # Geometric ops through PIL, as timm's auto_augment calls them.
    pil = pil_of(rgb)
    kw = dict(resample=Image.BICUBIC, fillcolor=FILL)
    out["rotate_23.5.rgb"] = from_pil(F.rotate(pil, 23.5, InterpolationMode.BICUBIC, fill=list(FILL)))
    out["rotate_-17.rgb"] = from_pil(pil.rotate(-17.0, **kw))
    out["shear_x_0.21.rgb"] = from_pil(pil.transform(pil.size, Image.AFFINE, (1, 0.21, 0, 0, 1, 0), **kw))
    out["shear_y_-0.27.rgb"] = from_pil(pil.transform(pil.size, Image.AFFINE, (1, 0, 0, -0.27, 1, 0), **kw))
    out["translate_x_3.4.rgb"] = from_pil(pil.transform(pil.size, Image.AFFINE, (1, 0, 3.4, 0, 1, 0), **kw))
    out["translate_y_-2.6.rgb"] = from_pil(pil.transform(pil.size, Image.AFFINE, (1, 0, 0, 0, 1, -2.6), **kw))
    safetensors_io.save(os.path.join(HERE, "fixtures", "image_transforms.safetensors"), out)
    generate_decode()


def png_grey16(path, values):
    """A 16-bit greyscale PNG (values: uint16 [H, W]) written chunk by chunk."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    h, w = values.shape
    raw = b"".join(b"\x00" + values[y].astype(">u2").tobytes() for y in range(h))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 0, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def generate_decode():
    folder = os.path.join(HERE, "fixtures", "images")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(5)
    # Smooth content, so JPEG keeps it recognisable.
    yy, xx = np.mgrid[0:12, 0:10]
    rgb = np.stack([yy * 20, xx * 25, 255 - yy * 10 - xx * 8], -1).astype(np.uint8)
    images = {
        "rgb.png": Image.fromarray(rgb),
        "grey.png": Image.fromarray(rgb[..., 0]),
        "palette.png": Image.fromarray(rgb).quantize(colors=16),
        "rgba.png": Image.fromarray(np.concatenate([rgb, rng.integers(0, 256, (12, 10, 1), dtype=np.uint8)], -1)),
        "grey_alpha.png": Image.fromarray(rgb[..., :2].copy(), mode="LA"),
        "rgb.jpg": Image.fromarray(rgb),
        "grey.jpg": Image.fromarray(rgb[..., 1]),
        "cmyk.jpg": Image.fromarray(rgb).convert("CMYK"),
    }
    out = {}
    for name, im in images.items():
        path = os.path.join(folder, name)
        im.save(path, quality=90) if name.endswith(".jpg") else im.save(path)
        with Image.open(path) as back:
            out[name + ".rgb"] = from_pil(back.convert("RGB"))
            out[name + ".grey"] = from_pil(back.convert("L"))
    grey16 = (rng.integers(0, 65536, (5, 7))).astype(np.uint16)
    png_grey16(os.path.join(folder, "grey16.png"), grey16)
    out["grey16.png.grey"] = torch.as_tensor((grey16 >> 8).astype(np.int32)).unsqueeze(-1)
    safetensors_io.save(os.path.join(HERE, "fixtures", "image_decode.safetensors"), out)


if __name__ == "__main__":
    generate(None)
