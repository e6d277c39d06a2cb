#!/usr/bin/env bash
# Configures and builds tapegrad (Release) into ${BUILD_DIR:-build}: every target, or only
# those listed in TAPEGRAD_TARGETS (e.g. TAPEGRAD_TARGETS=bn_experiments). Extra arguments
# go to cmake's configure step. Uses ccache when it is installed. JOBS sets the parallel
# compile jobs (default: every core, nproc), e.g. JOBS=1 on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
jobs="${JOBS:-$(nproc)}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "build.sh: JOBS: expected a positive integer, got '$jobs'" >&2; exit 2; }
launcher=()
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # the tests' precompiled header (tests/CMakeLists.txt) is cached only with these
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros}"
fi
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" > "$build_dir.configure.log" 2>&1 || {
  cat "$build_dir.configure.log"; exit 1; }
targets=()
for t in ${TAPEGRAD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
