#!/usr/bin/env python3
"""Writes Fashion-MNIST as PNG files in class folders (torchvision ImageFolder's layout):

    OUT/train/<class>/<index>.png   (60,000 files, or --per-class of each class)
    OUT/test/<class>/<index>.png    (10,000 files, or --per-class of each class)

from the IDX files of Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist).
Each PNG is 8-bit grey 28 x 28 holding the IDX bytes exactly. Class folders are named after
Fashion-MNIST's labels ("T-shirt_top", "Trouser", ...); ImageFolder sorts them by name, so
the class indices of the folder differ from the IDX label numbers, and the checkpoint keeps
the names. Standard library only (zlib, gzip, struct): no PIL needed.

    python3 scripts/make_fmnist_png_folder.py --out /tmp/fmnist_png            # the full set
    python3 scripts/make_fmnist_png_folder.py --out tests/fixtures/fmnist_png \\
        --per-class 3 --test-per-class 1                                          # the checked-in slice
"""
import argparse
import gzip
import os
import struct
import sys
import zlib

NAMES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, kind, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != 0x08:
        sys.exit(f"{path}: not a uint8 IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4: 4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


def png_grey(width, height, pixels):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    rows = b"".join(b"\0" + pixels[y * width:(y + 1) * width] for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def write_split(idx_dir, prefix, out, per_class):
    (n, h, w), images = read_idx(os.path.join(idx_dir, f"{prefix}-images-idx3-ubyte.gz"))
    (m,), labels = read_idx(os.path.join(idx_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    if n != m:
        sys.exit(f"{prefix}: {n} images but {m} labels")
    count = [0] * len(NAMES)
    for i in range(n):
        k = labels[i]
        if per_class is not None and count[k] >= per_class:
            continue
        count[k] += 1
        folder = os.path.join(out, NAMES[k])
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{i:05d}.png"), "wb") as f:
            f.write(png_grey(w, h, images[i * h * w:(i + 1) * h * w]))
    return sum(count)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--idx-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-class", type=int, default=None, help="training images per class (default: all)")
    ap.add_argument("--test-per-class", type=int, default=None, help="test images per class (default: all)")
    a = ap.parse_args()
    tr = write_split(a.idx_dir, "train", os.path.join(a.out, "train"), a.per_class)
    te = write_split(a.idx_dir, "t10k", os.path.join(a.out, "test"), a.test_per_class)
    print(f"wrote {tr} training and {te} test PNGs under {a.out}")


if __name__ == "__main__":
    main()
