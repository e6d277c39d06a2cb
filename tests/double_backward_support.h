#pragma once
// Helpers shared by the second- and third-order tests: a norm's inputs, the create_graph options,
// gradgradcheck with a message naming the case, and a third derivative by the tape against
// central differences.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <utility>
#include <string>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/core/gradcheck.h>

namespace tapegrad::test {

/// The inputs of a second-order check of a norm over 3 channels, float64, drawn from g in this
/// order: x of shape s in [-2, 2], a weight in [0.5, 1.5] and a bias in [-bias, bias] (leaves),
/// then a running mean in [-mean, mean] and a running variance in [0.5, 2].
struct NormInputs {
  Tensor x, w, b, rm, rv;
};
inline NormInputs norm_inputs(const Shape& s, Generator& g, double bias = 1.0, double mean = 1.0) {
  NormInputs in;
  in.x = uniform(s, -2, 2, Dtype::Float64, g).requires_grad_();
  in.w = uniform({3}, 0.5, 1.5, Dtype::Float64, g).requires_grad_();
  in.b = uniform({3}, -bias, bias, Dtype::Float64, g).requires_grad_();
  in.rm = uniform({3}, -mean, mean, Dtype::Float64, g);
  in.rv = uniform({3}, 0.5, 2, Dtype::Float64, g);
  return in;
}

/// GradOptions with create_graph set: the gradient is itself differentiable.
inline autograd::GradOptions create_graph() {
  autograd::GradOptions o;
  o.create_graph = true;
  return o;
}

/// gradgradcheck of fn over `inputs` must pass; a failure names the case (`what`) and the check's message.
inline void require_gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                  const std::vector<Tensor>& inputs, const std::string& what) {
  auto r = gradgradcheck(fn, inputs);
  INFO(what << ": " << r.message);
  REQUIRE(r.ok);
}

/// A third derivative of `op` at x0 along u and v, computed twice.
struct ThirdOrder {
  Tensor analytic;              ///< Σ u·d²h/dx² through the tape (create_graph twice)
  std::vector<double> numeric;  ///< the same by central differences of Σ u·dh/dx (step 1e-5)
};

/// With h(x) = Σ v·d(Σ op(x)·u)/dx, a second-order quantity, its gradient is a third derivative;
/// returns Σ u·d(dh/dx)/dx from the tape and from central differences along each coordinate of
/// x0 (float64, contiguous).
inline ThirdOrder third_order(const std::function<Tensor(const Tensor&)>& op, const Tensor& x0, const Tensor& u,
                              const Tensor& v) {
  auto h = [&](const Tensor& x, bool create) {
    Tensor g1 = autograd::grad({sum(mul(op(x), u))}, {x}, {}, create_graph())[0];
    autograd::GradOptions o;
    o.create_graph = create;
    return std::pair{sum(mul(g1, v)), o};
  };
  Tensor x = x0.clone().requires_grad_();
  auto [hx, o] = h(x, true);
  Tensor g2 = autograd::grad({hx}, {x}, {}, o)[0];  // dh/dx, with a graph
  ThirdOrder out{autograd::grad({sum(mul(g2, u))}, {x})[0], {}};
  const double step = 1e-5;
  out.numeric.resize(static_cast<std::size_t>(x0.numel()));
  for (std::int64_t i = 0; i < x0.numel(); ++i) {
    double f[2];
    for (int side = 0; side < 2; ++side) {
      Tensor xp = x0.clone();
      xp.data<double>()[i] += side ? step : -step;
      xp.requires_grad_();
      auto [hp, op_grad] = h(xp, false);
      f[side] = sum(mul(autograd::grad({hp}, {xp}, {}, op_grad)[0], u)).to_vector()[0];
    }
    out.numeric[static_cast<std::size_t>(i)] = (f[1] - f[0]) / (2 * step);
  }
  return out;
}

}  // namespace tapegrad::test
