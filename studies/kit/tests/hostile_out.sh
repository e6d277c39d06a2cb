#!/usr/bin/env bash
# Runs a study CLI with --out set to a folder whose name holds a newline, quotes, `$(…)`,
# backquotes, a semicolon and gnuplot's enhanced-text characters, then checks that the run
# succeeded, wrote results.csv and summary.md there and, for every figure script in plots/,
# its PNG (when gnuplot is installed), and that nothing in the name was executed.
# usage: hostile_out.sh <base folder> <cli> <args>...   (the base folder is emptied first)
set -u
base=$1
shift
name=$'it\'s "q" $(touch PWNED_dollar) `touch PWNED_bq`; touch PWNED_semi\nline_2 {x}^y @z'
rm -rf "$base"
mkdir -p "$base" || exit 1
cd "$base" || exit 1  # a shell given the name would run its commands here
out="$base/$name"
"$@" --out "$out"
rc=$?
fail=0
if [ "$rc" -ne 0 ]; then echo "FAIL: exit status $rc"; fail=1; fi
for f in results.csv summary.md; do
  [ -s "$out/$f" ] || { echo "FAIL: $f not written in the output folder"; fail=1; }
done
if command -v gnuplot > /dev/null; then
  for gp in "$out"/plots/*.gp; do
    [ -e "$gp" ] || continue
    png="$out/$(basename "$gp" .gp).png"
    [ -s "$png" ] || { echo "FAIL: $(basename "$png") not drawn (see plots/gnuplot.log)"; fail=1; }
  done
fi
if [ -n "$(find "$base" -name 'PWNED*' -print -quit)" ]; then echo "FAIL: a command in the folder name was run"; fail=1; fi
[ "$fail" -eq 0 ] && echo "PASSED: every file written into the folder, nothing executed"
exit "$fail"
