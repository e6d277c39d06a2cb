#!/bin/sh
# Fashion-MNIST training-epoch time, tapegrad (train_fashion_mnist) against PyTorch
# (examples/train_fashion_mnist/pytorch_reference.py: the same net, data, batch and optimizer),
# alternating the two engines ROUNDS times; prints each run's training throughput (the epoch
# loop only, without validation) and the medians.
#   bench/compare_fashion_mnist.sh [BUILD_DIR] [mlp|cnn] [THREADS] [ROUNDS] [EPOCHS] [LIMIT]
# Needs Debian's python3-torch (apt-get install python3-torch) for the PyTorch side.
# LIMIT > 0 trains on the first LIMIT training images only (the CNN's full epoch is ~1 min).
set -eu
B=${1:-build}
MODEL=${2:-mlp}
THREADS=${3:-1}
ROUNDS=${4:-3}
EPOCHS=${5:-2}
LIMIT=${6:-0}
HERE=$(cd "$(dirname "$0")/.." && pwd)
TG="$B/examples/train_fashion_mnist/train_fashion_mnist"
PY="$HERE/examples/train_fashion_mnist/pytorch_reference.py"
[ -x "$TG" ] || { echo "not built: $TG" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "PyTorch missing: apt-get install python3-torch" >&2; exit 2; }
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

median() { sort -n | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
# samples/s of every epoch in a log: "... (12345 samples/s" (tapegrad adds ", CPU ...")
rates() { sed -n 's/.*(\([0-9.]*\) samples\/s.*/\1/p'; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
: > "$TMP/tg"
: > "$TMP/pt"
printf 'Fashion-MNIST %s, batch 128, %s thread(s), %s epoch(s) per run, limit %s; %s\n' \
  "$MODEL" "$THREADS" "$EPOCHS" "$LIMIT" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
i=0
while [ "$i" -lt "$ROUNDS" ]; do
  "$TG" --model "$MODEL" --norm batch --optimizer adam --epochs "$EPOCHS" --threads "$THREADS" \
    --limit "$LIMIT" --seed 0 2>&1 | rates | tee -a "$TMP/tg" | sed 's/^/tapegrad samples\/s: /'
  /usr/bin/python3 "$PY" --model "$MODEL" --norm batch --epochs "$EPOCHS" --threads "$THREADS" \
    --limit "$LIMIT" --seed 0 2>&1 | rates | tee -a "$TMP/pt" | sed 's/^/PyTorch  samples\/s: /'
  i=$((i + 1))
done
tg=$(median < "$TMP/tg")
pt=$(median < "$TMP/pt")
printf 'median samples/s: tapegrad %s, PyTorch %s, ratio %.2f\n' "$tg" "$pt" "$(echo "$tg / $pt" | bc -l)"
printf 'epoch of 55,000 images: tapegrad %.2f s, PyTorch %.2f s\n' \
  "$(echo "55000 / $tg" | bc -l)" "$(echo "55000 / $pt" | bc -l)"
