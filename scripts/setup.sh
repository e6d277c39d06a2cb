#!/usr/bin/env bash
# Installs the Debian packages tapegrad needs, only those that are missing.
# Usage: scripts/setup.sh [--main-job] [extra-package ...]
#   --main-job  only what scripts/run_experiments.sh needs: the compiler, the library's
#               required packages and gnuplot (no MPI, test, fuzz, docs or ONNX engines)
set -euo pipefail
main_job_packages=(
  cmake g++ make pkg-config
  libeigen3-dev libopenblas-openmp-dev libxsmm-dev libspdlog-dev nlohmann-json3-dev zlib1g-dev libcli11-dev
  libzip-dev libpng-dev libjpeg62-turbo-dev gnuplot-nox
)
if [ "${1:-}" = "--main-job" ]; then
  shift
  main_job=1
else
  main_job=0
fi
packages=(
  cmake g++ make pkg-config
  libeigen3-dev libopenblas-openmp-dev libxsmm-dev libspdlog-dev catch2 nlohmann-json3-dev zlib1g-dev libcli11-dev
  libbenchmark-dev gnuplot-nox dataset-fashion-mnist bc
  libzip-dev  # io/: the zip container of PyTorch torch.save files
  libpng-dev libjpeg62-turbo-dev  # data/: PNG and JPEG image files
  libdnnl-dev  # oneDNN: float32 Conv2d primitives (optional in CMake; im2col + GEMM without it)
  libcsv-dev  # bench/csv_parsers: read_csv's tokenizer measured against libcsv (optional in CMake)
  libopenmpi-dev openmpi-bin  # distributed/: data-parallel training over MPI
  clang libclang-rt-14-dev libomp-dev llvm  # scripts/test.sh: libFuzzer build, sanitizer symbolizer
  python3-onnx python3-opencv nodejs  # tests/onnx_engines: onnx.checker, OpenCV DNN, ONNX Runtime (node)
  doxygen  # scripts/test.sh stage docs: the API reference (docs/Doxyfile)
  "$@"
)
# npm for onnxruntime-node (below); a nodejs that ships its own npm (NodeSource's) conflicts
# with Debian's npm package, so it is only asked for when no npm is on the PATH.
command -v npm > /dev/null || packages+=(npm)
[ "$main_job" = 1 ] && packages=("${main_job_packages[@]}" "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "$main_job" = 1 ] && exit 0

# ONNX Runtime for tests/onnx_engines: the npm package onnxruntime-node (its CPU library is in
# the package; --ignore-scripts skips the install script, which only fetches optional GPU
# files). Installed once into tools/onnxruntime (kept out of git); offline-safe when present.
ort_dir="$(cd "$(dirname "$0")/.." && pwd)/tools/onnxruntime"
if [ ! -f "$ort_dir/node_modules/onnxruntime-node/package.json" ]; then
  if command -v npm > /dev/null; then
    mkdir -p "$ort_dir"
    echo "setup: npm install onnxruntime-node@1.20.1 into $ort_dir"
    (cd "$ort_dir" && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node@1.20.1) ||
      echo "setup: warning: onnxruntime-node could not be installed (offline?); the onnx_engines test will fail" \
        "(TAPEGRAD_REQUIRE_ONNX_ENGINES=0 skips it)"
  else
    echo "setup: warning: npm not found; the onnx_engines test will fail (TAPEGRAD_REQUIRE_ONNX_ENGINES=0 skips it)"
  fi
fi
