// softmax, log_softmax and logsumexp: each forward is followed by its backward closure.
// x is viewed as (outer, C, inner) with C the reduced axis; every (outer, inner) pair is
// one independent row of C values, inner apart in memory.
#include <tapegrad/core/ops/softmax.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/kernels.h>
#include <tapegrad/core/ops/reduce.h>
#include <tapegrad/core/ops/shape_ops.h>
#include <tapegrad/core/ops/unary.h>

namespace tapegrad {
namespace {

struct Rows {
  std::int64_t outer = 1, C = 1, inner = 1;
  std::int64_t dim = 0;
  bool scalar = true;  // x is 0-d
  std::int64_t count() const { return outer * inner; }
  // offset of element 0 of row k
  std::int64_t base(std::int64_t k) const { return (k / inner) * C * inner + k % inner; }
  // the axes a row spans, for the reductions of the differentiable backward
  std::vector<std::int64_t> axes() const { return scalar ? std::vector<std::int64_t>{} : std::vector{dim}; }
};

Rows rows_of(const Tensor& x, std::int64_t dim_in, const char* op) {
  kernels::check_floating(x, op);
  Rows r;
  try {
    r.dim = wrap_axis(dim_in, x.dim());
  } catch (const std::out_of_range& e) {
    throw std::out_of_range(std::string(op) + ": " + e.what() + ", input shape " + shape_str(x.shape()));
  }
  const Shape& s = x.shape();
  if (s.empty()) return r;
  r.scalar = false;
  for (std::int64_t d = 0; d < r.dim; ++d) r.outer *= s[d];
  r.C = s[r.dim];
  for (std::size_t d = r.dim + 1; d < s.size(); ++d) r.inner *= s[d];
  return r;
}

// Shift of row k: its max m, or 0 when m is ±inf (inf - inf would be NaN).
template <class T>
T row_shift(const T* x, const Rows& r, std::int64_t k) {
  const T* p = x + r.base(k);
  T m = -std::numeric_limits<T>::infinity();
  for (std::int64_t c = 0; c < r.C; ++c)
    if (p[c * r.inner] > m) m = p[c * r.inner];
  return std::isinf(m) ? T(0) : m;
}

// log Σ exp(x - m) over row k, the sum accumulated in double; a NaN in the row gives NaN.
template <class T>
double row_log_sum_exp(const T* x, const Rows& r, std::int64_t k, T m) {
  const T* p = x + r.base(k);
  double s = 0;
  for (std::int64_t c = 0; c < r.C; ++c) s += std::exp(p[c * r.inner] - m);
  return std::log(s);
}

template <class T, class F>
void for_rows(const Rows& r, F f) {
  parallel_for(r.count(), kParallelGrain / (r.C > 0 ? r.C : 1) + 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t k = b; k < e; ++k) f(k);
  });
}

enum class Kind { Softmax, LogSoftmax };

template <Kind K>
Tensor softmax_values(const Tensor& x, const Rows& r) {
  return TAPEGRAD_DISPATCH_FLOAT(x.dtype(), K == Kind::Softmax ? "softmax" : "log_softmax", [&] {
    Tensor out = Tensor::empty(x.shape(), x.dtype());
    const scalar_t* px = x.data<scalar_t>();
    scalar_t* po = out.data<scalar_t>();
    for_rows<scalar_t>(r, [&](std::int64_t k) {
      const std::int64_t b = r.base(k);
      const scalar_t m = row_shift(px, r, k);
      if constexpr (K == Kind::Softmax) {
        // one exp per element: store exp(x - m), then scale by 1/Σ
        double s = 0;
        for (std::int64_t c = 0; c < r.C; ++c) {
          const std::int64_t i = b + c * r.inner;
          po[i] = std::exp(px[i] - m);
          s += po[i];
        }
        const scalar_t inv = static_cast<scalar_t>(1.0 / s);
        for (std::int64_t c = 0; c < r.C; ++c) po[b + c * r.inner] *= inv;
      } else {
        // (x - m) - log Σ exp(x - m): exact at any magnitude, where x - (m + log Σ) would round
        const scalar_t log_s = static_cast<scalar_t>(row_log_sum_exp(px, r, k, m));
        for (std::int64_t c = 0; c < r.C; ++c) {
          const std::int64_t i = b + c * r.inner;
          po[i] = (px[i] - m) - log_s;
        }
      }
    });
    return out;
  });
}

