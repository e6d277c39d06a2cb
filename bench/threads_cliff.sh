#!/usr/bin/env bash
# Threads without a cliff (docs/threads.md): runs the small CNN (bench/threads_cliff, and
# its PyTorch twin bench/threads_cliff/torch_cnn.py when PyTorch is installed) and the quick
# start (examples/quickstart, the whole program) idle, then beside one busy process
# (`yes > /dev/null`, not pinned), and prints the times and their ratio side by side.
# Usage: bench/threads_cliff.sh [build-dir=build] [repeats=5]   (THREADS_CLIFF_TORCH=0 skips PyTorch)
# Build first: TAPEGRAD_TARGETS="threads_cliff quickstart" scripts/build.sh -DTAPEGRAD_BUILD_BENCH=ON
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
repeats="${2:-5}"
cnn="$build/bench/threads_cliff/threads_cliff"
quick="$build/examples/quickstart/quickstart"
for exe in "$cnn" "$quick"; do
  [[ -x "$exe" ]] || { echo "missing $exe: build it first (see the header of $0)" >&2; exit 1; }
done
scratch="$(mktemp -d)"
busy_pid=""
cleanup() {
  [[ -n "$busy_pid" ]] && kill "$busy_pid" 2> /dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT

# median wall time in ms of `repeats` runs of the quick start (in a scratch folder: it
# writes quickstart.safetensors)
quickstart_ms() {
  local times=()
  for _ in $(seq "$repeats"); do
    local t0 t1
    t0=$(date +%s%N)
    (cd "$scratch" && "$OLDPWD/$quick" > /dev/null)
    t1=$(date +%s%N)
    times+=($(((t1 - t0) / 1000)))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}'
}
cnn_ms() { "$cnn" 150 "$repeats" | sed -E 's/.*median ([0-9.]+) ms.*/\1/'; }
torch_ms() { /usr/bin/python3 bench/threads_cliff/torch_cnn.py 150 "$repeats" | sed -E 's/.*median ([0-9.]+) ms.*/\1/'; }
have_torch=0
[[ "${THREADS_CLIFF_TORCH:-1}" != 0 ]] && /usr/bin/python3 -c "import torch" 2> /dev/null && have_torch=1

measure() {  # prints "cnn quick [torch]"
  local c q t=""
  c=$(cnn_ms)
  q=$(quickstart_ms)
  [[ $have_torch == 1 ]] && t=$(torch_ms)
  echo "$c $q $t"
}

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r c0 q0 t0 <<< "$(measure)"
yes > /dev/null &
busy_pid=$!
sleep 0.5
read -r c1 q1 t1 <<< "$(measure)"
kill "$busy_pid"
busy_pid=""
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", b / a}'; }
printf '%-34s %12s %16s %8s\n' "workload (median of $repeats)" "idle ms" "beside busy ms" "ratio"
printf '%-34s %12s %16s %8s\n' "tapegrad small CNN, 150 steps" "$c0" "$c1" "$(ratio "$c0" "$c1")"
printf '%-34s %12s %16s %8s\n' "tapegrad quick start (process)" "$q0" "$q1" "$(ratio "$q0" "$q1")"
if [[ $have_torch == 1 ]]; then
  printf '%-34s %12s %16s %8s\n' "PyTorch small CNN, 150 steps" "$t0" "$t1" "$(ratio "$t0" "$t1")"
else
  echo "(PyTorch skipped or not installed: apt-get install python3-torch for its row)"
fi
