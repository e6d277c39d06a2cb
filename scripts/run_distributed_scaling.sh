#!/usr/bin/env bash
# Data-parallel scaling on this machine: images/s of the training loop (global images per
# wall second, same global batch 128), 1 rank x 1 thread against 2 ranks x 1 thread, for the
# Fashion-MNIST MLP and CNN with BatchNorm per rank, with SyncBatchNorm and with the optimizer
# sharded (--zero-redundancy, ZeRO-1), beside PyTorch
# DDP (gloo over loopback, bench/pytorch_ddp_fashion_mnist.py: the same nets, split, batch
# and optimizer). Every cell is the median of RUNS runs; the runs of a workload alternate
# between the configurations so a change of load hits all of them alike.
#
# Usage: scripts/run_distributed_scaling.sh [RUNS=3] [MLP_EPOCHS=3] [CNN_LIMIT=12800] [CNN_EPOCHS=1]
# Needs a Release build in BUILD_DIR (build) with train_fashion_mnist; PyTorch columns need
# /usr/bin/python3 with torch (apt-get install python3-torch), else they say "no torch".
# Prints the CPU, the ISA and the load before and after: on a shared machine the figures
# are valid only when the load average stays below ~1.5 (two ranks need both cores).
set -euo pipefail
build="${BUILD_DIR:-build}"
runs="${1:-3}"
mlp_epochs="${2:-3}"
cnn_limit="${3:-12800}"
cnn_epochs="${4:-1}"
train="$build/examples/train_fashion_mnist/train_fashion_mnist"
torch_script="$(dirname "$0")/../bench/pytorch_ddp_fashion_mnist.py"
[ -x "$train" ] || { echo "no $train: build train_fashion_mnist first (scripts/build.sh)" >&2; exit 1; }
mpi=(mpirun -np 2 --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
have_torch=0
/usr/bin/python3 -c "import torch" 2> /dev/null && have_torch=1
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1

isa=$(sed -n 's/^TAPEGRAD_ARCH_FLAGS[^=]*=//p; s/^TAPEGRAD_ISA:STRING=\(..*\)/TAPEGRAD_ISA=\1/p' "$build/CMakeCache.txt" 2> /dev/null | tr '\n' ' ')
[ -n "$isa" ] || isa=$(grep -q 'TAPEGRAD_NATIVE:BOOL=ON' "$build/CMakeCache.txt" 2> /dev/null && echo "-march=native" || echo "portable (kernels at the CPU's level unless TAPEGRAD_ISA=${TAPEGRAD_ISA:-} caps them)")
simd=$(grep -o -w -E 'avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "== $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores ($simd); build: $isa; load: $(cut -d' ' -f1-3 /proc/loadavg)"

tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
# tapegrad: mean images/s over the epoch lines, last epoch's train loss and validation accuracy
tg_parse() {
  sed -n 's/.*epoch  *[0-9]*\/[0-9]*: train loss \([0-9.]*\), validation loss [0-9.]* accuracy \([0-9.]*\)%.*(\([0-9.]*\) samples\/s.*/\3 \1 \2/p' "$1" |
    awk '{ r += $1; n++; l = $2; a = $3 } END { if (n) printf "%.0f %s %s\n", r / n, l, a; else print "- - -" }'
}
pt_parse() {
  local rate
  rate=$(sed -n 's/^images\/s \([0-9.]*\)/\1/p' "$1")
  sed -n 's/^epoch [0-9]*: train loss \([0-9.]*\), validation accuracy \([0-9.]*\)%.*/\1 \2/p' "$1" | tail -1 |
    awk -v r="${rate:--}" '{ print r, $1, $2 } END { if (NR == 0) print r, "-", "-" }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

run_config() {  # workload config run -> appends "rate loss acc" to $tmp/<workload>.<config>
  local w=$1 c=$2 log="$tmp/log"
  local args=(--threads 1 --no-progress --norm batch)
  if [ "$w" = mlp ]; then args+=(--epochs "$mlp_epochs"); else args+=(--model cnn --epochs "$cnn_epochs" --limit "$cnn_limit"); fi
  local targs=(--model "$w" --epochs "$([ "$w" = mlp ] && echo "$mlp_epochs" || echo "$cnn_epochs")")
  [ "$w" = cnn ] && targs+=(--limit "$cnn_limit")
  case $c in
    tg1) "$train" "${args[@]}" > "$log" 2>&1 || { cat "$log" >&2; exit 1; } ;;
    tg2) "${mpi[@]}" "$train" "${args[@]}" > "$log" 2>&1 || { cat "$log" >&2; exit 1; } ;;
    tg2s) "${mpi[@]}" "$train" "${args[@]}" --sync-bn > "$log" 2>&1 || { cat "$log" >&2; exit 1; } ;;
    tg2z) "${mpi[@]}" "$train" "${args[@]}" --zero-redundancy > "$log" 2>&1 || { cat "$log" >&2; exit 1; } ;;
    pt1) /usr/bin/python3 "$torch_script" "${targs[@]}" --world 1 > "$log" 2>&1 || { cat "$log" >&2; exit 1; } ;;
    pt2) /usr/bin/python3 "$torch_script" "${targs[@]}" --world 2 > "$log" 2>&1 || { cat "$log" >&2; exit 1; } ;;
  esac
  case $c in tg*) tg_parse "$log" ;; *) pt_parse "$log" ;; esac >> "$tmp/$w.$c"
}

