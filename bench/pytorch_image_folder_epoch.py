"""PyTorch's side of bench/image_epoch.py: one epoch of the reference CNN from a PNG folder
through torchvision.datasets.ImageFolder + DataLoader(num_workers=N), or (--in-memory) from
the same folder decoded into one tensor first.

The recipe of train_images --data DIR --val-size 5000 --batch-size 128 --drop-last --threads 1:
greyscale PNGs as PIL decodes them ("L"), ToTensor, Normalize with the training part's mean and
std (one channel), a random 5,000-image validation part held out (random_split), shuffled
batches of 128 (drop_last), models::CNN's defaults (Conv(1->32)-BN-ReLU-Pool-Conv(32->64)-
BN-ReLU-Pool-Linear(3136->128)-BN-ReLU-Linear(128->10)), Adam lr 1e-3, cross-entropy. The
mean and std come from --mean/--std (default: Fashion-MNIST's training pixels, 0.2860 and
0.3530) rather than a pass over the files, so only the epoch is timed. Prints
"epoch 1: <seconds> s wall, <seconds> s CPU (this process and its workers), <images/s>".

    /usr/bin/python3 bench/pytorch_image_folder_epoch.py --data /work/data/fmnist_png/train --workers 1
"""
import argparse
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torchvision
from PIL import Image


def grey(path):
    with open(path, "rb") as f:
        return Image.open(f).convert("L")


def net():
    layers, c = [], 1
    for w in (32, 64):
        layers += [nn.Conv2d(c, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(), nn.MaxPool2d(2)]
        c = w
    layers += [nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 10)]
    return nn.Sequential(*layers)


def cpu_seconds():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="the folder DIR/<class>/*.png")
    p.add_argument("--workers", type=int, default=1, help="DataLoader num_workers (default 1)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--val-size", type=int, default=5000)
    p.add_argument("--mean", type=float, default=0.2860)
    p.add_argument("--std", type=float, default=0.3530)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--in-memory", action="store_true", help="decode every image first; time the epoch over the tensor")
    a = p.parse_args()
    if a.workers < 0 or a.threads < 1 or a.batch_size < 1:
        sys.exit("expected --workers >= 0, --threads >= 1, --batch-size >= 1")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    tf = torchvision.transforms.Compose([torchvision.transforms.ToTensor(),
                                         torchvision.transforms.Normalize((a.mean,), (a.std,))])
    folder = torchvision.datasets.ImageFolder(a.data, transform=tf, loader=grey)
    n = len(folder)
    if not 0 <= a.val_size < n:
        sys.exit(f"--val-size {a.val_size}: expected fewer than the {n} images of {a.data}")
    train_part, _ = torch.utils.data.random_split(folder, [n - a.val_size, a.val_size],
                                                  generator=torch.Generator().manual_seed(a.seed))
    if a.in_memory:
        X = torch.stack([train_part[i][0] for i in range(len(train_part))])
        y = torch.tensor([train_part[i][1] for i in range(len(train_part))])
        source = torch.utils.data.TensorDataset(X, y)
        loader = torch.utils.data.DataLoader(source, batch_size=a.batch_size, shuffle=True, drop_last=True)
    else:
        loader = torch.utils.data.DataLoader(train_part, batch_size=a.batch_size, shuffle=True, drop_last=True,
                                             num_workers=a.workers, persistent_workers=False)
    model = net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    c0, t0, seen = cpu_seconds(), time.perf_counter(), 0
    for xb, yb in loader:  # the workers start here, as tapegrad's reset() starts its threads
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        seen += xb.shape[0]
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    print(f"epoch 1: {wall:.2f} s wall, {cpu:.2f} s CPU, {seen / wall:.0f} images/s, loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
