#!/usr/bin/env bash
# Threads without a cliff (docs/threads.md, docs/results/performance.md "Threads cliff"): two user
# programs built against the INSTALLED package, calling nothing special, at the default
# thread count, run idle and then beside one busy process (`yes > /dev/null`, not pinned),
# each beside PyTorch doing the same work in the same run of this script:
#   - the small CNN (bench/threads_cliff/main.cpp, built here as a separate CMake project
#     with find_package(tapegrad)): 150 SGD steps of Conv(1->8)-BN2d-ReLU-MaxPool-Linear on
#     32 images of 16x16; PyTorch: bench/threads_cliff/torch_cnn.py;
#   - the installed `tabular` example on scikit-learn's digits (5 folds, EPOCHS epochs each,
#     no early stop: fixed work); PyTorch: bench/threads_cliff/torch_tabular.py.
# Prints min and median of RUNS runs per program and the busy/idle ratio of the medians, and
# the load average before each phase (the idle figures mean something only on a quiet machine).
# Usage: bench/threads_cliff.sh [build-dir=build] [runs=5] [epochs=10]   (THREADS_CLIFF_TORCH=0 skips PyTorch)
# Build first: TAPEGRAD_TARGETS="tapegrad_libraries tabular tapegrad_convert" scripts/build.sh
# Needs python3-sklearn (the digits file) and, for the PyTorch rows, python3-torch: both are
# installed by scripts/setup.sh when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
runs="${2:-5}"
epochs="${3:-10}"
digits=/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
extras=(python3-sklearn)
[[ "${THREADS_CLIFF_TORCH:-1}" == 0 ]] || extras+=(python3-torch)
bash scripts/setup.sh "${extras[@]}" > /dev/null  # Debian packages, only those missing
[[ -f "$digits" ]] || { echo "missing $digits: apt-get install -y python3-sklearn" >&2; exit 1; }
scratch="$(mktemp -d)"
busy_pid=""
cleanup() {
  [[ -n "$busy_pid" ]] && kill "$busy_pid" 2> /dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT

# ---- the installed package and a user's program built against it ------------------------
cmake --install "$build" --prefix "$scratch/prefix" > "$scratch/install.log" 2>&1 || {
  cat "$scratch/install.log" >&2
  echo "install failed: build tapegrad_libraries, tabular and tapegrad_convert first (see the header)" >&2
  exit 1
}
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S bench/threads_cliff -B "$scratch/cnn" -DCMAKE_PREFIX_PATH="$scratch/prefix" -DCMAKE_BUILD_TYPE=Release \
  "${launcher[@]}" > "$scratch/cnn.log" 2>&1 && cmake --build "$scratch/cnn" -j 2 >> "$scratch/cnn.log" 2>&1 || {
  cat "$scratch/cnn.log" >&2
  exit 1
}
cnn="$scratch/cnn/threads_cliff"
tabular="$scratch/prefix/bin/tabular"
[[ -x "$tabular" ]] || { echo "the installed package has no bin/tabular (CLI11 missing?)" >&2; exit 1; }

have_torch=0
[[ "${THREADS_CLIFF_TORCH:-1}" != 0 ]] && /usr/bin/python3 -c "import torch" 2> /dev/null && have_torch=1

# Each prints "min median" in ms.
minmed() { sort -n | awk '{a[NR]=$1} END {printf "%.1f %.1f", a[1], a[int((NR+1)/2)]}'; }
cnn_ms() { "$cnn" 150 "$runs" 2> /dev/null | sed -E 's/.*median ([0-9.]+) ms, best ([0-9.]+) ms.*/\2 \1/'; }
torch_cnn_ms() { /usr/bin/python3 bench/threads_cliff/torch_cnn.py 150 "$runs" | sed -E 's/.*median ([0-9.]+) ms, best ([0-9.]+) ms.*/\2 \1/'; }
tabular_ms() {  # tabular's own "time X s": from the CSV read to the last fold, one process per run
  for _ in $(seq "$runs"); do
    "$tabular" --csv "$digits" --no-header --folds 5 --epochs "$epochs" --patience "$epochs" |
      sed -nE 's/.*; time ([0-9.]+) s$/\1/p' | awk '{printf "%.1f\n", $1 * 1000}'
  done | minmed
}
torch_tabular_ms() { /usr/bin/python3 bench/threads_cliff/torch_tabular.py "$epochs" "$runs" | sed -E 's/.*median ([0-9.]+) ms, best ([0-9.]+) ms.*/\2 \1/'; }

programs=("tapegrad small CNN, 150 steps" "tapegrad tabular, digits")
fns=(cnn_ms tabular_ms)
if [[ $have_torch == 1 ]]; then
  programs+=("PyTorch small CNN, 150 steps" "PyTorch tabular twin, digits")
  fns+=(torch_cnn_ms torch_tabular_ms)
fi
declare -A idle busy
load_idle=$(cut -d' ' -f1-3 /proc/loadavg)
for i in "${!fns[@]}"; do
  idle[$i]=$(${fns[$i]})
  echo "idle: ${programs[$i]}: ${idle[$i]} ms (min median)" >&2
done
yes > /dev/null &
busy_pid=$!
sleep 0.5
load_busy=$(cut -d' ' -f1-3 /proc/loadavg)
for i in "${!fns[@]}"; do
  busy[$i]=$(${fns[$i]})
  echo "beside busy: ${programs[$i]}: ${busy[$i]} ms (min median)" >&2
done
kill "$busy_pid"
busy_pid=""

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; threads: default"
echo "load average (1, 5, 15 min) before the idle runs: $load_idle; before the busy runs: $load_busy"
echo "$runs runs each; ms: min / median; ratio: busy median / idle median"
echo
echo "| program | idle ms (min / median) | beside busy ms (min / median) | ratio |"
echo "|---|---|---|---|"
for i in "${!fns[@]}"; do
  read -r imin imed <<< "${idle[$i]}"
  read -r bmin bmed <<< "${busy[$i]}"
  ratio=$(awk -v a="$imed" -v b="$bmed" 'BEGIN {printf "%.2fx", b / a}')
  echo "| ${programs[$i]} | $imin / $imed | $bmin / $bmed | $ratio |"
done
[[ $have_torch == 1 ]] || echo "(PyTorch skipped or not installed: apt-get install python3-torch for its rows)"
