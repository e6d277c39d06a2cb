// Element-wise math: each forward is followed by its backward closure.
#include <tapegrad/core/ops/unary.h>

#include <cmath>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/kernels/pointwise.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/kernels.h>

namespace tapegrad {

Tensor exp(const Tensor& x) {
  Tensor out = kernels::map_floating(x, "exp", [](auto v) { return std::exp(v); });
  // d(eˣ)/dx = eˣ = y
  kernels::record_pointwise("exp", out, x, kernels::Saved::Output, [](auto gv, auto yv) { return gv * yv; },
                            [](const Tensor& g, const Tensor& y) { return mul(g, y); });
  return out;
}

Tensor log(const Tensor& x) {
  Tensor out = kernels::map_floating(x, "log", [](auto v) { return std::log(v); });
  // d(log x)/dx = 1/x
  kernels::record_pointwise("log", out, x, kernels::Saved::Input, [](auto gv, auto xv) { return gv / xv; },
                            [](const Tensor& g, const Tensor& xs) { return div(g, xs); });
  return out;
}

Tensor sqrt(const Tensor& x) {
  Tensor out = kernels::map_floating(x, "sqrt", [](auto v) { return std::sqrt(v); });
  // d(√x)/dx = 1/(2√x) = 1/(2y)
  kernels::record_pointwise("sqrt", out, x, kernels::Saved::Output, [](auto gv, auto yv) { return gv / (yv + yv); },
                            [](const Tensor& g, const Tensor& y) { return div(g, mul(y, 2.0)); });
  return out;
}

Tensor rsqrt(const Tensor& x) {
  Tensor out = kernels::map_floating(x, "rsqrt", [](auto v) { return decltype(v)(1) / std::sqrt(v); });
  // d(x^-½)/dx = -½·x^(-3/2) = -½·y³
  kernels::record_pointwise(
      "rsqrt", out, x, kernels::Saved::Output, [](auto gv, auto yv) { return decltype(yv)(-0.5) * gv * yv * yv * yv; },
      [](const Tensor& g, const Tensor& y) { return mul(mul(g, pow(y, 3.0)), -0.5); });
  return out;
}

Tensor erf(const Tensor& x) {
  Tensor out = kernels::map_floating(x, "erf", [](auto v) { return std::erf(v); });
  if (autograd::needs_grad({&x}))
    // d erf(x)/dx = (2/√π)·e^(-x²), from differentiable ops (any order)
    autograd::record("erf", out, {x}, [x](const Tensor& g, GradSink& gs) {
      constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
      gs.add(0, mul(g, mul(exp(neg(square(x))), kTwoOverSqrtPi)));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

Tensor abs(const Tensor& x) {
  Tensor out = kernels::map_floating(x, "abs", [](auto v) { return std::abs(v); });
  if (autograd::needs_grad({&x}))
    // d|x|/dx = sign(x), sign(0) = 0
    autograd::record("abs", out, {x}, [x](const Tensor& g, GradSink& gs) {
      auto backward = [&x](const Tensor& gv) {
        return kernels::map_floating_same(gv, x, "abs_backward", [](auto a, auto xv) {
          using T = decltype(xv);
          return xv > T(0) ? a : xv < T(0) ? -a : T(0);
        });
      };
      gs.add(0, kernels::piecewise_linear_grad(g, backward));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  kernels::check_floating(x, "clamp");
  if (!min && !max) throw std::invalid_argument("clamp: at least one of min and max must be given");
  const double lo = min ? *min : -INFINITY, hi = max ? *max : INFINITY;
  if (std::isnan(lo) || std::isnan(hi)) throw std::invalid_argument("clamp: a bound is NaN");
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "clamp", [&] {
    // NaN fails both comparisons and passes through; min > max gives max everywhere.
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    kernels::clamp_forward<scalar_t>(x.data<scalar_t>(), y.data<scalar_t>(), x.numel(), static_cast<scalar_t>(lo),
                                     static_cast<scalar_t>(hi));
    return y;
  });
  if (autograd::needs_grad({&x}))
    // d/dx = 1 inside [min, max] (inclusive), 0 outside
    autograd::record("clamp", out, {x}, [x, lo, hi](const Tensor& g, GradSink& gs) {
      auto backward = [&](const Tensor& gv) {
        return TAPEGRAD_DISPATCH_FLOAT(gv.dtype(), "clamp_backward", [&] {
          Tensor d = Tensor::empty(gv.shape(), gv.dtype());
          kernels::clamp_backward<scalar_t>(gv.data<scalar_t>(), x.data<scalar_t>(), d.data<scalar_t>(), gv.numel(),
                                            static_cast<scalar_t>(lo), static_cast<scalar_t>(hi));
          return d;
        });
      };
      gs.add(0, kernels::piecewise_linear_grad(g, backward));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

}  // namespace tapegrad
