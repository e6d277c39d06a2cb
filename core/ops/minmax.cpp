// Comparisons and arg-reductions: each forward is followed by its backward closure.
#include <tapegrad/core/ops/minmax.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/kernels.h>
#include <tapegrad/core/ops/reduce.h>
#include <tapegrad/core/ops/shape_ops.h>

namespace tapegrad {
namespace {

// ---- maximum / minimum ------------------------------------------------------------

// Gradient of maximum (IsMax) or minimum for input `which` (0 = a, 1 = b), in the
// output's shape: g where that input won, g/2 on a tie, 0 where it lost. NaN makes
// both comparisons false, so both inputs get g (as PyTorch's formula does).
template <bool IsMax>
Tensor pick_grad(const Tensor& g, const Tensor& a, const Tensor& b, int which) {
  return TAPEGRAD_DISPATCH_FLOAT(g.dtype(), IsMax ? "maximum_backward" : "minimum_backward", [&] {
    Tensor out = Tensor::empty(g.shape(), g.dtype());
    const scalar_t* pg = g.data<scalar_t>();
    const scalar_t* pa = a.data<scalar_t>();
    const scalar_t* pb = b.data<scalar_t>();
    scalar_t* po = out.data<scalar_t>();
    parallel_for(g.numel(), kParallelGrain, [&](std::int64_t s, std::int64_t e) {
      for (std::int64_t i = s; i < e; ++i) {
        const scalar_t self = which == 0 ? pa[i] : pb[i], other = which == 0 ? pb[i] : pa[i];
        const bool lost = IsMax ? self < other : self > other;
        po[i] = self == other ? pg[i] * scalar_t(0.5) : lost ? scalar_t(0) : pg[i];
      }
    });
    return out;
  });
}

template <bool IsMax>
Tensor binary_extreme(const Tensor& a, const Tensor& b) {
  const char* op = IsMax ? "maximum" : "minimum";
  kernels::check_floating_pair(a, b, op);
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(a.dtype(), op, [&] {
    return kernels::broadcast_binary<scalar_t>(a, b, op, [](scalar_t x, scalar_t y) {
      const bool take_x = IsMax ? x > y : x < y;
      return (take_x || std::isnan(x)) ? x : y;
    });
  });
  if (autograd::needs_grad({&a, &b})) {
    autograd::record(op, out, {a, b}, [a = a.detach(), b = b.detach()](const Tensor& g, GradSink& gs) {
      // expand both inputs to the output's shape, pick, then sum back over broadcast dims
      const Tensor ae = broadcast_to(a, g.shape()), be = broadcast_to(b, g.shape());
      if (autograd::creating_graph()) {  // g times the constant routing masks, recorded
        const Tensor ones = Tensor::ones(g.shape(), g.dtype());
        if (gs.needs(0)) gs.add(0, sum_to(mul(g, pick_grad<IsMax>(ones, ae, be, 0)), a.shape()));
        if (gs.needs(1)) gs.add(1, sum_to(mul(g, pick_grad<IsMax>(ones, ae, be, 1)), b.shape()));
        return;
      }
      if (gs.needs(0)) gs.add(0, sum_to(pick_grad<IsMax>(g, ae, be, 0), a.shape()));
      if (gs.needs(1)) gs.add(1, sum_to(pick_grad<IsMax>(g, ae, be, 1), b.shape()));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  }
  return out;
}

// ---- arg-reductions over one axis -----------------------------------------------------

struct AxisView {
  std::int64_t outer = 1, R = 1, inner = 1;
  Shape kept, out;  // kept: dim set to 1; out: kept or with dim removed
};

AxisView axis_view(const Tensor& x, std::int64_t dim_in, bool keepdim, const char* op) {
  const std::int64_t rank = x.dim();
  std::int64_t dim;
  try {
    dim = wrap_axis(dim_in, rank);
  } catch (const std::out_of_range& e) {
    throw std::out_of_range(std::string(op) + ": " + e.what() + ", input shape " + shape_str(x.shape()));
  }
  AxisView v;
  const Shape& s = x.shape();
  if (rank == 0) return v;  // a scalar reduces to itself (as in PyTorch)
  for (std::int64_t d = 0; d < dim; ++d) v.outer *= s[d];
  v.R = s[dim];
  for (std::int64_t d = dim + 1; d < rank; ++d) v.inner *= s[d];
  if (v.R == 0)
    throw std::invalid_argument(std::string(op) + ": cannot reduce dimension " + std::to_string(dim) +
                                " of size 0 (input shape " + shape_str(s) + ")");
  v.kept = s;
  v.kept[dim] = 1;
  v.out = v.kept;
  if (!keepdim) v.out.erase(v.out.begin() + dim);
  return v;
}

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  return false;
}

// idx[o, i] = first r maximising (IsMax) or minimising x[o, r, i]; NaN wins.
template <class T, bool IsMax>
void arg_extreme(const T* x, std::int64_t* idx, const AxisView& v) {
  parallel_for(v.outer * v.inner, kParallelGrain / (v.R > 0 ? v.R : 1) + 1, [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t k = s; k < e; ++k) {
      const std::int64_t o = k / v.inner, i = k % v.inner;
      const T* p = x + o * v.R * v.inner + i;
      std::int64_t best = 0;
      T bv = p[0];
      if (!is_nan(bv))
        for (std::int64_t r = 1; r < v.R; ++r) {
          const T c = p[r * v.inner];
          if (is_nan(c)) {
            best = r;
            break;
          }
          if (IsMax ? c > bv : c < bv) {
            bv = c;
            best = r;
          }
        }
      idx[k] = best;
    }
  });
}

template <bool IsMax>
Tensor arg_indices(const Tensor& x, const AxisView& v) {
  Tensor idx = Tensor::empty(v.out, Dtype::Int64);
  std::int64_t* pi = idx.data<std::int64_t>();
  switch (x.dtype()) {
    case Dtype::Float32: arg_extreme<float, IsMax>(x.data<float>(), pi, v); break;
    case Dtype::Float64: arg_extreme<double, IsMax>(x.data<double>(), pi, v); break;
    case Dtype::Int64: arg_extreme<std::int64_t, IsMax>(x.data<std::int64_t>(), pi, v); break;
  }
  return idx;
}

template <bool IsMax>
Tensor arg_op(const Tensor& x, std::int64_t dim, bool keepdim) {
  const char* op = IsMax ? "argmax" : "argmin";
  if (!x.defined()) throw std::invalid_argument(std::string(op) + ": the input tensor is undefined");
  return arg_indices<IsMax>(x, axis_view(x, dim, keepdim, op));
}

template <bool IsMax>
Tensor value_op(const Tensor& x, std::int64_t dim, bool keepdim) {
  const char* op = IsMax ? "max" : "min";
  kernels::check_floating(x, op);
  const AxisView v = axis_view(x, dim, keepdim, op);
  Tensor idx = arg_indices<IsMax>(x, v);
  // values[o, i] = x[o, idx[o, i], i]
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), op, [&] {
    Tensor r = Tensor::empty(v.out, x.dtype());
    const scalar_t* px = x.data<scalar_t>();
    const std::int64_t* pi = idx.data<std::int64_t>();
    scalar_t* pr = r.data<scalar_t>();
    for (std::int64_t k = 0, n = v.outer * v.inner; k < n; ++k)
      pr[k] = px[(k / v.inner) * v.R * v.inner + pi[k] * v.inner + k % v.inner];
    return r;
  });
  if (autograd::needs_grad({&x}))
    // d out[o, i] / d x[o, r, i] = 1 at r = idx[o, i] only: scatter g there.
    autograd::record(op, out, {x}, [idx, v, xs = x.shape()](const Tensor& g, GradSink& gs) {
      auto scatter = [&](const Tensor& gv) {
        Tensor gi = Tensor::zeros(xs, gv.dtype());
        TAPEGRAD_DISPATCH_FLOAT(gv.dtype(), "max_backward", [&] {
          const scalar_t* pg = gv.data<scalar_t>();
          const std::int64_t* pi = idx.data<std::int64_t>();
          scalar_t* po = gi.data<scalar_t>();
          for (std::int64_t k = 0, n = v.outer * v.inner; k < n; ++k)
            po[(k / v.inner) * v.R * v.inner + pi[k] * v.inner + k % v.inner] += pg[k];
        });
        return gi;
      };
      if (autograd::creating_graph()) {  // g spread over the axis times the constant one-hot of the winners
        const Tensor one_hot = scatter(Tensor::ones(g.shape(), g.dtype()));
        return gs.add(0, mul(broadcast_to(reshape(g, v.kept), xs), one_hot));
      }
      gs.add(0, scatter(g));
    }, autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return binary_extreme<true>(a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary_extreme<false>(a, b); }

Tensor max(const Tensor& x, std::int64_t dim, bool keepdim) { return value_op<true>(x, dim, keepdim); }
Tensor min(const Tensor& x, std::int64_t dim, bool keepdim) { return value_op<false>(x, dim, keepdim); }

Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim) { return arg_op<true>(x, dim, keepdim); }
Tensor argmin(const Tensor& x, std::int64_t dim, bool keepdim) { return arg_op<false>(x, dim, keepdim); }

Tensor argmax(const Tensor& x) {
  if (!x.defined()) throw std::invalid_argument("argmax: the input tensor is undefined");
  return arg_op<true>(alias_with_shape(x, {x.numel()}), 0, false);
}
Tensor argmin(const Tensor& x) {
  if (!x.defined()) throw std::invalid_argument("argmin: the input tensor is undefined");
  return arg_op<false>(alias_with_shape(x, {x.numel()}), 0, false);
}

}  // namespace tapegrad
