#!/usr/bin/env bash
# Installs the Debian packages tapegrad needs, only those that are missing.
# Usage: scripts/setup.sh [extra-package ...]
set -euo pipefail
packages=(
  cmake g++ make pkg-config
  libeigen3-dev libopenblas-openmp-dev libxsmm-dev libspdlog-dev catch2 nlohmann-json3-dev zlib1g-dev libcli11-dev
  libbenchmark-dev gnuplot-nox dataset-fashion-mnist bc
  libzip-dev  # io/: the zip container of PyTorch torch.save files
  libdnnl-dev  # oneDNN: float32 Conv2d primitives (optional in CMake; im2col + GEMM without it)
  libopenmpi-dev openmpi-bin  # distributed/: data-parallel training over MPI
  clang libclang-rt-14-dev libomp-dev llvm  # scripts/test.sh: libFuzzer build, sanitizer symbolizer
  "$@"
)
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
