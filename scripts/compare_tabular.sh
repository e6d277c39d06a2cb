#!/usr/bin/env bash
# tapegrad's `tabular` CLI beside scikit-learn on Debian python3-sklearn's bundled data sets
# (digits 1797x64 10 classes, breast cancer 569x30 2 classes, diabetes 442x10 regression),
# 5-fold cross-validation on the SAME folds: tabular draws them (data::KFold, shuffled with
# --seed) and writes each row's fold (--fold-ids); scripts/compare_tabular.py fits
# scikit-learn's models on exactly those folds. Prints a markdown table: dataset, model,
# mean +- std over the folds (accuracy or R^2; std ddof 0), wall time of all 5 folds.
# Usage: scripts/compare_tabular.sh [build-dir=build] [seed=0]
# Needs: the tabular example built (TAPEGRAD_TARGETS=tabular scripts/build.sh) and
# python3-sklearn (installed by scripts/setup.sh when missing). Writes only to a temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
seed="${2:-0}"
tabular="$build/examples/tabular/tabular"
data=/usr/lib/python3/dist-packages/sklearn/datasets/data
hidden=100
[[ -x "$tabular" ]] || { echo "missing $tabular: build it first (see the header of $0)" >&2; exit 1; }
bash scripts/setup.sh python3-sklearn > /dev/null  # the data sets and scikit-learn (Debian)
[[ -f "$data/digits.csv.gz" ]] || { echo "missing $data: apt-get install -y python3-sklearn" >&2; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
/usr/bin/python3 scripts/compare_tabular.py prepare "$out"

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
rows=()
run_one() {  # name, then tabular's data arguments
  local name="$1"
  shift
  local log="$out/$name.log"
  "$tabular" "$@" --folds 5 --seed "$seed" --hidden "$hidden" --fold-ids "$out/$name.folds" > "$log"
  cat "$log" >&2
  # "mean accuracy 0.9733 +- 0.0102 over 5 folds (std, ddof 0); time 12.34 s"
  local line
  line=$(grep '^mean ' "$log")
  local mean std secs
  mean=$(sed -E 's/^mean [^ ]+ ([-0-9.]+) \+- .*/\1/' <<< "$line")
  std=$(sed -E 's/.* \+- ([0-9.]+) over.*/\1/' <<< "$line")
  secs=$(sed -E 's/.*time ([0-9.]+) s$/\1/' <<< "$line")
  rows+=("| $name | tapegrad tabular MLP($hidden,) | $mean ± $std | $secs |")
  while IFS=$'\t' read -r model m s t; do
    rows+=("| $name | $model | $m ± $s | $t |")
  done < <(/usr/bin/python3 scripts/compare_tabular.py run "$name" "$out/$name.folds" "$hidden")
}
run_one digits --csv "$data/digits.csv.gz" --no-header --label -1
run_one breast_cancer --csv "$data/breast_cancer.csv" --skip-rows 1 --no-header --label -1
run_one diabetes --csv "$out/diabetes.csv" --label target
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo
echo "| dataset | model | mean ± std (5 folds; accuracy or R²) | seconds (5 folds) |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
