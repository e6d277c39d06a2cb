#!/usr/bin/env python3
"""One training epoch of the reference CNN three ways, run in turn (A B C A B C ...) so that
all see the same machine state; prints each run's epoch wall and CPU seconds as the programs
report them, then min / median / max of each and the ratios of the medians.

    A  train_images: the PNG folder through ImageFolder + the prefetching DataLoader
       (--workers threads decoding, --threads compute threads)
    B  train_fashion_mnist --model cnn: the same images in memory (the IDX files)
    C  PyTorch: torchvision ImageFolder + DataLoader(num_workers=--workers)
       (bench/pytorch_image_folder_epoch.py; skipped with --no-torch)

All three: batch 128 (whole batches), 55,000 training images (5,000 held out), Adam lr 1e-3,
one epoch. The epoch is the training loop only: train_images' and train_fashion_mnist's own
"seconds" and "cpu_seconds" (process CPU, worker threads included; validation excluded), and
the PyTorch script's loop (CPU of the process and its worker). Decoding before the epoch
(Normalize's fit, the validation part) is outside it.

    bench/image_epoch.py --build build --png /work/data/fmnist_png/train -n 5
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, pattern, timeout):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    m = re.search(pattern, p.stdout)
    if p.returncode != 0 or not m:
        sys.exit(f"image_epoch: exit status {p.returncode}, no epoch line from: {' '.join(cmd)}\n{p.stdout[-2000:]}")
    return float(m.group(1)), float(m.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="the CMake build folder (default build)")
    ap.add_argument("--png", required=True, help="the PNG training folder, DIR/<class>/*.png")
    ap.add_argument("--idx", default="/usr/share/datasets/fashion-mnist", help="the IDX files' folder")
    ap.add_argument("-n", "--rounds", type=int, default=5, help="rounds of A B C (default 5)")
    ap.add_argument("--workers", type=int, default=1, help="decoding workers of A and C (default 1)")
    ap.add_argument("--threads", type=int, default=1, help="compute threads of all three (default 1)")
    ap.add_argument("--no-torch", action="store_true", help="A and B only")
    ap.add_argument("--python", default="/usr/bin/python3", help="the Python with torch and torchvision")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run (default 1800)")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error(f"--rounds: expected >= 1, got {a.rounds}")
    ck = os.path.join(tempfile.mkdtemp(prefix="image_epoch"), "m.safetensors")
    t, w = str(a.threads), str(a.workers)
    sides = {
        "A png": ([f"{a.build}/examples/train_images/train_images", "--data", a.png, "--epochs", "1", "--batch-size",
                   "128", "--val-size", "5000", "--drop-last", "--threads", t, "--workers", w, "--checkpoint", ck],
                  r"epoch  1 .* ([0-9.]+) s \(CPU ([0-9.]+) s\)"),
        "B in-memory": ([f"{a.build}/examples/train_fashion_mnist/train_fashion_mnist", "--model", "cnn", "--norm",
                         "batch", "--epochs", "1", "--threads", t, "--data", a.idx, "--no-progress"],
                        r"epoch  1/1: .*, ([0-9.]+) s \([0-9]+ samples/s, CPU ([0-9.]+) s"),
    }
    if not a.no_torch:
        sides["C torch"] = ([a.python, os.path.join(HERE, "pytorch_image_folder_epoch.py"), "--data", a.png,
                             "--workers", w, "--threads", t], r"epoch 1: ([0-9.]+) s wall, ([0-9.]+) s CPU")
    for k, (cmd, _) in sides.items():
        print(f"{k}: {' '.join(cmd)}")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    res = {k: [] for k in sides}
    for i in range(a.rounds):
        line = f"round {i + 1}:"
        for k, (cmd, pat) in sides.items():
            wall, cpu = run(cmd, pat, a.timeout)
            res[k].append((wall, cpu))
            line += f"  {k} {wall:.2f} s wall {cpu:.2f} s CPU;"
        print(line + f"  load {os.getloadavg()[0]:.1f}", flush=True)
    med = {}
    for k, rows in res.items():
        ws, cs = [r[0] for r in rows], [r[1] for r in rows]
        med[k] = (statistics.median(ws), statistics.median(cs))
        print(f"{k}: wall {min(ws):.2f} / {med[k][0]:.2f} / {max(ws):.2f} s, CPU {min(cs):.2f} / {med[k][1]:.2f} / "
              f"{max(cs):.2f} s (min / median / max)")
    keys = list(res)
    for k in keys[1:]:
        ratios_w = [x[0] / y[0] for x, y in zip(res[keys[0]], res[k])]
        ratios_c = [x[1] / y[1] for x, y in zip(res[keys[0]], res[k])]
        print(f"{keys[0]} / {k}: wall {min(ratios_w):.2f} / {statistics.median(ratios_w):.2f} / {max(ratios_w):.2f}, "
              f"CPU {min(ratios_c):.2f} / {statistics.median(ratios_c):.2f} / {max(ratios_c):.2f} "
              f"(per-round ratios, min / median / max)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