// The first-order backward of a row-wise op: per row, a = Σ_c dot(g_c, y_c), then
// dx_c = f(g_c, y_c, a), y the op's output.
template <class Dot, class F>
Tensor row_backward(const Tensor& g, const Tensor& y, const Rows& r, const char* name, Dot dot, F f) {
  return TAPEGRAD_DISPATCH_FLOAT(g.dtype(), name, [&] {
    Tensor o = Tensor::empty(g.shape(), g.dtype());
    const scalar_t *pg = g.data<scalar_t>(), *py = y.data<scalar_t>();
    scalar_t* po = o.data<scalar_t>();
    for_rows<scalar_t>(r, [&](std::int64_t k) {
      const std::int64_t b = r.base(k);
      scalar_t a = 0;
      for (std::int64_t c = 0; c < r.C; ++c) a += dot(pg[b + c * r.inner], py[b + c * r.inner]);
      for (std::int64_t c = 0; c < r.C; ++c) {
        const std::int64_t i = b + c * r.inner;
        po[i] = f(pg[i], py[i], a);
      }
    });
    return o;
  });
}

// softmax or log_softmax along dim, with its backward; y is the op's output.
template <Kind K>
Tensor softmax_op(const Tensor& x, std::int64_t dim) {
  constexpr bool kSoftmax = K == Kind::Softmax;
  const Rows r = rows_of(x, dim, kSoftmax ? "softmax" : "log_softmax");
  Tensor out = softmax_values<K>(x, r);
  if (autograd::needs_grad({&x}))
    autograd::record(kSoftmax ? "softmax" : "log_softmax", out, {x}, [y = out.detach(), r](const Tensor& g,
                                                                                           GradSink& gs) {
      if constexpr (kSoftmax) {
        // dx_c = y_c·(g_c - Σⱼ gⱼyⱼ)
        if (autograd::creating_graph()) {
          const Tensor s = gs.output(y);
          return gs.add(0, mul(s, sub(g, sum(mul(g, s), r.axes(), true))));
        }
        gs.add(0, row_backward(g, y, r, "softmax_backward", [](auto gv, auto yv) { return gv * yv; },
                               [](auto gv, auto yv, auto dot) { return yv * (gv - dot); }));
      } else {
        // dx_c = g_c - softmax_c·Σⱼ gⱼ, softmax = exp(y)
        if (autograd::creating_graph()) {
          const Tensor s = exp(gs.output(y));
          return gs.add(0, sub(g, mul(s, sum(g, r.axes(), true))));
        }
        gs.add(0, row_backward(g, y, r, "log_softmax_backward", [](auto gv, auto) { return gv; },
                               [](auto gv, auto yv, auto gsum) { return gv - std::exp(yv) * gsum; }));
      }
    }, autograd::kSavesOutput | autograd::kSecondOrder);
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t dim) { return softmax_op<Kind::Softmax>(x, dim); }

Tensor log_softmax(const Tensor& x, std::int64_t dim) { return softmax_op<Kind::LogSoftmax>(x, dim); }

Tensor logsumexp(const Tensor& x, std::int64_t dim, bool keepdim) {
  const Rows r = rows_of(x, dim, "logsumexp");
  Shape os = x.shape();
  if (!os.empty()) {
    os[r.dim] = 1;
    if (!keepdim) os.erase(os.begin() + r.dim);
  }
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "logsumexp", [&] {
    Tensor o = Tensor::empty(os, x.dtype());
    const scalar_t* px = x.data<scalar_t>();
    scalar_t* po = o.data<scalar_t>();
    for_rows<scalar_t>(r, [&](std::int64_t k) {
      const scalar_t m = row_shift(px, r, k);
      po[k] = static_cast<scalar_t>(static_cast<double>(m) + row_log_sum_exp(px, r, k, m));
    });
    return o;
  });
  if (autograd::needs_grad({&x}))
    autograd::record("logsumexp", out, {x}, [x, y = out.detach(), r](const Tensor& g, GradSink& gs) {
      // dx_c = g·exp(x_c - lse)
      if (autograd::creating_graph()) {
        Shape kept = x.shape();
        if (!kept.empty()) kept[static_cast<std::size_t>(r.dim)] = 1;
        return gs.add(0, mul(reshape(g, kept), exp(sub(x, reshape(gs.output(y), kept)))));
      }
      Tensor gi = TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "logsumexp_backward", [&] {
        Tensor o = Tensor::empty(x.shape(), x.dtype());
        const scalar_t *pg = g.data<scalar_t>(), *px = x.data<scalar_t>(), *py = y.data<scalar_t>();
        scalar_t* po = o.data<scalar_t>();
        for_rows<scalar_t>(r, [&](std::int64_t k) {
          const std::int64_t b = r.base(k);
          for (std::int64_t c = 0; c < r.C; ++c) po[b + c * r.inner] = pg[k] * std::exp(px[b + c * r.inner] - py[k]);
        });
        return o;
      });
      gs.add(0, std::move(gi));
    }, autograd::kSavesInputs | autograd::kSavesOutput | autograd::kSecondOrder);
  return out;
}

}  // namespace tapegrad
