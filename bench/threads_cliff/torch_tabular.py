"""The tabular example's work in PyTorch, for bench/threads_cliff.sh: scikit-learn's digits
(Debian python3-sklearn, 1797x64, 10 classes), 5 shuffled folds; per fold a 10% validation
hold-out, per-feature standardisation fitted on the training rows, an MLP 64-100-10 (ReLU)
trained by Adam (lr 1e-3) in shuffled batches of 64 for EPOCHS epochs with a validation pass
after each, then the test fold's accuracy. That is what
`tabular --csv digits.csv.gz --no-header --folds 5 --epochs EPOCHS --patience EPOCHS` does
(the folds themselves differ: numpy's shuffle, not tapegrad's).
Usage: torch_tabular.py [epochs=10] [repeats=5] [threads]; times from the data load to the
end (as tabular's own "time"), prints the median and the best of the repeats."""
import os
import sys
import time

import numpy as np
import torch

epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
threads = int(sys.argv[3]) if len(sys.argv) > 3 else os.cpu_count()
torch.set_num_threads(threads)
path = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"


def once(seed):
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    a = np.loadtxt(path, delimiter=",", dtype=np.float32)
    X, y = a[:, :-1], a[:, -1].astype(np.int64)
    n, k = len(y), 5
    order = rng.permutation(n)
    sizes = [n // k + (1 if f < n % k else 0) for f in range(k)]
    accs, start = [], 0
    for size in sizes:
        test = order[start:start + size]
        start += size
        rest = np.setdiff1d(np.arange(n), test)
        rest = rng.permutation(rest)
        n_val = int(round(0.1 * len(rest)))
        val, tr = rest[:n_val], rest[n_val:]
        mean, std = X[tr].mean(0), X[tr].std(0)
        std[std < 1e-6] = 1
        xs = lambda idx: torch.from_numpy((X[idx] - mean) / std)
        xtr, ytr = xs(tr), torch.from_numpy(y[tr])
        xva, yva = xs(val), torch.from_numpy(y[val])
        xte, yte = xs(test), torch.from_numpy(y[test])
        net = torch.nn.Sequential(torch.nn.Linear(64, 100), torch.nn.ReLU(), torch.nn.Linear(100, 10))
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        for _ in range(epochs):
            net.train()
            perm = torch.randperm(len(tr))
            for b in range(0, len(tr), 64):
                idx = perm[b:b + 64]
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(net(xtr[idx]), ytr[idx])
                loss.backward()
                opt.step()
            net.eval()
            with torch.no_grad():
                torch.nn.functional.cross_entropy(net(xva), yva)
        with torch.no_grad():
            accs.append((net(xte).argmax(1) == yte).float().mean().item())
    return float(np.mean(accs))


ms = []
for r in range(repeats):
    t0 = time.perf_counter()
    acc = once(r)
    ms.append((time.perf_counter() - t0) * 1e3)
ms.sort()
print("pytorch %s tabular digits: %d epochs x 5 folds, %d threads, accuracy %.4f: median %.1f ms, best %.1f ms (%d runs)" %
      (torch.__version__, epochs, torch.get_num_threads(), acc, ms[len(ms) // 2], ms[0], repeats))