configs=(tg1 tg2 tg2s tg2z)
[ "$have_torch" = 1 ] && configs+=(pt1 pt2)
for w in mlp cnn; do
  echo "-- $w: $runs runs of ${configs[*]} (load before $(cut -d' ' -f1 /proc/loadavg))"
  for ((i = 1; i <= runs; i++)); do
    for c in "${configs[@]}"; do run_config "$w" "$c"; done
    echo "   run $i done, load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
if [ "$have_torch" = 1 ]; then  # PyTorch 1.13 refuses SyncBatchNorm in CPU modules: ask it, print its answer
  sync_msg=$(/usr/bin/python3 "$torch_script" --model mlp --world 2 --epochs 1 --sync-bn 2>&1 | sed -n 's/^refused: //p' | head -1)
fi

med() { [ -s "$tmp/$1" ] && cut -d' ' -f1 "$tmp/$1" | median || echo "-"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2fx", a / b }'; }
echo
echo "| workload | tapegrad 1 rank | tapegrad 2 ranks | ratio | PyTorch 1 rank | PyTorch DDP 2 ranks | ratio |"
echo "|---|---|---|---|---|---|---|"
for w in mlp cnn; do
  W=$(echo "$w" | tr a-z A-Z)
  t1=$(med "$w.tg1") t2=$(med "$w.tg2") t2s=$(med "$w.tg2s") t2z=$(med "$w.tg2z")
  if [ "$have_torch" = 1 ]; then
    p1=$(med "$w.pt1") p2=$(med "$w.pt2") pr=$(ratio "$(med "$w.pt2")" "$(med "$w.pt1")")
    ps="refused (\"${sync_msg:-SyncBatchNorm layers only work with GPU modules}\")"
  else
    p1="no torch" p2="no torch" pr="-" ps="no torch"
  fi
  echo "| $W, BatchNorm per rank | $t1 | $t2 | $(ratio "$t2" "$t1") | $p1 | $p2 | $pr |"
  echo "| $W, SyncBatchNorm | $t1 | $t2s | $(ratio "$t2s" "$t1") (SyncBN/BN $(ratio "$t2s" "$t2")) | $p1 | $ps | - |"
  echo "| $W, BatchNorm per rank, optimizer sharded (ZeRO-1) | $t1 | $t2z | $(ratio "$t2z" "$t1") (ZeRO-1/DDP $(ratio "$t2z" "$t2")) | - | - | - |"
done
echo
echo "images/s: median of $runs runs; MLP: mean over $mlp_epochs epochs of the full training split; CNN: $cnn_epochs epoch(s) of $cnn_limit images (a tenth held out)."
echo "Last run's final train loss / validation accuracy (%):"
for w in mlp cnn; do
  line="  $w:"
  for c in "${configs[@]}"; do
    [ -s "$tmp/$w.$c" ] && line+=" $c $(tail -1 "$tmp/$w.$c" | cut -d' ' -f2) / $(tail -1 "$tmp/$w.$c" | cut -d' ' -f3);"
  done
  echo "$line"
done
echo "(tg1: tapegrad 1 rank, tg2: 2 ranks, tg2s: 2 ranks SyncBatchNorm, tg2z: 2 ranks --zero-redundancy, pt1: PyTorch 1 rank, pt2: PyTorch DDP 2 ranks)"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
