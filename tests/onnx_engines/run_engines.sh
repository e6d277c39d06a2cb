#!/usr/bin/env bash
# ctest onnx_engines: writes the cases (onnx_write_cases OUT_DIR), then checks them with
# onnx.checker + OpenCV DNN (check_onnx.py, Debian's python3) and ONNX Runtime (check_ort.js,
# node + onnxruntime-node). Exit 77 (ctest: skipped) when an engine is missing, saying which;
# with TAPEGRAD_REQUIRE_ONNX_ENGINES=1 (CI) a missing engine fails instead.
# Usage: run_engines.sh WRITER OUT_DIR NODE_MODULES_DIR
set -uo pipefail
writer=$1 out=$2 modules=$3
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
missing=()
"$python" -c "import onnx" 2> /dev/null || missing+=("python3-onnx")
"$python" -c "import cv2" 2> /dev/null || missing+=("python3-opencv")
command -v node > /dev/null || missing+=("nodejs")
[ -f "$modules/onnxruntime-node/package.json" ] || missing+=("onnxruntime-node in $modules")
if [ ${#missing[@]} -gt 0 ]; then
  if [ "${TAPEGRAD_REQUIRE_ONNX_ENGINES:-0}" = 1 ]; then
    echo "onnx_engines: FAILED, TAPEGRAD_REQUIRE_ONNX_ENGINES=1 and not installed: ${missing[*]} (scripts/setup.sh installs them)"
    exit 1
  fi
  echo "onnx_engines: SKIPPED, not installed: ${missing[*]} (scripts/setup.sh installs them)"
  exit 77
fi
rm -rf "$out" && mkdir -p "$out" || exit 1
"$writer" "$out" || exit 1
rc=0
"$python" "$here/check_onnx.py" "$out" || rc=1
node "$here/check_ort.js" "$out" "$modules" || rc=1
exit $rc
