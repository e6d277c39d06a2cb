#!/usr/bin/env bash
# Fashion-MNIST MLP, 1 rank x 1 thread against 2 ranks x 1 thread (plain BatchNorm and
# SyncBatchNorm), and SyncBatchNorm's fwd+bwd overhead over BatchNorm at (256, 512) on 2 ranks.
# Usage: scripts/run_distributed_scaling.sh [epochs] (default 15). Needs a Release build in
# BUILD_DIR (build) with train_fashion_mnist and sync_batch_norm_bench. Prints the load first:
# the wall-time figures are only meaningful on an otherwise idle machine; the CPU seconds per
# epoch (training steps, per rank) are the work each process does, less sensitive to load
# (waiting in MPI still counts: OpenMPI polls, yielding the core).
set -euo pipefail
build="${BUILD_DIR:-build}"
epochs="${1:-15}"
train="$build/examples/train_fashion_mnist/train_fashion_mnist"
mpi=(mpirun -np 2)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
common=(--threads 1 --no-progress --epochs "$epochs" --norm batch)
echo "== $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load: $(uptime | sed 's/.*load average: //')"
# Mean training images/s (wall) and CPU seconds of the training steps per epoch (per rank),
# over the epoch lines of a log.
rates() {
  sed -n 's/.*epoch  *[0-9]*\/[0-9]*:.*(\([0-9.]*\) samples\/s, CPU \([0-9.]*\) s.*/\1 \2/p' |
    awk '{ r += $1; c += $2; n++ } END { if (n) printf "%.0f %.2f\n", r / n, c / n }'
}
log1=$(mktemp) && trap 'rm -f "$log1"' EXIT
echo "== 1 rank x 1 thread"
OMP_WAIT_POLICY=passive "$train" "${common[@]}" 2>&1 | tee "$log1" | grep -E "epoch +[0-9]+/|test accuracy [0-9]|mean epoch"
read -r base base_cpu < <(rates < "$log1")
for sync in "" --sync-bn; do
  echo "== 2 ranks x 1 thread ${sync:-(BatchNorm per rank)}"
  OMP_WAIT_POLICY=passive "${mpi[@]}" "$train" "${common[@]}" $sync 2>&1 | tee "$log1" |
    grep -E "epoch +[0-9]+/|test accuracy [0-9]|mean epoch|communication"
  read -r rate cpu < <(rates < "$log1")
  per_rank=$(grep -o "ranks: [0-9., ]*" "$log1" | sed 's/ranks: //; s/,//g' |
    awk '{ for (i = 1; i <= NF; i++) c[i] += $i; n++; k = NF } END { for (i = 1; i <= k; i++) printf "%s%.2f", (i > 1 ? ", " : ""), c[i] / n }')
  echo "-- images/s ${rate} against ${base}: $(awk -v a="$rate" -v b="$base" 'BEGIN { printf "%.2f", a / b }')x;" \
       "CPU per epoch (training steps) per rank ${per_rank} s against ${base_cpu} s in one process"
done
echo "== SyncBatchNorm vs BatchNorm, fwd+bwd, (256, 512) per rank, 2 ranks x 1 thread"
"${mpi[@]}" "$build/bench/sync_batch_norm_bench" 256 512 400 1
echo "== load after: $(uptime | sed 's/.*load average: //')"
