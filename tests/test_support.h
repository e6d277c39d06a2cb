#pragma once
// Helpers shared by the tests: seeded float64 random tensors, the relative-or-absolute
// closeness check most value tests use, and the train/eval gradcheck of a module.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/channel_norm.h>
#include <tapegrad/layers/module.h>

namespace tapegrad::test {

/// Uniform(lo, hi) float64 tensor of shape s from Generator(seed); no grad.
inline Tensor rand64(const Shape& s, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator g(seed);
  return uniform(s, lo, hi, Dtype::Float64, g);
}

/// |got - want| <= tol·max(1, |want|) at every element (so tol is absolute below 1 and
/// relative above), with equal element counts; NaN in got fails. Reports the first
/// offending element.
inline void require_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = got.size();
  for (std::size_t i = 0; i < got.size() && bad == got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])))) bad = i;
  INFO("element " << bad << ": got " << std::setprecision(17) << (bad < got.size() ? got[bad] : 0) << ", want "
                  << (bad < got.size() ? want[bad] : 0));
  REQUIRE(bad == got.size());
}

/// The same check on a tensor's values against a flat list (row-major).
inline void require_close(const Tensor& got, const std::vector<double>& want, double tol = 1e-12) {
  require_close(got.to_vector(), want, tol);
}

/// The same check between two tensors, which must have the same shape.
inline void require_close(const Tensor& got, const Tensor& want, double tol = 1e-12) {
  REQUIRE(got.shape() == want.shape());
  require_close(got.to_vector(), want.to_vector(), tol);
}

/// gradcheck of m.forward(x) w.r.t. x and every parameter of m, in train mode and then in
/// eval mode. The parameters are first set to Uniform(0.5, 1.5) from Generator(param_seed)
/// (non-trivial affine values); `before` runs before every forward.
inline void gradcheck_module(layers::Module& m, Tensor x, std::uint64_t param_seed,
                             const std::function<void()>& before = {}) {
  x.requires_grad_();
  std::vector<Tensor> in{x};
  for (auto& p : m.parameters()) {
    NoGradGuard ng;
    p.copy_(rand64(p.shape(), param_seed, 0.5, 1.5));
    in.push_back(p);
  }
  for (bool train : {true, false}) {
    m.train(train);
    auto r = gradcheck(
        [&](const std::vector<Tensor>& v) {
          if (before) before();
          return m.forward(v[0]);
        },
        in);
    INFO((train ? "train: " : "eval: ") << r.message);
    REQUIRE(r.ok);
  }
}

/// A `before` for gradcheck_module that puts m's current running statistics back before
/// every forward, so the function stays the same while gradcheck perturbs its inputs
/// (a train-mode forward updates them). Empty when m has none.
inline std::function<void()> keep_running_stats(layers::ChannelNormBase& m) {
  if (!m.running_mean.defined()) return {};
  const Tensor rm = m.running_mean.clone(), rv = m.running_var.clone();
  return [&m, rm, rv] {
    m.running_mean.copy_(rm);
    m.running_var.copy_(rv);
  };
}

}  // namespace tapegrad::test
