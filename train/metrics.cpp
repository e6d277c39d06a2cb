#include <tapegrad/train/metrics.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include <tapegrad/core/ops/minmax.h>

namespace tapegrad::train {

namespace {

// A NaN or infinite score or value is not a prediction: a metric of it would report a number
// the model did not earn (argmax of a NaN row picks a class; R² becomes NaN).
void check_finite(const Tensor& t, const char* fn, const char* what) {
  if (!t.defined() || !is_floating(t.dtype())) return;
  const std::vector<double> v = t.to_vector();
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) {
      const std::int64_t cols = t.dim() == 2 ? t.size(1) : 1;
      char buf[40];
      std::snprintf(buf, sizeof buf, "%g", v[i]);
      throw std::runtime_error(std::string(fn) + ": expected finite " + what + ", got " + buf + " in row " +
                               std::to_string(static_cast<std::int64_t>(i) / cols) + " (a diverged model?)");
    }
}

std::vector<std::int64_t> labels_of(const Tensor& t, const char* fn, const char* what) {
  if (!t.defined() || t.dim() != 1 || t.dtype() != Dtype::Int64)
    throw std::invalid_argument(std::string(fn) + ": expected " + what + " as an int64 vector (N), got " +
                                (t.defined() ? shape_str(t.shape()) + " " + dtype_name(t.dtype()) : "an undefined tensor"));
  const std::int64_t* p = t.data<std::int64_t>();  // tensors are contiguous
  return std::vector<std::int64_t>(p, p + t.numel());
}

std::vector<std::int64_t> classes_of(const Tensor& prediction, const char* fn) {
  if (!prediction.defined())
    throw std::invalid_argument(std::string(fn) + ": expected predictions (N) int64 or scores (N, C), got an undefined tensor");
  check_finite(prediction, fn, "scores");
  return labels_of(predicted_classes(prediction), fn, "predictions");
}

void same_rows(std::size_t a, std::size_t b, const char* fn) {
  if (a != b)
    throw std::invalid_argument(std::string(fn) + ": expected as many predictions as targets, got " + std::to_string(a) +
                                " predictions and " + std::to_string(b) + " targets");
  if (a == 0) throw std::invalid_argument(std::string(fn) + ": expected at least one row, got 0");
}

// (rows, outputs) views of a regression pair in double.
struct Columns {
  std::int64_t rows = 0, outputs = 0;
  std::vector<double> pred, target;  // row-major
};

Columns regression_pair(const Tensor& prediction, const Tensor& target, const char* fn) {
  auto check = [&](const Tensor& t, const char* what) {
    if (!t.defined() || (t.dim() != 1 && t.dim() != 2) || !is_floating(t.dtype()))
      throw std::invalid_argument(std::string(fn) + ": expected " + what + " as a float tensor (N) or (N, k), got " +
                                  (t.defined() ? shape_str(t.shape()) + " " + dtype_name(t.dtype()) : "an undefined tensor"));
  };
  check(prediction, "predictions");
  check(target, "targets");
  if (prediction.shape() != target.shape())
    throw std::invalid_argument(std::string(fn) + ": expected predictions and targets of the same shape, got " +
                                shape_str(prediction.shape()) + " and " + shape_str(target.shape()));
  Columns c;
  c.rows = prediction.size(0);
  c.outputs = prediction.dim() == 2 ? prediction.size(1) : 1;
  if (c.rows == 0 || c.outputs == 0)
    throw std::invalid_argument(std::string(fn) + ": expected at least one value, got shape " + shape_str(prediction.shape()));
  check_finite(prediction, fn, "predictions");
  check_finite(target, fn, "targets");
  c.pred = prediction.to_vector();
  c.target = target.to_vector();
  return c;
}

}  // namespace

