// Activation ops: each forward is followed by its backward closure.
#include <tapegrad/core/ops/activation.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/kernels/pointwise.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/kernels.h>
#include <tapegrad/core/ops/unary.h>

namespace tapegrad {

Tensor sigmoid(const Tensor& x) {
  Tensor out = kernels::map_floating(x, "sigmoid", [](auto v) {
    // e^(-|v|) never overflows; both branches are the same function
    using T = decltype(v);
    if (v >= T(0)) return T(1) / (T(1) + std::exp(-v));
    const T e = std::exp(v);
    return e / (T(1) + e);
  });
  // dσ/dx = σ·(1 - σ)
  kernels::record_pointwise("sigmoid", out, x, kernels::Saved::Output,
                            [](auto gv, auto yv) { return gv * yv * (decltype(yv)(1) - yv); },
                            [](const Tensor& g, const Tensor& s) { return mul(g, mul(s, add(neg(s), 1.0))); });
  return out;
}

Tensor tanh(const Tensor& x) {
  Tensor out = kernels::map_floating(x, "tanh", [](auto v) { return std::tanh(v); });
  // d tanh/dx = 1 - tanh²
  kernels::record_pointwise("tanh", out, x, kernels::Saved::Output,
                            [](auto gv, auto yv) { return gv * (decltype(yv)(1) - yv * yv); },
                            [](const Tensor& g, const Tensor& y) { return mul(g, add(neg(square(y)), 1.0)); });
  return out;
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  kernels::check_floating(x, "leaky_relu");
  if (!std::isfinite(negative_slope))
    throw std::invalid_argument("leaky_relu: expected a finite negative_slope, got " + std::to_string(negative_slope));
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "leaky_relu", [&] {
    const scalar_t a = static_cast<scalar_t>(negative_slope);
    return kernels::map_unary<scalar_t>(x, [a](scalar_t v) { return v > scalar_t(0) ? v : v * a; });
  });
  if (autograd::needs_grad({&x}))
    // The input decides the branch (the output cannot when the slope is <= 0).
    autograd::record("leaky_relu", out, {x}, [x, negative_slope](const Tensor& g, GradSink& gs) {
      auto backward = [&](const Tensor& gv) {
        return TAPEGRAD_DISPATCH_FLOAT(gv.dtype(), "leaky_relu_backward", [&] {
          const scalar_t a = static_cast<scalar_t>(negative_slope);
          return kernels::map_binary_same<scalar_t>(
              gv, x, [a](scalar_t gw, scalar_t xv) { return xv > scalar_t(0) ? gw : gw * a; });
        });
      };
      gs.add(0, kernels::piecewise_linear_grad(g, backward));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

Tensor gelu(const Tensor& x, bool tanh_approximation) {
  kernels::check_floating(x, "gelu");
  constexpr double kInvSqrt2 = 0.70710678118654752440;
  constexpr double kInvSqrt2Pi = 0.39894228040143267794;
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  constexpr double kCubic = 0.044715;
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "gelu", [&] {
    if (tanh_approximation)
      return kernels::map_unary<scalar_t>(x, [](scalar_t v) {
        const double d = v;
        return static_cast<scalar_t>(0.5 * d * (1.0 + std::tanh(kSqrt2OverPi * (d + kCubic * d * d * d))));
      });
    return kernels::map_unary<scalar_t>(x, [](scalar_t v) {
      return static_cast<scalar_t>(0.5 * v * (1.0 + std::erf(v * kInvSqrt2)));
    });
  });
  if (autograd::needs_grad({&x}))
    autograd::record("gelu", out, {x}, [x, tanh_approximation](const Tensor& g, GradSink& gs) {
      if (autograd::creating_graph()) {  // the same derivative from differentiable ops
        if (tanh_approximation) {
          const Tensor x2 = square(x);
          const Tensor t = tanh(mul(add(x, mul(mul(x2, x), kCubic)), kSqrt2OverPi));
          const Tensor du = mul(add(mul(x2, 3.0 * kCubic), 1.0), kSqrt2OverPi);
          const Tensor d = add(mul(add(t, 1.0), 0.5), mul(mul(mul(x, add(neg(square(t)), 1.0)), du), 0.5));
          return gs.add(0, mul(g, d));
        }
        const Tensor cdf = mul(add(erf(mul(x, kInvSqrt2)), 1.0), 0.5);
        const Tensor pdf = mul(exp(mul(square(x), -0.5)), kInvSqrt2Pi);
        return gs.add(0, mul(g, add(cdf, mul(x, pdf))));
      }
      gs.add(0, TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "gelu_backward", [&] {
               if (tanh_approximation)
                 // ½(1 + t) + ½·x·(1 - t²)·du/dx with t = tanh(u), u = √(2/π)(x + 0.044715x³)
                 return kernels::map_binary_same<scalar_t>(g, x, [](scalar_t gv, scalar_t xv) {
                   const double v = xv;
                   const double t = std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
                   const double du = kSqrt2OverPi * (1.0 + 3.0 * kCubic * v * v);
                   return static_cast<scalar_t>(gv * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du));
                 });
               // d/dx x·Φ(x) = Φ(x) + x·φ(x)
               return kernels::map_binary_same<scalar_t>(g, x, [](scalar_t gv, scalar_t xv) {
                 const double v = xv;
                 const double cdf = 0.5 * (1.0 + std::erf(v * kInvSqrt2));
                 const double pdf = kInvSqrt2Pi * std::exp(-0.5 * v * v);
                 return static_cast<scalar_t>(gv * (cdf + v * pdf));
               });
             }));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

Tensor relu_clamp(const Tensor& x, double lo, double hi) {
  kernels::check_floating(x, "relu_clamp");
  if (std::isnan(lo) || std::isnan(hi) || lo > 0 || hi < 0)
    throw std::invalid_argument("relu_clamp: expected lo <= 0 <= hi, got lo=" + std::to_string(lo) +
                                ", hi=" + std::to_string(hi));
  // relu then clamp: relu's `x <= 0 ? 0 : x` (NaN passes), then clamp's `v > hi ? hi : v`
  // (its lower bound cannot bite: the relu's output is >= 0 >= lo, or NaN)
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "relu_clamp", [&] {
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    kernels::relu_clamp_forward<scalar_t>(x.data<scalar_t>(), y.data<scalar_t>(), x.numel(), static_cast<scalar_t>(hi));
    return y;
  });
  if (autograd::needs_grad({&x}))
    // clamp's mask (lo <= r <= hi, r = relu(x)) times relu's (x > 0): 0 < x <= hi; NaN fails both.
    autograd::record("relu_clamp", out, {x}, [x, hi](const Tensor& g, GradSink& gs) {
      auto backward = [&](const Tensor& gv) {
        return TAPEGRAD_DISPATCH_FLOAT(gv.dtype(), "relu_clamp_backward", [&] {
          Tensor d = Tensor::empty(gv.shape(), gv.dtype());
          kernels::relu_clamp_backward<scalar_t>(gv.data<scalar_t>(), x.data<scalar_t>(), d.data<scalar_t>(),
                                                 gv.numel(), static_cast<scalar_t>(hi));
          return d;
        });
      };
      gs.add(0, kernels::piecewise_linear_grad(g, backward));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

}  // namespace tapegrad
