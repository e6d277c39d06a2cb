#!/usr/bin/env python3
"""The cost of a Hessian-vector product against one gradient in PyTorch, on the net and batch
of bench/hvp_cost.cpp (Fashion-MNIST MLP 784-256-128-10, ReLU, cross-entropy, batch 256,
float32): median wall seconds of N alternated repetitions and their ratio, for the double-grad
trick (torch.autograd.grad twice) and for torch.autograd.functional.hvp.

    /usr/bin/python3 bench/hvp_cost.py [repetitions, default 30]
"""
import statistics
import sys
import time

import torch


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                              torch.nn.ReLU(), torch.nn.Linear(128, 10))
    x = torch.randn(256, 784)
    y = torch.randint(0, 10, (256,))
    params = list(net.parameters())
    v = [torch.randn_like(p) for p in params]
    loss_fn = torch.nn.CrossEntropyLoss()

    def gradient():
        return torch.autograd.grad(loss_fn(net(x), y), params)

    def double_grad():
        g = torch.autograd.grad(loss_fn(net(x), y), params, create_graph=True)
        return torch.autograd.grad(g, params, grad_outputs=v)

    def functional_hvp():
        def f(*ps):
            out = x
            for k in range(0, len(ps), 2):
                out = torch.nn.functional.linear(out, ps[k], ps[k + 1])
                if k + 2 < len(ps):
                    out = torch.relu(out)
            return loss_fn(out, y)
        return torch.autograd.functional.hvp(f, tuple(params), tuple(v))

    times = {"gradient": [], "double-grad HVP": [], "functional.hvp": []}
    for _ in range(reps):
        for name, fn in (("gradient", gradient), ("double-grad HVP", double_grad), ("functional.hvp", functional_hvp)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(t) for k, t in times.items()}
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads; Fashion-MNIST MLP 784-256-128-10, "
          f"batch 256, float32, {reps} repetitions")
    for k, m in med.items():
        print(f"{k}: median {m * 1e3:.3f} ms" + ("" if k == "gradient" else f"  ratio / gradient {m / med['gradient']:.2f}"))


if __name__ == "__main__":
    main()
