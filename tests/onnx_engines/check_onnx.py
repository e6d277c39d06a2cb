#!/usr/bin/env python3
"""Checks the cases of onnx_write_cases (manifest.json in the folder given) with onnx.checker
(full_check: the checker plus strict shape inference) and, where the manifest says so, runs
them in OpenCV's DNN module (cv2.dnn.readNetFromONNX), comparing with tapegrad's outputs.
Exit 0: all passed; 1: a check failed; 77: onnx or cv2 is not importable (Debian's
python3-onnx, python3-opencv; scripts/setup.sh installs them)."""
import json
import os
import sys

import numpy as np


def main():
    folder = sys.argv[1]
    try:
        import onnx
        import cv2
    except ImportError as e:
        print(f"check_onnx: cannot import {e.name} (install python3-onnx and python3-opencv: scripts/setup.sh)")
        return 77
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    tol = manifest["tolerance"]
    failures = 0
    print(f"onnx {onnx.__version__}, OpenCV {cv2.__version__}")
    for case in manifest["cases"]:
        path = os.path.join(folder, case["model"])
        model = onnx.load(path)
        try:
            onnx.checker.check_model(model, full_check=True)
            print(f"PASS onnx.checker {case['name']} (opset {model.opset_import[0].version}, {len(model.graph.node)} nodes)")
        except Exception as e:  # onnx.checker.ValidationError, shape inference errors
            print(f"FAIL onnx.checker {case['name']}: {e}")
            failures += 1
        if "opencv" not in case["engines"]:
            continue
        try:
            net = cv2.dnn.readNetFromONNX(path)
        except cv2.error as e:
            print(f"FAIL opencv {case['name']}: cannot read the model: {e}")
            failures += 1
            continue
        for run in case["runs"]:
            x = np.fromfile(os.path.join(folder, run["input"]), dtype="<f4").reshape(run["input_shape"])
            want = np.fromfile(os.path.join(folder, run["output"]), dtype="<f4").reshape(run["output_shape"])
            net.setInput(x)
            got = net.forward()
            if got.shape != want.shape:
                print(f"FAIL opencv {case['name']} batch {run['batch']}: shape {got.shape}, expected {want.shape}")
                failures += 1
                continue
            err = float(np.max(np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))))
            ok = err <= tol
            failures += not ok
            print(f"{'PASS' if ok else 'FAIL'} opencv {case['name']} batch {run['batch']}: max error {err:.3g} (tolerance {tol:g})")
    print(f"check_onnx: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
