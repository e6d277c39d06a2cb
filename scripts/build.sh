#!/usr/bin/env bash
# Configures and builds tapegrad (Release) into ${BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@" > "$build_dir.configure.log" 2>&1 || {
  cat "$build_dir.configure.log"; exit 1; }
cmake --build "$build_dir" -j "$(nproc)"
