#!/usr/bin/env bash
# The main job: install what is missing, build, and run the chapter's BN experiments.
# Results (CSV, Markdown summary, figures) go to results/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Only the experiments binary (and the library under it): no tests, benchmarks or
# libtorch comparisons, which the main job does not need.
TAPEGRAD_TARGETS=bn_experiments scripts/build.sh
"${BUILD_DIR:-build}/studies/bn_experiments/bn_experiments" all --out results "$@"
