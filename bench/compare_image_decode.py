#!/usr/bin/python3
"""data::decode_image beside PIL on the same files: pixels, then decode speed.

  /usr/bin/python3 bench/compare_image_decode.py build/bench/image_decode

1. Pixels: every PNG and JPEG sample image of Debian's python3-skimage (real photographs and
   test images), decoded by tapegrad (image_decode --dump) and by PIL, in tapegrad's channel
   layout (grey 1, RGB 3, RGBA / LA / palette with transparency 4): the largest difference
   per file (0 expected for PNG, <= 1 for JPEG), and refusals (a truncated file).
2. Speed: 28 x 28 grey PNGs (the Fashion-MNIST slice of tests/fixtures), and a 224 x 224 RGB
   photograph (skimage's astronaut, resized by PIL) as PNG and as JPEG quality 90: mean
   microseconds per decode from bytes in memory, best of 5 rounds, for both decoders; also
   bytes -> float32 (C, H, W) in [0, 1] (tapegrad's image_to_tensor; for PIL
   numpy.asarray(img, float32).transpose / 255, what torchvision's ToTensor computes).
Needs python3-pil, python3-numpy, python3-skimage.
"""
import glob
import io
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image

SK = "/usr/lib/python3/dist-packages/skimage/data"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pil_layout(im):
    if im.mode in ("L", "RGB"):
        return im
    if im.mode == "1":
        return im.convert("L")
    if im.mode == "P":
        return im.convert("RGBA" if "transparency" in im.info else "RGB")
    if im.mode in ("LA", "RGBA", "PA"):
        return im.convert("RGBA")
    if im.mode in ("I;16", "I;16B", "I"):
        return None
    return None


def pixels(exe):
    print("| file | size (W x H) | PIL mode | C | max abs diff |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for f in sorted(glob.glob(SK + "/*.png")) + sorted(glob.glob(SK + "/*.jpg")):
            name = os.path.basename(f)
            try:
                im = Image.open(f)
                im.load()
                want = pil_layout(im)
            except OSError as e:
                want, im = None, None
                pil_err = str(e)
            out = os.path.join(tmp, "px")
            r = subprocess.run([exe, "--dump", f, out], capture_output=True, text=True)
            if im is None:
                ours = "refused too" if r.returncode != 0 else "DECODED"
                print(f"| {name} | - | PIL: {pil_err} | - | {ours}: {r.stderr.strip()[:90]} |")
                continue
            if want is None:
                print(f"| {name} | {im.size[0]} x {im.size[1]} | {im.mode} | - | (no 8-bit layout to compare) |")
                continue
            if r.returncode != 0:
                print(f"| {name} | {im.size[0]} x {im.size[1]} | {im.mode} | - | REFUSED: {r.stderr.strip()[:90]} |")
                continue
            h, w, c = map(int, r.stdout.split())
            got = np.fromfile(out, dtype=np.uint8)
            ref = np.frombuffer(want.tobytes(), dtype=np.uint8)
            if (w, h) != want.size or got.size != ref.size:
                print(f"| {name} | {w} x {h} | {im.mode} | {c} | SHAPE DIFFERS ({got.size} vs {ref.size} bytes) |")
                continue
            diff = int(np.abs(got.astype(int) - ref.astype(int)).max())
            print(f"| {name} | {w} x {h} | {im.mode} | {c} | {diff} |")


def pil_time(data, repeats, to_tensor):
    best = 1e300
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeats):
            im = Image.open(io.BytesIO(data))
            im.load()
            if to_tensor:
                a = np.asarray(im, dtype=np.float32)
                a = (a.transpose(2, 0, 1) if a.ndim == 3 else a[None]) / 255.0
            else:
                a = np.asarray(im)
        best = min(best, (time.perf_counter() - t0) / repeats * 1e6)
    return best


def speed(exe):
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        fm = sorted(glob.glob(os.path.join(ROOT, "tests/fixtures/fmnist_png/test/*/*.png")))
        astro = Image.open(SK + "/astronaut.png").convert("RGB").resize((224, 224), Image.BILINEAR)
        png224 = os.path.join(tmp, "astronaut_224.png")
        jpg224 = os.path.join(tmp, "astronaut_224.jpg")
        astro.save(png224)
        astro.save(jpg224, quality=90)
        groups = [("28 x 28 grey PNG (Fashion-MNIST, 10 files)", fm, 2000),
                  ("224 x 224 RGB PNG", [png224], 200), ("224 x 224 RGB JPEG q90", [jpg224], 200)]
        print("| image | tapegrad decode (us) | PIL decode (us) | ratio PIL / tapegrad | tapegrad to float32 (us) | PIL + ToTensor (us) |")
        print("|---|---|---|---|---|---|")
        for label, paths, repeats in groups:
            r = subprocess.run([exe, "--time", str(repeats)] + paths, capture_output=True, text=True, check=True)
            rows = [line.split(",") for line in r.stdout.strip().splitlines()[1:]]
            ours = np.mean([float(x[1]) for x in rows])
            ours_t = np.mean([float(x[2]) for x in rows])
            theirs = np.mean([pil_time(open(p, "rb").read(), repeats, False) for p in paths])
            theirs_t = np.mean([pil_time(open(p, "rb").read(), repeats, True) for p in paths])
            print(f"| {label} | {ours:.1f} | {theirs:.1f} | {theirs / ours:.2f} | {ours_t:.1f} | {theirs_t:.1f} |")


if __name__ == "__main__":
    exe = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/bench/image_decode")
    import PIL
    print(f"PIL {PIL.__version__}, numpy {np.__version__}; load average {os.getloadavg()[0]:.2f}\n")
    pixels(exe)
    print()
    speed(exe)
