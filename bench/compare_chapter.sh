#!/bin/sh
# Times the chapter's full workload: bn_experiments (tapegrad's CLI), the same workload as
# a plain tapegrad program and as a libtorch program, 5 runs each, medians.
#   bench/compare_chapter.sh [BUILD_DIR] [RUNS]
# BUILD_DIR defaults to ./build; it needs studies/bn_experiments/bn_experiments and, for
# the libtorch side, bench/chapter_libtorch (built when CMake finds Torch).
set -eu
B=${1:-build}
RUNS=${2:-5}

median() { sort -n | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# wall seconds of one run of "$@"
time_once() {
  s=$(date +%s.%N)
  "$@" > /dev/null 2>&1
  e=$(date +%s.%N)
  echo "$e - $s" | bc -l
}

time_median() {
  i=0
  while [ $i -lt "$RUNS" ]; do
    time_once "$@"
    i=$((i + 1))
  done | median
}

row() {  # label, command...
  label=$1
  shift
  if [ -x "$1" ]; then
    t=$(time_median "$@")
    printf '%-58s %8.2f s\n' "$label" "$t"
  else
    printf '%-58s %10s\n' "$label" "(not built: $1)"
  fi
}

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo "chapter workload, median of $RUNS runs (wall time of the whole process)"
row "bn_experiments all --seeds 1 --preset chapter --threads 1" \
    "$B/studies/bn_experiments/bn_experiments" all --seeds 1 --preset chapter --threads 1 -q --out "$OUT"
row "bn_experiments ... --eval-policy train --threads 1" \
    "$B/studies/bn_experiments/bn_experiments" all --seeds 1 --preset chapter --eval-policy train --threads 1 -q --out "$OUT"
row "bn_experiments ... --threads 2" \
    "$B/studies/bn_experiments/bn_experiments" all --seeds 1 --preset chapter --threads 2 -q --out "$OUT"
row "chapter_tapegrad --threads 1" "$B/bench/chapter_tapegrad" --threads 1
row "chapter_tapegrad --threads 2" "$B/bench/chapter_tapegrad" --threads 2
row "chapter_libtorch --threads 1" "$B/bench/chapter_libtorch" --threads 1
row "chapter_libtorch --threads 2" "$B/bench/chapter_libtorch" --threads 2
