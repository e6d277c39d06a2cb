#!/usr/bin/env bash
# Fashion-MNIST MLP, 1 rank x 1 thread against 2 ranks x 1 thread (plain BatchNorm and
# SyncBatchNorm), and SyncBatchNorm's fwd+bwd overhead over BatchNorm at (256, 512) on 2 ranks.
# Usage: scripts/run_distributed_scaling.sh [epochs] (default 15). Needs a Release build in
# BUILD_DIR (build) with train_fashion_mnist and sync_batch_norm_bench. Prints the load first:
# the figures are only meaningful on an otherwise idle machine.
set -euo pipefail
build="${BUILD_DIR:-build}"
epochs="${1:-15}"
train="$build/examples/train_fashion_mnist/train_fashion_mnist"
mpi=(mpirun -np 2)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
common=(--threads 1 --no-progress --epochs "$epochs" --norm batch)
echo "== $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load: $(uptime | sed 's/.*load average: //')"
echo "== 1 rank x 1 thread"
OMP_WAIT_POLICY=passive "$train" "${common[@]}" 2>&1 | grep -E "epoch +[0-9]+/|test accuracy [0-9]|mean epoch"
for sync in "" --sync-bn; do
  echo "== 2 ranks x 1 thread ${sync:-(BatchNorm per rank)}"
  OMP_WAIT_POLICY=passive "${mpi[@]}" "$train" "${common[@]}" $sync 2>&1 |
    grep -E "epoch +[0-9]+/|test accuracy [0-9]|mean epoch|communication"
done
echo "== SyncBatchNorm vs BatchNorm, fwd+bwd, (256, 512) per rank, 2 ranks x 1 thread"
"${mpi[@]}" "$build/bench/sync_batch_norm_bench" 256 512 400 1
echo "== load after: $(uptime | sed 's/.*load average: //')"
