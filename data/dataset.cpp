#include <tapegrad/data/dataset.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace tapegrad::data {

namespace {

std::string describe(const Tensor& t) {
  return t.defined() ? shape_str(t.shape()) + " " + dtype_name(t.dtype()) : std::string("undefined");
}

// Bytes of one sample (row of dim 0) of t.
std::size_t row_bytes(const Tensor& t) {
  std::size_t b = dtype_size(t.dtype());
  for (std::int64_t d = 1; d < t.dim(); ++d) b *= static_cast<std::size_t>(t.size(d));
  return b;
}

// t's rows at `indices` (validated by the caller), copied into a new tensor.
Tensor gather_rows(const Tensor& t, const std::vector<std::int64_t>& indices) {
  Shape s = t.shape();
  s[0] = static_cast<std::int64_t>(indices.size());
  Tensor out = Tensor::empty(s, t.dtype());
  const std::size_t rb = row_bytes(t);
  const auto* src = static_cast<const std::uint8_t*>(t.raw_data());
  auto* dst = static_cast<std::uint8_t*>(out.raw_data());
  for (std::size_t r = 0; r < indices.size(); ++r)
    if (rb) std::memcpy(dst + r * rb, src + static_cast<std::size_t>(indices[r]) * rb, rb);
  return out;
}

}  // namespace

Dataset Dataset::make(Tensor X, Tensor y, std::vector<std::string> class_names) {
  if (!X.defined() || !y.defined()) throw std::invalid_argument("Dataset: X and y must be defined");
  if (X.dim() < 1 || X.dtype() != Dtype::Float32)
    throw std::invalid_argument("Dataset: expected X of shape (N, *) float32, got " + describe(X));
  const bool classes = y.dtype() == Dtype::Int64 && y.dim() == 1;
  const bool targets = y.dtype() == Dtype::Float32 && (y.dim() == 1 || y.dim() == 2);
  if (!classes && !targets)
    throw std::invalid_argument("Dataset: expected y of shape (N) int64 (class indices) or (N) / (N, k) float32 "
                                "(regression targets), got " + describe(y));
  if (X.size(0) != y.size(0))
    throw std::invalid_argument("Dataset: X " + shape_str(X.shape()) + " and y " + shape_str(y.shape()) +
                                " have different N");
  if (!class_names.empty() && !classes)
    throw std::invalid_argument("Dataset: class_names given for float targets " + describe(y));
  return Dataset{X.detach(), y.detach(), std::move(class_names)};
}

std::int64_t Dataset::num_features() const {
  if (!X.defined()) return 0;
  std::int64_t n = 1;
  for (std::int64_t d = 1; d < X.dim(); ++d) n *= X.size(d);
  return n;
}

Shape Dataset::sample_shape() const {
  if (!X.defined() || X.dim() == 0) return {};
  return Shape(X.shape().begin() + 1, X.shape().end());
}

Dataset Dataset::slice(std::int64_t begin, std::int64_t end) const {
  if (begin < 0 || end < begin || end > size())
    throw std::out_of_range("Dataset::slice: expected 0 <= begin <= end <= " + std::to_string(size()) + ", got [" +
                            std::to_string(begin) + ", " + std::to_string(end) + ")");
  std::vector<std::int64_t> idx(static_cast<std::size_t>(end - begin));
  for (std::int64_t i = begin; i < end; ++i) idx[static_cast<std::size_t>(i - begin)] = i;
  return take(idx);
}

Dataset Dataset::take(const std::vector<std::int64_t>& indices) const {
  const std::int64_t n = size();
  for (auto i : indices)
    if (i < 0 || i >= n)
      throw std::out_of_range("Dataset::take: index " + std::to_string(i) + " out of range for N = " +
                              std::to_string(n));
  return Dataset{gather_rows(X, indices), gather_rows(y, indices), class_names};
}

Dataset Dataset::reshaped(const Shape& sample_shape) const {
  Shape s{size()};
  s.insert(s.end(), sample_shape.begin(), sample_shape.end());
  if (numel_of(s) != X.numel() || std::any_of(sample_shape.begin(), sample_shape.end(), [](auto d) { return d < 0; }))
    throw std::invalid_argument("Dataset::reshaped: cannot view X " + shape_str(X.shape()) + " as " + shape_str(s) +
                                " (samples of " + std::to_string(num_features()) + " values)");
  return Dataset{alias_with_shape(X, s), y, class_names};
}

std::int64_t Dataset::num_classes() const {
  if (y.defined() && y.dtype() != Dtype::Int64)
    throw std::logic_error("Dataset::num_classes: the targets are " + describe(y) + " regression values, not classes");
  std::int64_t mx = -1;
  const std::int64_t* ys = y.defined() ? y.data<std::int64_t>() : nullptr;
  for (std::int64_t i = 0; i < size(); ++i) mx = std::max(mx, ys[i]);
  if (mx == std::numeric_limits<std::int64_t>::max())
    throw std::overflow_error("Dataset::num_classes: the largest label is " + std::to_string(mx) +
                              ", its count does not fit int64");
  return std::max(mx + 1, static_cast<std::int64_t>(class_names.size()));
}

