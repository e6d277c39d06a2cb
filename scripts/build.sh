#!/usr/bin/env bash
# Configures and builds tapegrad (Release) into ${BUILD_DIR:-build}: every target, or only
# those listed in TAPEGRAD_TARGETS (e.g. TAPEGRAD_TARGETS=bn_experiments). Extra arguments
# go to cmake's configure step. Uses ccache when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" > "$build_dir.configure.log" 2>&1 || {
  cat "$build_dir.configure.log"; exit 1; }
targets=()
for t in ${TAPEGRAD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