Tensor predicted_classes(const Tensor& prediction) {
  if (prediction.defined() && prediction.dim() == 2 && is_floating(prediction.dtype())) {
    check_finite(prediction, "predicted_classes", "scores");
    return argmax(prediction, 1);
  }
  if (prediction.defined() && prediction.dim() == 1 && prediction.dtype() == Dtype::Int64) return prediction;
  throw std::invalid_argument("predicted_classes: expected class indices (N) int64 or scores (N, C) float, got " +
                              (prediction.defined() ? shape_str(prediction.shape()) + " " + dtype_name(prediction.dtype())
                                                    : std::string("an undefined tensor")));
}

double accuracy(const Tensor& prediction, const Tensor& target) {
  const auto p = classes_of(prediction, "accuracy");
  const auto y = labels_of(target, "accuracy", "targets");
  same_rows(p.size(), y.size(), "accuracy");
  std::int64_t hit = 0;
  for (std::size_t i = 0; i < p.size(); ++i) hit += p[i] == y[i];
  return static_cast<double>(hit) / static_cast<double>(p.size());
}

double top_k_accuracy(const Tensor& scores, const Tensor& target, std::int64_t k) {
  if (!scores.defined() || scores.dim() != 2 || !is_floating(scores.dtype()))
    throw std::invalid_argument("top_k_accuracy: expected scores (N, C) of a float dtype, got " +
                                (scores.defined() ? shape_str(scores.shape()) + " " + dtype_name(scores.dtype())
                                                  : std::string("an undefined tensor")));
  if (k < 1) throw std::invalid_argument("top_k_accuracy: expected k >= 1, got " + std::to_string(k));
  const auto y = labels_of(target, "top_k_accuracy", "targets");
  const std::int64_t n = scores.size(0), c = scores.size(1);
  same_rows(static_cast<std::size_t>(n), y.size(), "top_k_accuracy");
  check_finite(scores, "top_k_accuracy", "scores");
  const std::vector<double> s = scores.to_vector();
  std::int64_t hit = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t t = y[static_cast<std::size_t>(i)];
    if (t < 0 || t >= c)
      throw std::invalid_argument("top_k_accuracy: target " + std::to_string(t) + " of row " + std::to_string(i) +
                                  " outside [0, " + std::to_string(c) + ")");
    // Rank of the true class: classes before it in sklearn's order (stable ascending
    // argsort, reversed): a higher score, or an equal score at a higher index.
    const double* row = s.data() + i * c;
    std::int64_t before = 0;
    for (std::int64_t j = 0; j < c; ++j)
      if (row[j] > row[t] || (row[j] == row[t] && j > t)) ++before;
    hit += before < k;
  }
  return static_cast<double>(hit) / static_cast<double>(n);
}

ConfusionMatrix confusion_matrix(const Tensor& prediction, const Tensor& target, std::int64_t classes) {
  const auto p = classes_of(prediction, "confusion_matrix");
  const auto y = labels_of(target, "confusion_matrix", "targets");
  same_rows(p.size(), y.size(), "confusion_matrix");
  if (classes < 0) throw std::invalid_argument("confusion_matrix: expected classes >= 0, got " + std::to_string(classes));
  if (classes == 0) {
    std::int64_t m = 0;
    for (std::size_t i = 0; i < p.size(); ++i) m = std::max({m, p[i], y[i]});
    classes = m + 1;
  }
  ConfusionMatrix out(static_cast<std::size_t>(classes), std::vector<std::int64_t>(static_cast<std::size_t>(classes), 0));
  for (std::size_t i = 0; i < p.size(); ++i) {
    for (auto [v, what] : {std::pair{y[i], "label"}, std::pair{p[i], "prediction"}})
      if (v < 0 || v >= classes)
        throw std::invalid_argument(std::string("confusion_matrix: ") + what + " " + std::to_string(v) + " of row " +
                                    std::to_string(i) + " outside [0, " + std::to_string(classes) + ")");
    out[static_cast<std::size_t>(y[i])][static_cast<std::size_t>(p[i])]++;
  }
  return out;
}

