#pragma once
// Metrics on whole prediction sets, with scikit-learn's definitions (sklearn.metrics 1.x):
// accuracy_score, top_k_accuracy_score, confusion_matrix, precision_recall_fscore_support
// (zero_division = 0), mean_squared_error, mean_absolute_error, r2_score. Results are float64,
// accumulated in double. Every function throws std::invalid_argument naming the expected and
// actual shapes or values for mismatched or empty inputs, and std::runtime_error naming the
// function and the row for a NaN or infinite score, prediction or target (a metric of a
// diverged model's outputs is not a result).
#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad::train {

/// Class predictions: `prediction` (N) int64 class indices, or scores / logits (N, C) of a
/// float dtype, taken as their row argmax (the first maximum).
Tensor predicted_classes(const Tensor& prediction);

/// Fraction of rows whose predicted class equals `target` (N) int64. Throws for N = 0.
double accuracy(const Tensor& prediction, const Tensor& target);

/// Fraction of rows whose true class is among the k highest scores of `scores` (N, C) (as
/// sklearn's top_k_accuracy_score: classes ordered by score, ties by the higher class index
/// first). k >= C gives 1. Throws for k < 1, a target outside [0, C).
double top_k_accuracy(const Tensor& scores, const Tensor& target, std::int64_t k);

/// confusion[t][p]: rows of true class t predicted as p (sklearn's layout: rows true,
/// columns predicted), classes × classes. classes = 0: max(label, prediction) + 1. Indexed
/// by class: a class below the largest that is neither a label nor a prediction has a zero
/// row and column (sklearn's default drops it, as with labels = sorted union; its other
/// entries are the same). classification_report's default leaves such classes out.
/// Throws for a label or prediction outside [0, classes).
using ConfusionMatrix = std::vector<std::vector<std::int64_t>>;
/// The confusion matrix of `prediction` (as predicted_classes) against `target` (N) int64.
ConfusionMatrix confusion_matrix(const Tensor& prediction, const Tensor& target, std::int64_t classes = 0);

/// Per-class precision, recall and F1 from a confusion matrix (sklearn's
/// precision_recall_fscore_support with zero_division = 0: a class never predicted has
/// precision 0, a class absent from the targets recall 0, and F1 = 0 when both are 0).
/// Averages: macro (unweighted mean over the report's labels) and weighted (by support).
struct ClassificationReport {
  ///@{
  /// Per class (index = class): precision TP/(TP+FP), recall TP/(TP+FN), F1 their harmonic
  /// mean; 0 where undefined (zero_division = 0).
  std::vector<double> precision, recall, f1;
  ///@}
  std::vector<std::int64_t> support;  ///< true rows per class
  /// The classes the averages run over (and format_report prints), ascending unless given.
  std::vector<std::int64_t> labels;
  /// Trace of the confusion matrix over its total.
  double accuracy = 0;
  ///@{
  /// Unweighted means over `labels` of precision, recall and f1.
  double macro_precision = 0, macro_recall = 0, macro_f1 = 0;
  ///@}
  ///@{
  /// Means over `labels` weighted by support.
  double weighted_precision = 0, weighted_recall = 0, weighted_f1 = 0;
  ///@}
};
/// `labels` (sklearn's labels=): the classes to average over; empty (the default): as
/// sklearn, the sorted classes that occur as a target or a prediction (a class in neither
/// does not count as 0 in the macro average). Per-class vectors always cover every class.
/// Throws std::invalid_argument for a matrix that is not square or is empty, a negative
/// count, or a label outside [0, classes) or given twice.
ClassificationReport classification_report(const ConfusionMatrix& confusion,
                                            const std::vector<std::int64_t>& labels = {});

/// The report as aligned text (precision, recall, f1-score, support per class of
/// report.labels, then accuracy and the averages), class names from `names` when given
/// (else indices).
std::string format_report(const ClassificationReport& report, const std::vector<std::string>& names = {});
/// The confusion matrix as aligned text with class names (rows true, columns predicted).
std::string format_confusion(const ConfusionMatrix& confusion, const std::vector<std::string>& names = {});

/// Regression metrics on `prediction` and `target` of the same shape, (N) or (N, k), any
/// float dtype (compared in double). With k outputs: the uniform average over outputs
/// (sklearn's multioutput = "uniform_average").
double mean_squared_error(const Tensor& prediction, const Tensor& target);
/// Mean of |prediction - target| (sklearn's mean_absolute_error).
double mean_absolute_error(const Tensor& prediction, const Tensor& target);
/// R² = 1 - Σ(y - ŷ)² / Σ(y - ȳ)² per output; for a constant target column (Σ(y - ȳ)² = 0)
/// 1 when the prediction is exact and 0 otherwise (sklearn's force_finite). Throws for N < 2.
double r2_score(const Tensor& prediction, const Tensor& target);

}  // namespace tapegrad::train
