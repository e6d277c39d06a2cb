#!/usr/bin/python3
# scikit-learn's values for the worked examples of test_metrics.cpp (apt-get install
# python3-sklearn). Not run by the tests: the expected values there are worked out by hand.
import numpy as np
from sklearn import metrics as m

print("accuracy", m.accuracy_score([0, 1, 2, 2, 1], [0, 2, 2, 2, 1]))
s = np.array([[0.5, 0.2, 0.2], [0.3, 0.4, 0.2], [0.2, 0.4, 0.3], [0.7, 0.2, 0.1]])
for k in (1, 2, 3):
    print(f"top_k k={k}", m.top_k_accuracy_score([0, 1, 2, 2], s, k=k, labels=[0, 1, 2]))
tie = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
print("tie top2 true 0,2", m.top_k_accuracy_score([0, 2], tie, k=2, labels=[0, 1, 2]))
t = [0, 0, 0, 1, 1, 2, 2, 2, 2, 3]
p = [0, 1, 0, 1, 2, 2, 2, 0, 2, 2]
print(m.confusion_matrix(t, p))
print(m.precision_recall_fscore_support(t, p, zero_division=0))
for avg in ("macro", "weighted"):
    print(avg, m.precision_recall_fscore_support(t, p, average=avg, zero_division=0))
y, yp = [3, -0.5, 2, 7], [2.5, 0.0, 2, 8]
print("mse mae r2", m.mean_squared_error(y, yp), m.mean_absolute_error(y, yp), m.r2_score(y, yp))
y2, p2 = [[0.5, 1], [-1, 1], [7, -6]], [[0, 2], [-1, 2], [8, -5]]
print("2 outputs", m.mean_squared_error(y2, p2), m.mean_absolute_error(y2, p2), m.r2_score(y2, p2))
print("constant", m.r2_score([2, 2, 2], [2, 2, 2]), m.r2_score([2, 2, 2], [2, 2, 3]))