std::vector<std::int64_t> randperm(std::int64_t n, Generator& gen) {
  if (n < 0) throw std::invalid_argument("randperm: expected n >= 0, got " + std::to_string(n));
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = i;
  for (std::int64_t i = n - 1; i > 0; --i) std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(gen.randint(i + 1))]);
  return p;
}

TrainValSplit train_val_split(const Dataset& full, std::int64_t val_size, Generator& gen) {
  const std::int64_t n = full.size();
  if (val_size < 0 || val_size > n)
    throw std::invalid_argument("train_val_split: expected 0 <= val_size <= " + std::to_string(n) + ", got " +
                                std::to_string(val_size));
  std::vector<std::int64_t> p = randperm(n, gen);
  std::vector<std::int64_t> tr(p.begin(), p.end() - val_size), va(p.end() - val_size, p.end());
  std::sort(tr.begin(), tr.end());
  std::sort(va.begin(), va.end());
  return {full.take(tr), full.take(va)};
}

// ---- standardisation -------------------------------------------------------------------

namespace {
Shape sample_shape_of(const Tensor& X) { return Shape(X.shape().begin() + 1, X.shape().end()); }

// scikit-learn's _is_constant_feature: a variance within the rounding error of its own
// computation (n values of this mean in float64) is zero. Relative to the column's
// magnitude, so a column of small values (std 1e-7) is still scaled.
bool is_constant_feature(double var, double mean, double n) {
  const double eps = std::numeric_limits<double>::epsilon();
  const double bound = n * eps * var + (n * mean * eps) * (n * mean * eps);
  return var <= bound;
}
}  // namespace

Standardizer Standardizer::fit(const Tensor& X, Scope scope) {
  if (!X.defined() || X.dim() < 1 || X.dtype() != Dtype::Float32 || X.size(0) == 0)
    throw std::invalid_argument("Standardizer::fit: expected a non-empty (N, *) float32 tensor, got " + describe(X));
  const bool per_feature = scope == Scope::PerFeature;
  const std::int64_t n = X.size(0), d = X.numel() / n;
  const float* x = X.data<float>();
  Standardizer s;
  s.scope_ = scope;
  s.feature_shape_ = sample_shape_of(X);
  s.features_ = d;
  const std::int64_t k = per_feature ? d : 1;
  std::vector<double> sum(static_cast<std::size_t>(k), 0.0), sq(static_cast<std::size_t>(k), 0.0);
  // Two passes (mean, then squared deviations) in float64: no cancellation.
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < d; ++j) sum[per_feature ? j : 0] += x[i * d + j];
  const double count = per_feature ? static_cast<double>(n) : static_cast<double>(n) * static_cast<double>(d);
  for (auto& v : sum) v /= count;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < d; ++j) {
      const double c = x[i * d + j] - sum[per_feature ? j : 0];
      sq[per_feature ? j : 0] += c * c;
    }
  s.mean_ = sum;
  s.std_.resize(sq.size());
  for (std::size_t j = 0; j < sq.size(); ++j) {
    const double var = sq[j] / count;
    s.std_[j] = is_constant_feature(var, sum[j], count) ? 1.0 : std::sqrt(var);
  }
  return s;
}

Standardizer Standardizer::from_stats(std::int64_t features, std::vector<double> mean, std::vector<double> std) {
  if (features < 1) throw std::invalid_argument("Standardizer::from_stats: expected features >= 1, got " + std::to_string(features));
  const std::size_t k = mean.size();
  if (std.size() != k || (k != 1 && k != static_cast<std::size_t>(features)))
    throw std::invalid_argument("Standardizer::from_stats: expected mean and std of size 1 or " +
                                std::to_string(features) + ", got " + std::to_string(mean.size()) + " and " +
                                std::to_string(std.size()));
  for (std::size_t j = 0; j < k; ++j)
    if (!std::isfinite(mean[j]) || !std::isfinite(std[j]) || !(std[j] > 0))
      throw std::invalid_argument("Standardizer::from_stats: expected finite mean and std > 0, got mean " +
                                  std::to_string(mean[j]) + ", std " + std::to_string(std[j]) + " at " +
                                  std::to_string(j));
  Standardizer s;
  // size 1 with features == 1 is a per-feature fit of one column: same values either way
  s.scope_ = k == 1 && features != 1 ? Scope::Global : Scope::PerFeature;
  s.feature_shape_ = {features};
  s.features_ = features;
  s.mean_ = std::move(mean);
  s.std_ = std::move(std);
  return s;
}

