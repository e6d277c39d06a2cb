#!/usr/bin/env python3
"""Times two whole commands side by side: A B A B ..., so that both see the same machine state.

    bench/ab_pairs.py [-n PAIRS] [--timeout SECONDS] -- A_COMMAND [ARGS...] ::: B_COMMAND [ARGS...]

Each command runs as an argument list (no shell), its output discarded. Per pair it prints A's
and B's wall and CPU (user + system of the process and its children) seconds and the ratios A/B;
then min / median / max of each column. Environment variables for one side only: `env VAR=value
COMMAND ...`. Exits 1 when a run fails or times out.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time


def run_once(cmd, timeout):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        sys.exit(f"ab_pairs: timed out after {timeout} s: {' '.join(cmd)}")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0:
        sys.exit(f"ab_pairs: exit status {rc}: {' '.join(cmd)}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--pairs", type=int, default=5, help="A/B pairs (default 5)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run (default 600)")
    parser.add_argument("commands", nargs=argparse.REMAINDER, help="-- A_COMMAND ... ::: B_COMMAND ...")
    args = parser.parse_args()
    words = args.commands[1:] if args.commands[:1] == ["--"] else args.commands
    if ":::" not in words:
        parser.error("expected -- A_COMMAND ... ::: B_COMMAND ...")
    k = words.index(":::")
    a, b = words[:k], words[k + 1:]
    if not a or not b:
        parser.error("expected a command on both sides of :::")
    if args.pairs < 1:
        parser.error(f"--pairs: expected >= 1, got {args.pairs}")

    print(f"A: {' '.join(a)}\nB: {' '.join(b)}\nload average before: {os.getloadavg()[0]:.2f}")
    print(f"{'pair':>6}" + "".join(f"{h:>10}" for h in ("A wall", "B wall", "A cpu", "B cpu", "wall A/B", "cpu A/B")))
    rows = []
    for i in range(args.pairs):
        aw, ac = run_once(a, args.timeout)
        bw, bc = run_once(b, args.timeout)
        row = (aw, bw, ac, bc, aw / bw, ac / bc if bc > 0 else float("nan"))
        rows.append(row)
        print(f"{i + 1:>6}" + "".join(f"{v:10.3f}" for v in row), flush=True)
    cols = list(zip(*rows))
    for name, f in (("min", min), ("median", statistics.median), ("max", max)):
        print(f"{name:>6}" + "".join(f"{f(c):10.3f}" for c in cols))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
