#include <tapegrad/data/dataset.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace tapegrad::data {

Dataset Dataset::make(Tensor X, Tensor y) {
  if (!X.defined() || !y.defined()) throw std::invalid_argument("Dataset: X and y must be defined");
  if (X.dim() != 2 || X.dtype() != Dtype::Float32)
    throw std::invalid_argument("Dataset: expected X of shape (N, D) float32, got " + shape_str(X.shape()) + " " +
                                dtype_name(X.dtype()));
  if (y.dim() != 1 || y.dtype() != Dtype::Int64)
    throw std::invalid_argument("Dataset: expected y of shape (N) int64, got " + shape_str(y.shape()) + " " +
                                dtype_name(y.dtype()));
  if (X.size(0) != y.size(0))
    throw std::invalid_argument("Dataset: X " + shape_str(X.shape()) + " and y " + shape_str(y.shape()) +
                                " have different N");
  return Dataset{X.detach(), y.detach()};
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
  const std::int64_t n = size(), d = num_features();
  for (auto i : indices)
    if (i < 0 || i >= n)
      throw std::out_of_range("Dataset::take: index " + std::to_string(i) + " out of range for N = " +
                              std::to_string(n));
  const auto m = static_cast<std::int64_t>(indices.size());
  Tensor X2 = Tensor::empty({m, d}, Dtype::Float32);
  Tensor y2 = Tensor::empty({m}, Dtype::Int64);
  const float* xs = X.data<float>();
  const std::int64_t* ys = y.data<std::int64_t>();
  float* xd = X2.data<float>();
  std::int64_t* yd = y2.data<std::int64_t>();
  for (std::int64_t r = 0; r < m; ++r) {
    const std::int64_t src = indices[static_cast<std::size_t>(r)];
    std::memcpy(xd + r * d, xs + src * d, static_cast<std::size_t>(d) * sizeof(float));
    yd[r] = ys[src];
  }
  return Dataset{X2, y2};
}

std::int64_t Dataset::num_classes() const {
  std::int64_t mx = -1;
  const std::int64_t* ys = y.defined() ? y.data<std::int64_t>() : nullptr;
  for (std::int64_t i = 0; i < size(); ++i) mx = std::max(mx, ys[i]);
  return mx + 1;
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

Standardizer Standardizer::fit(const Tensor& X, bool per_feature) {
  if (!X.defined() || X.dim() != 2 || X.dtype() != Dtype::Float32 || X.size(0) == 0)
    throw std::invalid_argument("Standardizer::fit: expected a non-empty (N, D) float32 tensor, got " +
                                (X.defined() ? shape_str(X.shape()) + " " + dtype_name(X.dtype()) : "undefined"));
  const std::int64_t n = X.size(0), d = X.size(1);
  const float* x = X.data<float>();
  Standardizer s;
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
    const double sd = std::sqrt(sq[j] / count);
    s.std_[j] = sd < 1e-6 ? 1.0 : sd;
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
  s.features_ = features;
  s.mean_ = std::move(mean);
  s.std_ = std::move(std);
  return s;
}

Tensor Standardizer::transform(const Tensor& X) const {
  if (mean_.empty()) throw std::logic_error("Standardizer::transform: not fitted");
  if (!X.defined() || X.dim() != 2 || X.dtype() != Dtype::Float32 || X.size(1) != features_)
    throw std::invalid_argument("Standardizer::transform: expected (N, " + std::to_string(features_) +
                                ") float32, got " +
                                (X.defined() ? shape_str(X.shape()) + " " + dtype_name(X.dtype()) : "undefined"));
  const std::int64_t n = X.size(0), d = X.size(1);
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

Dataset Standardizer::transform(const Dataset& ds) const { return Dataset{transform(ds.X), ds.y}; }

}  // namespace tapegrad::data
