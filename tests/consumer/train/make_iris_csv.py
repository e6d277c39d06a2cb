#!/usr/bin/python3
# Writes iris.csv, the consumer test's fixture: Fisher's Iris data (UCI, public domain), 150
# rows, as scikit-learn ships it (Debian python3-sklearn), with a header row and the species
# as strings (so read_csv maps them to classes 0, 1, 2 in sorted order).
import csv
import os

import sklearn.datasets

src = os.path.join(os.path.dirname(sklearn.datasets.__file__), "data", "iris.csv")
with open(src) as f:
    rows = list(csv.reader(f))
names = rows[0][2:]  # 150,4,setosa,versicolor,virginica
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "iris.csv"), "w", newline="") as out:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["sepal_length", "sepal_width", "petal_length", "petal_width", "species"])
    for r in rows[1:]:
        w.writerow(r[:4] + [names[int(r[4])]])
