#!/usr/bin/env python3
"""scikit-learn's side of scripts/compare_tabular.sh, on the folds tapegrad's `tabular` wrote.

  compare_tabular.py prepare OUT_DIR
      writes OUT_DIR/diabetes.csv (the 10 raw features and the target, with a header) from
      Debian python3-sklearn's diabetes_data_raw.csv.gz + diabetes_target.csv.gz. digits and
      breast_cancer are read by both sides from the Debian files themselves.
  compare_tabular.py run NAME FOLD_IDS HIDDEN
      loads dataset NAME (digits | breast_cancer | diabetes) exactly as `tabular` reads it,
      takes each row's test fold from FOLD_IDS (tabular --fold-ids: one 0-based fold per line),
      and prints one line per model: "model<TAB>mean<TAB>std<TAB>seconds", the score being
      accuracy (classification) or R^2 (regression) on each held-out fold, mean and std
      (ddof 0) over the folds, seconds the wall time of all folds.
Models, each in a Pipeline after StandardScaler fitted on the training folds:
  classification: MLPClassifier(hidden_layer_sizes=HIDDEN), LogisticRegression(max_iter=1000)
  regression:     MLPRegressor(hidden_layer_sizes=HIDDEN), the same with the target standardised
                  (TransformedTargetRegressor; tabular standardises its targets too), Ridge()
scikit-learn's defaults otherwise (Adam, lr 1e-3, batch min(200, n), max_iter 200, L2 alpha
1e-4, no early stopping), random_state=0.
"""
import os
import sys
import time
import warnings

import numpy as np

DATA = "/usr/lib/python3/dist-packages/sklearn/datasets/data"


def load(name, out_dir=None):
    if name == "digits":  # 1797 rows: 64 pixel values then the digit; no header
        a = np.loadtxt(os.path.join(DATA, "digits.csv.gz"), delimiter=",")
        return a[:, :-1], a[:, -1].astype(int), True
    if name == "breast_cancer":  # a count line ("569,30,malignant,benign"), then 30 features and 0/1
        a = np.loadtxt(os.path.join(DATA, "breast_cancer.csv"), delimiter=",", skiprows=1)
        return a[:, :-1], a[:, -1].astype(int), True
    if name == "diabetes":
        X = np.loadtxt(os.path.join(DATA, "diabetes_data_raw.csv.gz"))
        y = np.loadtxt(os.path.join(DATA, "diabetes_target.csv.gz"))
        return X, y, False
    raise SystemExit(f"compare_tabular.py: unknown dataset '{name}'")


def prepare(out_dir):
    X, y, _ = load("diabetes")
    cols = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]
    with open(os.path.join(out_dir, "diabetes.csv"), "w") as f:
        f.write(",".join(cols + ["target"]) + "\n")
        for row, t in zip(X, y):
            f.write(",".join(repr(float(v)) for v in row) + f",{float(t)!r}\n")


def run(name, fold_ids_path, hidden):
    from sklearn.compose import TransformedTargetRegressor
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.metrics import accuracy_score, r2_score
    from sklearn.neural_network import MLPClassifier, MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    warnings.simplefilter("ignore", ConvergenceWarning)
    X, y, classification = load(name)
    folds = np.loadtxt(fold_ids_path, dtype=int)
    if len(folds) != len(y):
        raise SystemExit(f"compare_tabular.py: {fold_ids_path} has {len(folds)} rows, {name} has {len(y)}")
    sizes = tuple(int(h) for h in hidden.split(","))
    if classification:
        models = {
            f"scikit-learn MLPClassifier{sizes}": lambda: MLPClassifier(hidden_layer_sizes=sizes, random_state=0),
            "scikit-learn LogisticRegression": lambda: LogisticRegression(max_iter=1000),
        }
        score = accuracy_score
    else:
        models = {
            f"scikit-learn MLPRegressor{sizes}": lambda: MLPRegressor(hidden_layer_sizes=sizes, random_state=0),
            f"scikit-learn MLPRegressor{sizes}, target standardised": lambda: TransformedTargetRegressor(
                regressor=MLPRegressor(hidden_layer_sizes=sizes, random_state=0), transformer=StandardScaler()),
            "scikit-learn Ridge": lambda: Ridge(),
        }
        score = r2_score
    for label, make in models.items():
        t0 = time.perf_counter()
        scores = []
        for k in range(folds.max() + 1):
            test = folds == k
            model = make_pipeline(StandardScaler(), make())
            model.fit(X[~test], y[~test])
            scores.append(score(y[test], model.predict(X[test])))
        secs = time.perf_counter() - t0
        print(f"{label}\t{np.mean(scores):.4f}\t{np.std(scores):.4f}\t{secs:.2f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "prepare":
        prepare(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(__doc__)
