#!/usr/bin/python3
"""Sorts the flat ILSVRC-2012 validation images into one folder per class.

The validation archive unpacks to 50 000 files ILSVRC2012_val_00000001.JPEG,
... with no classes; the development kit (ILSVRC2012_devkit_t12.tar.gz) holds
their labels: data/ILSVRC2012_validation_ground_truth.txt has one ILSVRC2012_ID
(1..1000) per image, in file-number order, and data/meta.mat maps each ID to
its WordNet id (n01440764, ...), the folder names of the training archive.
This moves VAL_DIR/ILSVRC2012_val_<n>.JPEG to VAL_DIR/<wnid>/, the
ImageFolder layout `cmha train` and `cmha eval --data` read (classes are the
sorted folder names, as in training).

  imagenet_val_folders.py VAL_DIR --devkit DEVKIT_DIR [--dry-run]

Needs scipy (Debian: python3-scipy) to read meta.mat.
"""
import argparse
import os
import sys


def read_wnids(meta_path):
    """ILSVRC2012_ID -> WNID for the 1000 leaf classes of meta.mat."""
    try:
        import scipy.io
    except ImportError:
        sys.exit("imagenet_val_folders.py: needs scipy to read meta.mat (apt-get install python3-scipy)")
    if not os.path.isfile(meta_path):
        sys.exit(f"imagenet_val_folders.py: '{meta_path}' does not exist (is --devkit the unpacked devkit?)")
    synsets = scipy.io.loadmat(meta_path, squeeze_me=True)["synsets"]
    wnids = {}
    for s in synsets:
        if int(s["num_children"]) == 0:  # the leaves are the 1000 classes
            wnids[int(s["ILSVRC2012_ID"])] = str(s["WNID"])
    return wnids


def read_ground_truth(path):
    if not os.path.isfile(path):
        sys.exit(f"imagenet_val_folders.py: '{path}' does not exist (is --devkit the unpacked devkit?)")
    with open(path, encoding="ascii") as f:
        return [int(line) for line in f if line.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("val_dir", help="folder with the flat ILSVRC2012_val_*.JPEG files")
    ap.add_argument("--devkit", required=True, help="the unpacked ILSVRC2012_devkit_t12 folder")
    ap.add_argument("--dry-run", action="store_true", help="print what would move, move nothing")
    args = ap.parse_args(argv)
    data = os.path.join(args.devkit, "data")
    wnids = read_wnids(os.path.join(data, "meta.mat"))
    truth = read_ground_truth(os.path.join(data, "ILSVRC2012_validation_ground_truth.txt"))
    moved = already = 0
    for number, class_id in enumerate(truth, 1):
        if class_id not in wnids:
            sys.exit(f"imagenet_val_folders.py: ground truth line {number} names class {class_id}, not in meta.mat")
        name = f"ILSVRC2012_val_{number:08d}.JPEG"
        source = os.path.join(args.val_dir, name)
        target_dir = os.path.join(args.val_dir, wnids[class_id])
        if os.path.isfile(os.path.join(target_dir, name)):
            already += 1  # a second run continues where the first stopped
            continue
        if not os.path.isfile(source):
            sys.exit(f"imagenet_val_folders.py: '{source}' does not exist (ground truth line {number})")
        if args.dry_run:
            print(f"{source} -> {target_dir}/")
        else:
            os.makedirs(target_dir, exist_ok=True)
            os.replace(source, os.path.join(target_dir, name))
        moved += 1
    classes = len({wnids[c] for c in truth})
    print(f"{'would move' if args.dry_run else 'moved'} {moved} images ({already} already in place) "
          f"into {classes} class folders under {args.val_dir}")


if __name__ == "__main__":
    main()