Tensor Standardizer::transform(const Tensor& X) const {
  if (mean_.empty()) throw std::logic_error("Standardizer::transform: not fitted");
  const bool ok = X.defined() && X.dim() >= 1 && X.dtype() == Dtype::Float32 &&
                  (per_feature() ? sample_shape_of(X) == feature_shape_
                                 : (X.size(0) == 0 ? numel_of(sample_shape_of(X)) : X.numel() / X.size(0)) == features_);
  if (!ok) {
    Shape want{-1};
    want.insert(want.end(), feature_shape_.begin(), feature_shape_.end());
    std::string w = "(N";
    for (auto v : feature_shape_) w += ", " + std::to_string(v);
    w += ")";
    throw std::invalid_argument("Standardizer::transform: expected " + w + " float32" +
                                (per_feature() ? std::string() : " or any (N, *) of " + std::to_string(features_) +
                                                                     " values per sample") +
                                ", got " + describe(X));
  }
  const std::int64_t n = X.size(0), d = features_;
  Tensor out = Tensor::empty(X.shape(), Dtype::Float32);
  const float* x = X.data<float>();
  float* o = out.data<float>();
  std::vector<float> m(static_cast<std::size_t>(d)), inv(static_cast<std::size_t>(d));
  for (std::int64_t j = 0; j < d; ++j) {
    const std::size_t k = per_feature() ? static_cast<std::size_t>(j) : 0;
    m[static_cast<std::size_t>(j)] = static_cast<float>(mean_[k]);
    inv[static_cast<std::size_t>(j)] = static_cast<float>(1.0 / std_[k]);
  }
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < d; ++j) o[i * d + j] = (x[i * d + j] - m[j]) * inv[j];
  return out;
}

Dataset Standardizer::transform(const Dataset& ds) const { return Dataset{transform(ds.X), ds.y, ds.class_names}; }

Tensor Standardizer::mean_tensor() const {
  return Tensor::from_vector(mean_, per_feature() ? feature_shape_ : Shape{1}, Dtype::Float64);
}

Tensor Standardizer::std_tensor() const {
  return Tensor::from_vector(std_, per_feature() ? feature_shape_ : Shape{1}, Dtype::Float64);
}

std::vector<std::pair<std::string, Tensor>> Standardizer::state_dict() const {
  if (mean_.empty()) throw std::logic_error("Standardizer::state_dict: not fitted");
  return {{"mean", mean_tensor()},
          {"std", std_tensor()},
          {"feature_shape", Tensor::from_int64(feature_shape_, {static_cast<std::int64_t>(feature_shape_.size())})}};
}

Standardizer Standardizer::from_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  auto get = [&](const char* key, Dtype dtype) -> const Tensor& {
    for (const auto& [k, t] : state)
      if (k == key) {
        if (!t.defined() || t.dtype() != dtype || t.dim() != 1)
          throw std::invalid_argument(std::string("Standardizer::from_state_dict: '") + key + "' must be a 1-d " +
                                      dtype_name(dtype) + " tensor, got " + describe(t));
        return t;
      }
    throw std::invalid_argument(std::string("Standardizer::from_state_dict: missing '") + key +
                                "' (expected 'mean', 'std' and 'feature_shape')");
  };
  const Tensor& fs = get("feature_shape", Dtype::Int64);
  Shape shape;
  for (double v : fs.to_vector()) shape.push_back(static_cast<std::int64_t>(v));
  if (std::any_of(shape.begin(), shape.end(), [](auto v) { return v < 1; }) || shape.empty())
    throw std::invalid_argument("Standardizer::from_state_dict: 'feature_shape' must hold sizes >= 1, got " +
                                shape_str(shape));
  const std::int64_t features = numel_of(shape);
  // mean/std: (1) global, or the feature shape (flattened here) per feature
  auto values = [&](const char* key) {
    const Tensor* t = nullptr;
    for (const auto& [k, v] : state)
      if (k == key) t = &v;
    if (!t) get(key, Dtype::Float64);  // throws "missing"
    if (!t->defined() || t->dtype() != Dtype::Float64 || !(t->shape() == Shape{1} || t->shape() == shape))
      throw std::invalid_argument(std::string("Standardizer::from_state_dict: '") + key +
                                  "' must be float64 of shape [1] or " + shape_str(shape) + ", got " + describe(*t));
    return t->to_vector();
  };
  std::vector<double> mean = values("mean"), std = values("std");
  const bool global = mean.size() == 1 && features != 1;
  Standardizer s = from_stats(features, std::move(mean), std::move(std));
  s.scope_ = global ? Scope::Global : Scope::PerFeature;
  s.feature_shape_ = shape;
  return s;
}

}  // namespace tapegrad::data
