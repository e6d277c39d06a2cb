"""PyTorch reference for train_fashion_mnist: the same MLP or CNN, data pipeline and
optimizer, to compare accuracy and epoch time on the same machine (bench/compare_fashion_mnist.sh
runs both).

    /usr/bin/python3 examples/train_fashion_mnist/pytorch_reference.py --norm batch --threads 2
    /usr/bin/python3 examples/train_fashion_mnist/pytorch_reference.py --model cnn --epochs 1 --threads 1
"""
import argparse
import gzip
import time

import numpy as np
import torch
import torch.nn as nn


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def build(model, norm, dropout):
    """The nets of train_fashion_mnist: the MLP 784-256-128-10 (Linear, the norm, ReLU, Dropout per
    hidden layer) or models::CNN's defaults, Conv(1->32)-BN-ReLU-Pool-Conv(32->64)-BN-ReLU-Pool-
    Linear(3136->128)-BN-ReLU-Linear(128->10) (BN only with norm "batch", no dropout)."""
    if model == "mlp":
        layers, width = [], 784
        for h in (256, 128):
            layers.append(nn.Linear(width, h))
            if norm == "batch":
                layers.append(nn.BatchNorm1d(h))
            elif norm == "layer":
                layers.append(nn.LayerNorm(h))
            layers += [nn.ReLU(), nn.Dropout(dropout)]
            width = h
        return nn.Sequential(*layers, nn.Linear(width, 10))
    bn = norm == "batch"
    layers, c = [nn.Unflatten(1, (1, 28, 28))], 1
    for w in (32, 64):
        layers += [nn.Conv2d(c, w, 3, padding=1), nn.BatchNorm2d(w) if bn else nn.Identity(), nn.ReLU(), nn.MaxPool2d(2)]
        c = w
    layers += [nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.BatchNorm1d(128) if bn else nn.Identity(), nn.ReLU(),
               nn.Linear(128, 10)]
    return nn.Sequential(*layers)


def train_step(net, loss_fn, opt, X, y):
    """One optimizer step on the batch (X, y); returns its loss summed over the rows."""
    loss = loss_fn(net(X), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item() * len(y)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--norm", choices=["none", "batch", "layer"], default="batch")
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--schedule", choices=["none", "cosine"], default="cosine")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--limit", type=int, default=0, help="use only the first N training images")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    X = read_idx(f"{a.data}/train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255
    y = read_idx(f"{a.data}/train-labels-idx1-ubyte.gz").astype(np.int64)
    if a.limit > 0:
        X, y = X[:a.limit], y[:a.limit]
    Xt = read_idx(f"{a.data}/t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255
    yt = read_idx(f"{a.data}/t10k-labels-idx1-ubyte.gz").astype(np.int64)
    perm = np.random.default_rng(a.seed).permutation(len(X))
    tr, va = np.sort(perm[:-5000]), np.sort(perm[-5000:])
    mean, std = X[tr].mean(), X[tr].std()
    f = lambda v: torch.from_numpy((v - mean) / std)
    Xtr, ytr, Xva, yva, Xte, yte = f(X[tr]), torch.from_numpy(y[tr]), f(X[va]), torch.from_numpy(y[va]), f(Xt), torch.from_numpy(yt)

    model = build(a.model, a.norm, a.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=a.epochs) if a.schedule == "cosine" else None
    loss_fn = nn.CrossEntropyLoss()

    def accuracy(Xe, ye):
        model.eval()
        with torch.no_grad():
            acc = (model(Xe).argmax(1) == ye).float().mean().item()
        model.train()
        return acc

    best, best_state, times = -1, None, []
    for epoch in range(1, a.epochs + 1):
        t0 = time.perf_counter()
        order = torch.randperm(len(Xtr))
        total, seen = 0.0, 0
        for i in range(len(Xtr) // a.batch_size):  # drop_last
            idx = order[i * a.batch_size:(i + 1) * a.batch_size]
            total += train_step(model, loss_fn, opt, Xtr[idx], ytr[idx])
            seen += len(idx)
        times.append(time.perf_counter() - t0)
        if sched:
            sched.step()
        va_acc = accuracy(Xva, yva)
        if va_acc > best:
            best, best_state = va_acc, {k: v.clone() for k, v in model.state_dict().items()}
        print(f"epoch {epoch:2d}: train loss {total / seen:.4f}, validation accuracy {100 * va_acc:.2f}%, {times[-1]:.2f} s "
              f"({seen / times[-1]:.0f} samples/s)", flush=True)
    model.load_state_dict(best_state)
    print(f"test accuracy {100 * accuracy(Xte, yte):.2f}%, mean epoch time {np.mean(times):.2f} s")


if __name__ == "__main__":
    main()
