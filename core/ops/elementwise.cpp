// Element-wise ops: each forward is followed by its backward closure.
#include <tapegrad/core/ops/elementwise.h>

#include <cmath>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/kernels/pointwise.h>
#include <tapegrad/core/ops/kernels.h>
#include <tapegrad/core/ops/reduce.h>

namespace tapegrad {
namespace {
// a op b for float operands of one dtype (checked, naming `name`): same shapes and a scalar
// b through the per-ISA loops (core/kernels/pointwise.h), other broadcasts through
// kernels::broadcast_binary with f (the same operation, called on the element type).
template <class F>
Tensor binary(const Tensor& a, const Tensor& b, kernels::BinaryOp op, const char* name, F f) {
  kernels::check_floating_pair(a, b, name);
  return TAPEGRAD_DISPATCH_FLOAT(a.dtype(), name, [&] {
    using T = scalar_t;
    if (a.shape() == b.shape() || (b.numel() == 1 && b.dim() <= a.dim())) {  // then the output has a's shape
      Tensor out = Tensor::empty(a.shape(), a.dtype());
      if (a.shape() == b.shape())
        kernels::binary_same<T>(op, a.data<T>(), b.data<T>(), out.data<T>(), a.numel());
      else
        kernels::binary_scalar<T>(op, a.data<T>(), b.data<T>()[0], out.data<T>(), a.numel());
      return out;
    }
    return kernels::broadcast_binary<T>(a, b, name, f);
  });
}

// a op s for a float a (checked, naming `name`) and a scalar s, through the per-ISA loops.
Tensor binary(const Tensor& a, double s, kernels::BinaryOp op, const char* name) {
  kernels::check_floating(a, name);
  return TAPEGRAD_DISPATCH_FLOAT(a.dtype(), name, [&] {
    Tensor out = Tensor::empty(a.shape(), a.dtype());
    kernels::binary_scalar<scalar_t>(op, a.data<scalar_t>(), static_cast<scalar_t>(s), out.data<scalar_t>(), a.numel());
    return out;
  });
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary(a, b, kernels::BinaryOp::Add, "add", [](auto x, auto y) { return x + y; });
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("add", out, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g, GradSink& gs) {
      if (gs.needs(0)) gs.add(0, sum_to(g, sa));
      if (gs.needs(1)) gs.add(1, sum_to(g, sb));
    }, autograd::kSavesNothing | autograd::kSecondOrder);
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary(a, b, kernels::BinaryOp::Sub, "sub", [](auto x, auto y) { return x - y; });
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("sub", out, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g, GradSink& gs) {
      if (gs.needs(0)) gs.add(0, sum_to(g, sa));
      if (gs.needs(1)) gs.add(1, sum_to(neg(g), sb));
    }, autograd::kSavesNothing | autograd::kSecondOrder);
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary(a, b, kernels::BinaryOp::Mul, "mul", [](auto x, auto y) { return x * y; });
  if (autograd::needs_grad({&a, &b})) {
    // d(ab)/da = b, d(ab)/db = a
    autograd::record("mul", out, {a, b}, [a, b](const Tensor& g, GradSink& gs) {
      if (gs.needs(0)) gs.add(0, sum_to(mul(g, b), a.shape()));
      if (gs.needs(1)) gs.add(1, sum_to(mul(g, a), b.shape()));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary(a, b, kernels::BinaryOp::Div, "div", [](auto x, auto y) { return x / y; });
  if (autograd::needs_grad({&a, &b})) {
    // d(a/b)/da = 1/b, d(a/b)/db = -a/b²
    autograd::record("div", out, {a, b}, [a, b](const Tensor& g, GradSink& gs) {
      if (gs.needs(0)) gs.add(0, sum_to(div(g, b), a.shape()));
      if (gs.needs(1)) gs.add(1, sum_to(neg(div(mul(g, a), square(b))), b.shape()));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  }
  return out;
}

Tensor add(const Tensor& a, double s) {
  Tensor out = binary(a, s, kernels::BinaryOp::Add, "add");
  if (autograd::needs_grad({&a}))
    autograd::record("add_scalar", out, {a}, [](const Tensor& g, GradSink& gs) { gs.add(0, g); }, autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}

Tensor mul(const Tensor& a, double s) {
  Tensor out = binary(a, s, kernels::BinaryOp::Mul, "mul");
  if (autograd::needs_grad({&a}))
    autograd::record("mul_scalar", out, {a}, [s](const Tensor& g, GradSink& gs) { gs.add(0, mul(g, s)); }, autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}

Tensor neg(const Tensor& a) { return mul(a, -1.0); }

Tensor square(const Tensor& a) {
  kernels::check_floating(a, "square");
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(a.dtype(), "square", [&] {
    return kernels::map_unary<scalar_t>(a, [](scalar_t x) { return x * x; });
  });
  if (autograd::needs_grad({&a}))
    autograd::record("square", out, {a}, [a](const Tensor& g, GradSink& gs) {
      gs.add(0, mul(mul(g, a), 2.0));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

Tensor pow(const Tensor& a, double p) {
  kernels::check_floating(a, "pow");
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(a.dtype(), "pow", [&] {
    const scalar_t e = static_cast<scalar_t>(p);
    return kernels::map_unary<scalar_t>(a, [e](scalar_t x) { return std::pow(x, e); });
  });
  if (autograd::needs_grad({&a}))
    autograd::record("pow", out, {a}, [a, p](const Tensor& g, GradSink& gs) {
      // d(a^p)/da = p·a^(p-1); p = 0 gives 0 everywhere (also at a = 0)
      if (p == 0.0) {
        gs.add(0, Tensor::zeros(a.shape(), a.dtype()));
        return;
      }
      gs.add(0, mul(mul(g, pow(a, p - 1.0)), p));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

Tensor relu(const Tensor& a) {
  kernels::check_floating(a, "relu");
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(a.dtype(), "relu", [&] {
    // NaN stays NaN (as in PyTorch): `x <= 0` is false for NaN, so it passes through
    Tensor y = Tensor::empty(a.shape(), a.dtype());
    kernels::relu_forward<scalar_t>(a.data<scalar_t>(), y.data<scalar_t>(), a.numel());
    return y;
  });
  if (autograd::needs_grad({&a}))
    // The mask is a > 0; holding the input (not the output) makes no cycle and no copy.
    autograd::record("relu", out, {a}, [a](const Tensor& g, GradSink& gs) {
      auto masked = [&a](const Tensor& gv) {  // PyTorch's threshold_backward
        return TAPEGRAD_DISPATCH_FLOAT(gv.dtype(), "relu_backward", [&] {
          Tensor d = Tensor::empty(gv.shape(), gv.dtype());
          kernels::relu_backward<scalar_t>(gv.data<scalar_t>(), a.data<scalar_t>(), d.data<scalar_t>(), gv.numel());
          return d;
        });
      };
      // create_graph: g times the constant mask 1[a > 0], recorded (differentiable in g; zero in a)
      gs.add(0, autograd::creating_graph() ? mul(g, masked(Tensor::ones(g.shape(), g.dtype()))) : masked(g));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

}  // namespace tapegrad
