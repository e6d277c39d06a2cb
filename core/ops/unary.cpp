// Element-wise math: each forward is followed by its backward closure.
#include <tapegrad/core/ops/unary.h>

#include <cmath>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/kernels/pointwise.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/kernels.h>

namespace tapegrad {
namespace {

// out[i] = f(g[i], s[i]) for the gradient g and a saved same-shape tensor s.
template <class F>
Tensor grad_map(const Tensor& g, const Tensor& s, const char* name, F f) {
  return TAPEGRAD_DISPATCH_FLOAT(g.dtype(), name, [&] { return kernels::map_binary_same<scalar_t>(g, s, f); });
}

}  // namespace

Tensor exp(const Tensor& x) {
  kernels::check_floating(x, "exp");
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "exp", [&] {
    return kernels::map_unary<scalar_t>(x, [](scalar_t v) { return std::exp(v); });
  });
  if (autograd::needs_grad({&x}))
    // d(eˣ)/dx = eˣ = y
    autograd::record("exp", out, {x}, [y = out.detach()](const Tensor& g, GradSink& gs) {
      if (autograd::creating_graph()) return gs.add(0, mul(g, gs.output(y)));
      gs.add(0, grad_map(g, y, "exp_backward", [](auto gv, auto yv) { return gv * yv; }));
    }, autograd::kSavesOutput | autograd::kSecondOrder);
  return out;
}

Tensor log(const Tensor& x) {
  kernels::check_floating(x, "log");
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "log", [&] {
    return kernels::map_unary<scalar_t>(x, [](scalar_t v) { return std::log(v); });
  });
  if (autograd::needs_grad({&x}))
    // d(log x)/dx = 1/x
    autograd::record("log", out, {x}, [x](const Tensor& g, GradSink& gs) {
      if (autograd::creating_graph()) return gs.add(0, div(g, x));
      gs.add(0, grad_map(g, x, "log_backward", [](auto gv, auto xv) { return gv / xv; }));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

Tensor sqrt(const Tensor& x) {
  kernels::check_floating(x, "sqrt");
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "sqrt", [&] {
    return kernels::map_unary<scalar_t>(x, [](scalar_t v) { return std::sqrt(v); });
  });
  if (autograd::needs_grad({&x}))
    // d(√x)/dx = 1/(2√x) = 1/(2y)
    autograd::record("sqrt", out, {x}, [y = out.detach()](const Tensor& g, GradSink& gs) {
      if (autograd::creating_graph()) return gs.add(0, div(g, mul(gs.output(y), 2.0)));
      gs.add(0, grad_map(g, y, "sqrt_backward", [](auto gv, auto yv) { return gv / (yv + yv); }));
    }, autograd::kSavesOutput | autograd::kSecondOrder);
  return out;
}

Tensor rsqrt(const Tensor& x) {
  kernels::check_floating(x, "rsqrt");
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "rsqrt", [&] {
    return kernels::map_unary<scalar_t>(x, [](scalar_t v) { return scalar_t(1) / std::sqrt(v); });
  });
  if (autograd::needs_grad({&x}))
    // d(x^-½)/dx = -½·x^(-3/2) = -½·y³
    autograd::record("rsqrt", out, {x}, [y = out.detach()](const Tensor& g, GradSink& gs) {
      if (autograd::creating_graph()) return gs.add(0, mul(mul(g, pow(gs.output(y), 3.0)), -0.5));
      gs.add(0, grad_map(g, y, "rsqrt_backward", [](auto gv, auto yv) {
               using T = decltype(yv);
               return T(-0.5) * gv * yv * yv * yv;
             }));
    }, autograd::kSavesOutput | autograd::kSecondOrder);
  return out;
}

Tensor erf(const Tensor& x) {
  kernels::check_floating(x, "erf");
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "erf", [&] {
    return kernels::map_unary<scalar_t>(x, [](scalar_t v) { return std::erf(v); });
  });
  if (autograd::needs_grad({&x}))
    // d erf(x)/dx = (2/√π)·e^(-x²), from differentiable ops (any order)
    autograd::record("erf", out, {x}, [x](const Tensor& g, GradSink& gs) {
      constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
      gs.add(0, mul(g, mul(exp(neg(square(x))), kTwoOverSqrtPi)));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

Tensor abs(const Tensor& x) {
  kernels::check_floating(x, "abs");
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "abs", [&] {
    return kernels::map_unary<scalar_t>(x, [](scalar_t v) { return std::abs(v); });
  });
  if (autograd::needs_grad({&x}))
    // d|x|/dx = sign(x), sign(0) = 0
    autograd::record("abs", out, {x}, [x](const Tensor& g, GradSink& gs) {
      auto backward = [&x](const Tensor& gv) {
        return grad_map(gv, x, "abs_backward", [](auto a, auto xv) {
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
