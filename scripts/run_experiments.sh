#!/usr/bin/env bash
# The main job: install what is missing, build, and run the chapter's BN experiments.
# Results (CSV, Markdown summary with the verdicts, figures) go to results/; the console ends
# with the verdicts. Its own build folder (build-experiments, or BUILD_DIR) holds only the
# library and bn_experiments: no tests, examples, other studies or benchmarks, and the kernel
# variants only up to this machine's ISA level (TAPEGRAD_ISA_UP_TO_HOST: the kernels that run
# here are the portable build's, the results the same).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --main-job
build_dir="${BUILD_DIR:-build-experiments}"
t0=$SECONDS
BUILD_DIR="$build_dir" TAPEGRAD_TARGETS=bn_experiments scripts/build.sh \
  -DTAPEGRAD_BUILD_TESTS=OFF -DTAPEGRAD_BUILD_EXAMPLES=OFF -DTAPEGRAD_BUILD_BENCH=OFF -DTAPEGRAD_FUZZ=OFF \
  -DTAPEGRAD_DISTRIBUTED=OFF -DTAPEGRAD_ISA_UP_TO_HOST=ON
echo "run_experiments: built in $((SECONDS - t0)) s"
"$build_dir/studies/bn_experiments/bn_experiments" all --out results "$@"