ClassificationReport classification_report(const ConfusionMatrix& m, const std::vector<std::int64_t>& labels) {
  const std::size_t c = m.size();
  if (c == 0) throw std::invalid_argument("classification_report: expected a non-empty confusion matrix, got 0 classes");
  for (std::size_t i = 0; i < c; ++i) {
    if (m[i].size() != c)
      throw std::invalid_argument("classification_report: expected a square confusion matrix (" + std::to_string(c) +
                                  " columns per row), row " + std::to_string(i) + " has " + std::to_string(m[i].size()));
    for (auto v : m[i])
      if (v < 0)
        throw std::invalid_argument("classification_report: expected counts >= 0, got " + std::to_string(v) + " in row " +
                                    std::to_string(i));
  }
  ClassificationReport r;
  r.precision.assign(c, 0.0);
  r.recall.assign(c, 0.0);
  r.f1.assign(c, 0.0);
  r.support.assign(c, 0);
  std::int64_t total = 0, correct = 0;
  for (std::size_t k = 0; k < c; ++k) {
    std::int64_t tp = m[k][k], predicted = 0, actual = 0;
    for (std::size_t j = 0; j < c; ++j) {
      predicted += m[j][k];
      actual += m[k][j];
    }
    r.support[k] = actual;
    total += actual;
    correct += tp;
    r.precision[k] = predicted > 0 ? static_cast<double>(tp) / static_cast<double>(predicted) : 0.0;
    r.recall[k] = actual > 0 ? static_cast<double>(tp) / static_cast<double>(actual) : 0.0;
    const double s = r.precision[k] + r.recall[k];
    r.f1[k] = s > 0 ? 2 * r.precision[k] * r.recall[k] / s : 0.0;
  }
  r.accuracy = total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0;
  if (labels.empty()) {  // sklearn's default: the classes seen as a target or as a prediction
    for (std::size_t k = 0; k < c; ++k) {
      std::int64_t seen = 0;
      for (std::size_t j = 0; j < c; ++j) seen += m[k][j] + m[j][k];
      if (seen > 0) r.labels.push_back(static_cast<std::int64_t>(k));
    }
  } else {
    std::vector<bool> given(c, false);
    for (auto k : labels) {
      if (k < 0 || k >= static_cast<std::int64_t>(c))
        throw std::invalid_argument("classification_report: expected labels in [0, " + std::to_string(c) + "), got " +
                                    std::to_string(k));
      if (given[static_cast<std::size_t>(k)])
        throw std::invalid_argument("classification_report: label " + std::to_string(k) + " is given twice");
      given[static_cast<std::size_t>(k)] = true;
    }
    r.labels = labels;
  }
  std::int64_t label_support = 0;
  for (auto k : r.labels) label_support += r.support[static_cast<std::size_t>(k)];
  const auto nl = static_cast<double>(r.labels.size());
  for (auto label : r.labels) {
    const auto k = static_cast<std::size_t>(label);
    r.macro_precision += r.precision[k] / nl;
    r.macro_recall += r.recall[k] / nl;
    r.macro_f1 += r.f1[k] / nl;
    if (label_support > 0) {
      const double w = static_cast<double>(r.support[k]) / static_cast<double>(label_support);
      r.weighted_precision += w * r.precision[k];
      r.weighted_recall += w * r.recall[k];
      r.weighted_f1 += w * r.f1[k];
    }
  }
  return r;
}

namespace {
std::string name_of(const std::vector<std::string>& names, std::size_t i) {
  return i < names.size() ? names[i] : std::to_string(i);
}
}  // namespace

