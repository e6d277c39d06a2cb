"""The small CNN of bench/threads_cliff/main.cpp in PyTorch: 150 SGD steps of
Conv(1->8, 3x3, padding 1) - BatchNorm2d(8) - ReLU - MaxPool(2) - Linear(512 -> 10) on one
batch of 32 random 16x16 images. Usage: torch_cnn.py [steps=150] [repeats=5] [threads];
threads defaults to the number of cores (what tapegrad uses)."""
import os
import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 150
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
threads = int(sys.argv[3]) if len(sys.argv) > 3 else os.cpu_count()
torch.set_num_threads(threads)
torch.manual_seed(0)
x = torch.randn(32, 1, 16, 16)
y = torch.randint(0, 10, (32,))
ms = []
for r in range(repeats):
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    t0 = time.perf_counter()
    for s in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
    ms.append((time.perf_counter() - t0) * 1e3)
ms.sort()
print("pytorch %s small CNN: %d steps, %d threads: median %.1f ms, best %.1f ms (%d runs)" %
      (torch.__version__, steps, torch.get_num_threads(), ms[len(ms) // 2], ms[0], repeats))
