#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/<target>/ (committed; run again only
to change them). Standard library only, except Pillow for the JPEG and PNG
seeds (python3-pil, which python3-matplotlib pulls in). Deterministic.

    python3 tests/fuzz/make_seeds.py
"""
import gzip
import io
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def out(target, name, data):
    os.makedirs(os.path.join(HERE, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(HERE, target, name), "wb") as f:
        f.write(data)


# ---- safetensors / checkpoints ------------------------------------------------
def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)] in file order."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


RECIPE = "model:\n  d_model: 8\n  attention:\n    type: collaborative\n    key_dim: 4\noptim:\n  betas: [0.9, 0.98]\n"
TRAINER = json.dumps({"update": 3, "epoch": 0, "best": 1.5, "rng": [1, 2, 3]})


def safetensors_seeds():
    w = f32(0.5, -1.0, 2.0, 0.0, 3.25, -0.125)
    out("safetensors", "checkpoint.safetensors", safetensors(
        [("embed.weight", "F32", [2, 3], w),
         ("optimizer.exp_avg.embed.weight", "F32", [2, 3], w),
         ("optimizer.step", "I64", [1], struct.pack("<q", 3)),
         ("ema.embed.weight", "F32", [2, 3], w),
         ("mask", "BOOL", [4], bytes([1, 0, 1, 1])),
         ("half", "F16", [2], struct.pack("<2e", 1.0, -2.0)),
         ("brain", "BF16", [2], bytes([0x80, 0x3f, 0x00, 0xc0])),
         ("ids", "I32", [3], struct.pack("<3i", 7, -1, 0)),
         ("empty", "F32", [0, 4], b"")],
        {"format": "cmha-checkpoint-1", "recipe": RECIPE, "trainer": TRAINER}))
    out("safetensors", "weights_only.safetensors", safetensors([("w", "F32", [2], f32(1.0, 2.0))]))
    out("safetensors", "scalar_and_metadata.safetensors",
        safetensors([("s", "F32", [], f32(4.0))], {"format": "other", "note": "ü"}))
    # A real fixture of the test suite (written by tests/reference/make_fixtures.py).
    shutil.copy(os.path.join(ROOT, "tests/reference/fixtures/exp.safetensors"),
                os.path.join(HERE, "safetensors", "fixture_exp.safetensors"))


# ---- recipes ---------------------------------------------------------------------
def recipe_seeds():
    for rel in ["recipes/local/fashion_mnist_vit.yaml", "recipes/local/en_de_transformer_small.yaml",
                "recipes/bench/transformer_small_collab_dk64.yaml", "configs/transformer_base.yaml",
                "configs/deit_data.yaml"]:
        with open(os.path.join(ROOT, rel)) as f:
            out("recipe", os.path.basename(rel), f.read())
    with open(os.path.join(ROOT, "configs/deit_base.yaml")) as f:
        base = f.read()
    out("recipe", "include_and_overrides.yaml",
        "include: [deit_base.yaml, data.yaml]\nmodel:\n  depth: 3\n#= model.attention.type=collaborative\n"
        "#= optim.betas=[0.8, 0.9]\n#= train.save_dir=runs/x\n#> deit_base.yaml\n" + base +
        "#> data.yaml\ndata:\n  format: idx\n  batch_size: 16\n")
    out("recipe", "nested_include.yaml",
        "include: a.yaml\nlr: {schedule: cosine}\n#> a.yaml\ninclude: b.yaml\nmodel: {d_model: 16}\n"
        "#> b.yaml\nmodel:\n  ffn_dim: 32\n  encoder_attention: {type: grouped, kv_heads: 2}\n")
    out("recipe", "duplicate_key.yaml", "model:\n  d_model: 2\nmodel.d_model: 3\n")
    out("recipe", "anchors.yaml",
        "model: &m\n  d_model: 8\n  attention: &a {type: talking_heads, heads: 2}\n"
        "  cross_attention: *a\noptim: {betas: &b [0.9, 0.99]}\n#= model.dropout=0.0\n")
    out("recipe", "flow_and_types.yaml",
        "{model: {kind: transformer, pre_norm: yes, layer_norm_eps: 1.0e-6}, train: {seed: 0x10}}\n"
        "#= train.max_updates=7\n")


# ---- IDX ---------------------------------------------------------------------------
def idx(dims, values):
    return struct.pack(">BBBB", 0, 0, 8, len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + bytes(values)


def idx_seeds():
    labels = idx([10], [i % 10 for i in range(10)])
    images = idx([2, 4, 4], [(17 * i) % 256 for i in range(32)])
    out("idx", "labels.idx", labels)
    out("idx", "images.idx", images)
    out("idx", "images.idx.gz", gzip.compress(images, mtime=0))
    out("idx", "empty_images.idx", idx([0, 28, 28], []))


# ---- images --------------------------------------------------------------------------
def image_seeds():
    from PIL import Image
    rgb = Image.new("RGB", (5, 3))
    rgb.putdata([((40 * i) % 256, (90 * i) % 256, (10 * i) % 256) for i in range(15)])

    def save(name, im, **kw):
        b = io.BytesIO()
        im.save(b, **kw)
        out("image", name, b.getvalue())

    save("rgb.jpg", rgb, format="JPEG", quality=75)
    save("grey.jpg", rgb.convert("L"), format="JPEG", quality=75)
    save("progressive.jpg", rgb, format="JPEG", quality=60, progressive=True)
    save("cmyk.jpg", rgb.convert("CMYK"), format="JPEG", quality=75)
    save("rgb.png", rgb, format="PNG")
    save("grey.png", rgb.convert("L"), format="PNG")
    save("palette.png", rgb.convert("P"), format="PNG")
    save("rgba_interlaced.png", rgb.convert("RGBA"), format="PNG", interlace=1)
    save("one_bit.png", rgb.convert("1"), format="PNG")
    grey16 = Image.new("I;16", (3, 2))
    grey16.putdata([0, 1000, 30000, 65535, 256, 7])
    save("grey16.png", grey16, format="PNG")


# ---- corpus lines and token caches ---------------------------------------------------
def corpus_seeds():
    out("corpus", "lines.en", "Open the file in a new window.\nThe cat sat on the mat.\n\nLast line\n")
    out("corpus", "crlf_no_final_newline.de", "Öffne die Datei.\r\nDas Fenster schließt sich.\r\nEnde")
    out("corpus", "unicode.txt", "naïve café — “quoted”\n日本語のテキスト\nemoji 🙂 and U+00A0:\u00a0.\n")


def token_cache(key, sentences):
    offsets = [0]
    for s in sentences:
        offsets.append(offsets[-1] + len(s))
    header = b"CMHATOK1" + struct.pack("<IIQQQ", 1, 4, key, len(sentences), offsets[-1])
    header += b"\0" * (64 - len(header))
    ids = b"".join(struct.pack("<%di" % len(s), *s) for s in sentences)
    return header + struct.pack("<%dQ" % len(offsets), *offsets) + ids


def token_cache_seeds():
    out("token_cache", "three_sentences.bin", token_cache(0x1234, [[5, 6, 7], [], [8, 9]]))
    out("token_cache", "empty.bin", token_cache(1, []))


# ---- BLEU lines ------------------------------------------------------------------------
def bleu_seeds():
    out("bleu", "english.txt", "The cat sat on the mat.\nIt's 3.5% cheaper -- isn't it?\n"
        "The cat sat on a mat .\nIt is 3.5 % cheaper, is it not?\n")
    out("bleu", "german_compounds.txt", "Das Hotel-Restaurant ist sehr gut.\nEin Straßen-Bahn-Netz, \"gebaut\" 2014.\n"
        "Das Hotelrestaurant ist gut.\nEin Straßenbahn-Netz, gebaut 2014.\n")
    out("bleu", "unicode.txt", "ΟΔΥΣΣΕΥΣ and İstanbul: ½ € 5–6 «cités»\n中文，测试。日本語「テスト」\n"
        "odysseus\u00a0and\u3000istanbul \u2028 end\u0085\n\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\n")
    out("bleu", "markup.txt", "<skipped> &quot;a&quot; &amp; b &lt;c&gt;\nline-with-hyphen a-b-c - x\n"
        "&amp;quot; 1,000,000.00 $\n- leading dash\n")


# ---- dictionaries (libFuzzer -dict: tokens that mutations insert whole) -----------------
def dictionary(name, tokens):
    lines = ["# Written by tests/fuzz/make_seeds.py."]
    for t in sorted(set(tokens)):
        lines.append('"%s"' % "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "\\x%02X" % ord(c) for c in t))
    with open(os.path.join(HERE, name + ".dict"), "w") as f:
        f.write("\n".join(lines) + "\n")


def dictionaries():
    import glob
    import re
    # Every part of every recipe key, from the registry's sources.
    with open(os.path.join(ROOT, "framework/run/options.cpp")) as f:
        parts = {p for path in re.findall(r'(?:add|choice)\("([a-z_0-9.]+)"', f.read()) for p in path.split(".")}
    for src in glob.glob(os.path.join(ROOT, "framework/nn/attention/*.cpp")):
        with open(src) as f:
            parts.update(re.findall(r'\.name = "([a-z_0-9]+)"', f.read()))
    yaml = ["include: ", "#> ", "#= ", ": ", "- ", "&a ", "*a", "!!str ", "!!int ", "!!map", "{", "}", "[", "]",
            ", ", "'", '"', "|", ">", "---", "...", "~", "null", "true", "false", "1e-300", ".inf", ".nan", "0x"]
    dictionary("recipe", sorted(parts) + yaml)
    dictionary("safetensors", ['"dtype"', '"shape"', '"data_offsets"', '"__metadata__"', '"format"', '"recipe"',
                               '"trainer"', '"cmha-checkpoint-1"', '"F32"', '"BF16"', '"F16"', '"I32"', '"I64"',
                               '"BOOL"', '"optimizer.', '"ema.', "[0,0]", "18446744073709551615", "-1", "{}", "[]"])


if __name__ == "__main__":
    dictionaries()
    safetensors_seeds()
    recipe_seeds()
    idx_seeds()
    image_seeds()
    corpus_seeds()
    token_cache_seeds()
    bleu_seeds()
