"""PyTorch DistributedDataParallel (gloo over loopback) on Fashion-MNIST: the anchor that
scripts/run_distributed_scaling.sh prints beside tapegrad's 2-rank scaling.

The same nets, data split, batch and optimizer as train_fashion_mnist (and
examples/train_fashion_mnist/pytorch_reference.py): MLP 784-256-128-10 or the CNN, BatchNorm,
dropout 0.2 (MLP), Adam lr 1e-3, cosine schedule, global batch 128 split evenly over the
ranks (rank r trains on rows [r*B/R, (r+1)*B/R) of each global batch, as tapegrad's
train::fit). One rank runs the plain model (no DDP wrapper), as tapegrad's one rank does.
Prints one line per epoch and "images/s <mean over epochs>" (training loop only, global
images per wall second, timed between barriers).

    /usr/bin/python3 bench/pytorch_ddp_fashion_mnist.py --model mlp --world 2 --epochs 3
    /usr/bin/python3 bench/pytorch_ddp_fashion_mnist.py --model cnn --world 2 --limit 12800 --epochs 1

--sync-bn asks for torch.nn.SyncBatchNorm; PyTorch 1.13 refuses it for CPU modules
("SyncBatchNorm layers only work with GPU modules"), and the script reports that.
"""
import argparse
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


# The reader, the nets and the training step of the single-process reference (BatchNorm;
# dropout in the MLP only).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "train_fashion_mnist"))
from pytorch_reference import build, read_idx, train_step  # noqa: E402


def run(rank, a, port):
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if a.world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=a.world)
    X = read_idx(f"{a.data}/train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255
    y = read_idx(f"{a.data}/train-labels-idx1-ubyte.gz").astype(np.int64)
    if a.limit > 0:
        X, y = X[:a.limit], y[:a.limit]
    val = len(X) // 10 if a.limit > 0 else 5000  # train_fashion_mnist's split sizes
    perm = np.random.default_rng(a.seed).permutation(len(X))
    tr, va = np.sort(perm[:-val]), np.sort(perm[-val:])
    mean, std = X[tr].mean(), X[tr].std()
    f = lambda v: torch.from_numpy((v - mean) / std)
    Xtr, ytr, Xva, yva = f(X[tr]), torch.from_numpy(y[tr]), f(X[va]), torch.from_numpy(y[va])

    model = build(a.model, "batch", a.dropout)
    if a.sync_bn:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    try:
        net = nn.parallel.DistributedDataParallel(model) if a.world > 1 else model  # broadcasts rank 0's weights
    except ValueError as e:  # PyTorch 1.13 refuses SyncBatchNorm in CPU modules
        if rank == 0:
            print(f"refused: {e}", flush=True)
        dist.destroy_process_group()
        return
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=a.epochs)
    loss_fn = nn.CrossEntropyLoss()
    shuffle = torch.Generator().manual_seed(a.seed)  # the same order on every rank
    B, per = a.batch_size, a.batch_size // a.world
    rates = []
    for epoch in range(1, a.epochs + 1):
        order = torch.randperm(len(Xtr), generator=shuffle)
        net.train()
        if a.world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        total, seen = 0.0, 0
        for i in range(len(Xtr) // B):  # drop_last
            idx = order[i * B + rank * per: i * B + (rank + 1) * per]
            total += train_step(net, loss_fn, opt, Xtr[idx], ytr[idx])
            seen += len(idx)
        if a.world > 1:
            dist.barrier()
        secs = time.perf_counter() - t0
        sched.step()
        rate = seen * a.world / secs
        rates.append(rate)
        stats = torch.tensor([total, float(seen)], dtype=torch.float64)
        if a.world > 1:
            dist.all_reduce(stats)
        model.eval()
        with torch.no_grad():
            acc = (model(Xva).argmax(1) == yva).float().mean().item()
        if rank == 0:
            print(f"epoch {epoch}: train loss {stats[0] / stats[1]:.4f}, validation accuracy {100 * acc:.2f}%, "
                  f"{secs:.2f} s ({rate:.0f} images/s)", flush=True)
    if rank == 0:
        print(f"images/s {np.mean(rates):.0f}", flush=True)
    if a.world > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--world", type=int, default=2, help="processes (1: the plain model, no DDP)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=128, help="global batch, split over the ranks")
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--limit", type=int, default=0, help="use only the first N training images")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sync-bn", action="store_true", help="torch.nn.SyncBatchNorm (refused on CPU by PyTorch 1.13)")
    a = p.parse_args()
    if a.world < 1 or a.batch_size % a.world:
        sys.exit(f"--batch-size {a.batch_size} must be divisible by --world {a.world} (>= 1)")
    if a.world == 1:
        run(0, a, 0)
        return
    with socket.socket() as s:  # a free loopback port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(run, args=(a, port), nprocs=a.world, join=True)


if __name__ == "__main__":
    main()