std::string format_report(const ClassificationReport& r, const std::vector<std::string>& names) {
  std::vector<std::size_t> rows;  // the report's labels (all classes for a report without them)
  if (r.labels.empty())
    for (std::size_t i = 0; i < r.support.size(); ++i) rows.push_back(i);
  for (auto k : r.labels)
    if (k >= 0 && static_cast<std::size_t>(k) < r.support.size()) rows.push_back(static_cast<std::size_t>(k));
  std::size_t w = 12;
  for (std::size_t i : rows) w = std::max(w, name_of(names, i).size() + 1);
  std::ostringstream os;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%*s %9s %9s %9s %9s\n", static_cast<int>(w), "", "precision", "recall", "f1-score",
                "support");
  os << buf;
  std::int64_t total = 0;
  for (std::size_t i : rows) {
    total += r.support[i];
    std::snprintf(buf, sizeof buf, "%*s %9.4f %9.4f %9.4f %9lld\n", static_cast<int>(w), name_of(names, i).c_str(),
                  r.precision[i], r.recall[i], r.f1[i], static_cast<long long>(r.support[i]));
    os << buf;
  }
  std::snprintf(buf, sizeof buf, "%*s %9s %9s %9.4f %9lld\n", static_cast<int>(w), "accuracy", "", "", r.accuracy,
                static_cast<long long>(total));
  os << buf;
  std::snprintf(buf, sizeof buf, "%*s %9.4f %9.4f %9.4f %9lld\n", static_cast<int>(w), "macro avg", r.macro_precision,
                r.macro_recall, r.macro_f1, static_cast<long long>(total));
  os << buf;
  std::snprintf(buf, sizeof buf, "%*s %9.4f %9.4f %9.4f %9lld\n", static_cast<int>(w), "weighted avg",
                r.weighted_precision, r.weighted_recall, r.weighted_f1, static_cast<long long>(total));
  os << buf;
  return os.str();
}

std::string format_confusion(const ConfusionMatrix& confusion, const std::vector<std::string>& names) {
  std::ostringstream os;
  char buf[64];
  os << "confusion matrix (rows: true class, columns: predicted)\n";
  std::snprintf(buf, sizeof buf, "%-12s", "");
  os << buf;
  for (std::size_t j = 0; j < confusion.size(); ++j) {
    std::snprintf(buf, sizeof buf, "%6zu", j);
    os << buf;
  }
  os << '\n';
  for (std::size_t i = 0; i < confusion.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%zu %-10s", i, i < names.size() ? names[i].c_str() : "");
    os << buf;
    for (auto v : confusion[i]) {
      std::snprintf(buf, sizeof buf, "%6lld", static_cast<long long>(v));
      os << buf;
    }
    os << '\n';
  }
  return os.str();
}

double mean_squared_error(const Tensor& prediction, const Tensor& target) {
  const Columns c = regression_pair(prediction, target, "mean_squared_error");
  double sum = 0;  // the per-output means averaged = the mean over every value (equal rows)
  for (std::size_t i = 0; i < c.pred.size(); ++i) sum += (c.pred[i] - c.target[i]) * (c.pred[i] - c.target[i]);
  return sum / static_cast<double>(c.pred.size());
}

double mean_absolute_error(const Tensor& prediction, const Tensor& target) {
  const Columns c = regression_pair(prediction, target, "mean_absolute_error");
  double sum = 0;
  for (std::size_t i = 0; i < c.pred.size(); ++i) sum += std::abs(c.pred[i] - c.target[i]);
  return sum / static_cast<double>(c.pred.size());
}

double r2_score(const Tensor& prediction, const Tensor& target) {
  const Columns c = regression_pair(prediction, target, "r2_score");
  if (c.rows < 2) throw std::invalid_argument("r2_score: expected at least 2 rows, got " + std::to_string(c.rows));
  double total = 0;
  for (std::int64_t k = 0; k < c.outputs; ++k) {
    double mean = 0;
    for (std::int64_t i = 0; i < c.rows; ++i) mean += c.target[static_cast<std::size_t>(i * c.outputs + k)];
    mean /= static_cast<double>(c.rows);
    double ss_res = 0, ss_tot = 0;
    for (std::int64_t i = 0; i < c.rows; ++i) {
      const std::size_t at = static_cast<std::size_t>(i * c.outputs + k);
      ss_res += (c.target[at] - c.pred[at]) * (c.target[at] - c.pred[at]);
      ss_tot += (c.target[at] - mean) * (c.target[at] - mean);
    }
    total += ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res == 0 ? 1.0 : 0.0);
  }
  return total / static_cast<double>(c.outputs);
}

}  // namespace tapegrad::train
