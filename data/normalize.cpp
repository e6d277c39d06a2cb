// Normalize: per-channel statistics fitted on a training split, applied as torchvision's
// Normalize ((x - mean) / std in float32), and carried by a checkpoint.
#include <tapegrad/data/transforms.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include <tapegrad/data/describe.h>

namespace tapegrad::data {

Normalize::Normalize(std::vector<double> mean, std::vector<double> std) : mean_(std::move(mean)), std_(std::move(std)) {
  if (mean_.empty() || mean_.size() != std_.size())
    throw std::invalid_argument("Normalize: expected one mean and one std per channel, got " +
                                std::to_string(mean_.size()) + " means and " + std::to_string(std_.size()) + " stds");
  for (std::size_t c = 0; c < std_.size(); ++c) {
    if (!std::isfinite(mean_[c]))
      throw std::invalid_argument("Normalize: mean of channel " + std::to_string(c) + " is not finite: " +
                                  std::to_string(mean_[c]));
    if (!(std::isfinite(std_[c]) && std_[c] > 0))
      throw std::invalid_argument("Normalize: std of channel " + std::to_string(c) + " must be finite and > 0, got " +
                                  std::to_string(std_[c]));
  }
}

Normalize Normalize::fit(const Tensor& X) {
  if (!X.defined() || X.dtype() != Dtype::Float32 || X.dim() != 4 || X.numel() == 0)
    throw std::invalid_argument("Normalize::fit: expected a non-empty float32 batch (N, C, H, W), got " +
                                describe_tensor(X));
  const std::int64_t N = X.size(0), C = X.size(1), P = X.size(2) * X.size(3);
  const float* p = X.data<float>();
  std::vector<double> mean(static_cast<std::size_t>(C), 0.0), sd(static_cast<std::size_t>(C), 0.0);
  const double count = static_cast<double>(N * P);
  for (std::int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < P; ++i) s += p[(n * C + c) * P + i];
    const double m = s / count;
    double q = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < P; ++i) {
        const double d = p[(n * C + c) * P + i] - m;
        q += d * d;
      }
    mean[static_cast<std::size_t>(c)] = m;
    const double v = std::sqrt(q / count);
    sd[static_cast<std::size_t>(c)] = v > 0 ? v : 1.0;
  }
  return Normalize(std::move(mean), std::move(sd));
}

Normalize Normalize::fit(const SampleSource& source) {
  const Shape& s = source.sample_shape();
  if (source.size() < 1 || s.size() != 3)
    throw std::invalid_argument("Normalize::fit: expected a non-empty source of images (C, H, W), got " +
                                std::to_string(source.size()) + " samples of " + tuple_str(s));
  const std::int64_t C = s[0], P = s[1] * s[2], N = source.size();
  std::vector<double> mean(static_cast<std::size_t>(C), 0.0), sd(static_cast<std::size_t>(C), 0.0);
  // one sample at a time; each channel's sum still runs over (n, i) in order, so the sums
  // are those of fit(X) on the loaded X, bit for bit
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<double> acc(static_cast<std::size_t>(C), 0.0);
    for (std::int64_t n = 0; n < N; ++n) {
      const Tensor x = source.get(n);
      for (std::int64_t c = 0; c < C; ++c) {
        const float* p = x.data<float>() + c * P;
        for (std::int64_t i = 0; i < P; ++i) {
          const double d = pass == 0 ? p[i] : p[i] - mean[static_cast<std::size_t>(c)];
          acc[static_cast<std::size_t>(c)] += pass == 0 ? d : d * d;
        }
      }
    }
    for (std::int64_t c = 0; c < C; ++c) {
      const double v = acc[static_cast<std::size_t>(c)] / static_cast<double>(N * P);
      if (pass == 0) {
        mean[static_cast<std::size_t>(c)] = v;
      } else {
        const double r = std::sqrt(v);
        sd[static_cast<std::size_t>(c)] = r > 0 ? r : 1.0;
      }
    }
  }
  return Normalize(std::move(mean), std::move(sd));
}

Tensor Normalize::operator()(const Tensor& image, Generator&) const { return (*this)(image); }

Tensor Normalize::operator()(const Tensor& image) const {
  const std::int64_t C = static_cast<std::int64_t>(mean_.size());
  if (!image.defined() || image.dtype() != Dtype::Float32 || (image.dim() != 3 && image.dim() != 4) ||
      image.size(image.dim() - 3) != C)
    throw std::invalid_argument("Normalize: expected a float32 image (C, H, W) or batch (N, C, H, W) with C = " +
                                std::to_string(C) + ", got " +
                                describe_tensor(image));
  const std::int64_t N = image.dim() == 4 ? image.size(0) : 1;
  const std::int64_t P = image.size(image.dim() - 2) * image.size(image.dim() - 1);
  Tensor out = Tensor::empty(image.shape(), Dtype::Float32);
  const float* src = image.data<float>();
  float* dst = out.data<float>();
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c) {
      const float m = static_cast<float>(mean_[static_cast<std::size_t>(c)]);
      const float s = static_cast<float>(std_[static_cast<std::size_t>(c)]);
      const std::int64_t base = (n * C + c) * P;
      for (std::int64_t i = 0; i < P; ++i) dst[base + i] = (src[base + i] - m) / s;
    }
  return out;
}

std::vector<std::pair<std::string, Tensor>> Normalize::state_dict() const {
  const auto C = static_cast<std::int64_t>(mean_.size());
  return {{"mean", Tensor::from_vector(mean_, {C}, Dtype::Float64)},
          {"std", Tensor::from_vector(std_, {C}, Dtype::Float64)}};
}

Normalize Normalize::from_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  auto get = [&](const std::string& key) {
    for (const auto& [name, t] : state) {
      if (name != key) continue;
      if (!t.defined() || t.dtype() != Dtype::Float64 || t.dim() != 1)
        throw std::invalid_argument("Normalize::from_state_dict: \"" + key + "\" must be float64 (C), got " +
                                    describe_tensor(t));
      return std::vector<double>(t.data<double>(), t.data<double>() + t.numel());
    }
    throw std::invalid_argument("Normalize::from_state_dict: no \"" + key + "\" tensor");
  };
  std::vector<double> mean = get("mean");  // named first: "mean" is checked before "std"
  std::vector<double> sd = get("std");
  return Normalize(std::move(mean), std::move(sd));
}

}  // namespace tapegrad::data
