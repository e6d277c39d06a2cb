// The fused per-group normalisation tape node (forward, then backward) that LayerNorm,
// GroupNorm and InstanceNorm share; rows of one group with S = 1, G = 1 (LayerNorm) run the
// vectorised kernels of kernels/cpu/layer_norm_rows.cpp.
#include <tapegrad/layers/functional/grouped_norm.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/layers/functional/empty_input.h>
#include <tapegrad/layers/functional/grouped_norm_double_backward.h>
#include <tapegrad/layers/functional/kernels/layer_norm_rows.h>
#include <tapegrad/layers/functional/kernels/simd.h>

namespace tapegrad::layers::functional {
namespace detail {
namespace {

// x is (R, K); row r covers affine channels (r mod G)·Cg .. +Cg, each for S positions.
struct Rows {
  std::int64_t R, K, G, Cg, S, C;
};

// Σ x and Σ (x - mu)² over n values in double; `omp simd` lets the sums vectorise.
template <class T>
double row_sum(const T* x, std::int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t j = 0; j < n; ++j) s += static_cast<double>(x[j]);
  return s;
}
template <class T>
double row_centered_sumsq(const T* x, std::int64_t n, double mu) {
  double q = 0;
#pragma omp simd reduction(+ : q)
  for (std::int64_t j = 0; j < n; ++j) {
    const double v = static_cast<double>(x[j]) - mu;
    q += v * v;
  }
  return q;
}

// Forward: per row, μ and σ² (two passes in double), then y = (x - μ)·rstd·γ + β.
template <class T>
void forward_rows(const T* x, T* y, const T* w, const T* b, const Rows& d, double eps, double* mean, double* rstd,
                  double* var) {
  parallel_for(d.R, parallel_rows_grain(d.K),
               [&](std::int64_t rb, std::int64_t re) {
                 for (std::int64_t r = rb; r < re; ++r) {
                   const T* xr = x + r * d.K;
                   T* yr = y + r * d.K;
                   const double mu = row_sum(xr, d.K) / static_cast<double>(d.K);
                   // second pass around the mean: no cancellation, exact for constant rows
                   const double v2 = row_centered_sumsq(xr, d.K, mu) / static_cast<double>(d.K);
                   const double rs = 1.0 / std::sqrt(v2 + eps);
                   mean[r] = mu;
                   rstd[r] = rs;
                   var[r] = v2;
                   const std::int64_t c0 = (r % d.G) * d.Cg;
                   if (d.S == 1) {  // one affine channel per value (LayerNorm): a flat loop
                     const T* wr = w ? w + c0 : nullptr;
                     const T* br = b ? b + c0 : nullptr;
#pragma omp simd
                     for (std::int64_t j = 0; j < d.K; ++j) {
                       const double a = wr ? rs * static_cast<double>(wr[j]) : rs;
                       const double o = br ? static_cast<double>(br[j]) : 0.0;
                       yr[j] = static_cast<T>((static_cast<double>(xr[j]) - mu) * a + o);
                     }
                     continue;
                   }
                   for (std::int64_t cc = 0; cc < d.Cg; ++cc) {
                     const double a = w ? static_cast<double>(w[c0 + cc]) * rs : rs;
                     const double bb = b ? static_cast<double>(b[c0 + cc]) : 0.0;
                     const T* xs = xr + cc * d.S;
                     T* ys = yr + cc * d.S;
#pragma omp simd
                     for (std::int64_t s2 = 0; s2 < d.S; ++s2)
                       ys[s2] = static_cast<T>((static_cast<double>(xs[s2]) - mu) * a + bb);
                   }
                 }
               });
}

// Backward over rows [rb, re): writes gx (when non-null) and adds Σdy·x̂, Σdy per channel
// into dw, db (length C).
template <class T>
void backward_rows(const T* g, const T* x, T* gx, const T* w, const Rows& d, const double* mean, const double* rstd,
                   std::int64_t rb, std::int64_t re, double* dw, double* db) {
  const double K = static_cast<double>(d.K);
  for (std::int64_t r = rb; r < re; ++r) {
    const T* xr = x + r * d.K;
    const T* gr = g + r * d.K;
    const double mu = mean[r], rs = rstd[r];
    const std::int64_t c0 = (r % d.G) * d.Cg;
    // pass 1: the row's sums Σdx̂ and Σdx̂·x̂ with dx̂ = γ·dy, and the per-channel dγ, dβ
    double sum_dxh = 0, sum_dxh_xh = 0;
    if (d.S == 1) {  // LayerNorm: γ per value
      const T* wr = w ? w + c0 : nullptr;
      double* dwr = dw + c0;
      double* dbr = db + c0;
#pragma omp simd reduction(+ : sum_dxh, sum_dxh_xh)
      for (std::int64_t j = 0; j < d.K; ++j) {
        const double dy = gr[j];
        const double xh = (static_cast<double>(xr[j]) - mu) * rs;
        const double gamma = wr ? static_cast<double>(wr[j]) : 1.0;
        sum_dxh += gamma * dy;
        sum_dxh_xh += gamma * dy * xh;
        dwr[j] += dy * xh;
        dbr[j] += dy;
      }
    } else {
      for (std::int64_t cc = 0; cc < d.Cg; ++cc) {
        const double gamma = w ? static_cast<double>(w[c0 + cc]) : 1.0;
        const T* xs = xr + cc * d.S;
        const T* gsr = gr + cc * d.S;
        double sdy = 0, sdy_xh = 0;
#pragma omp simd reduction(+ : sdy, sdy_xh)
        for (std::int64_t s = 0; s < d.S; ++s) {
          const double dy = gsr[s];
          sdy += dy;
          sdy_xh += dy * ((static_cast<double>(xs[s]) - mu) * rs);
        }
        sum_dxh += gamma * sdy;
        sum_dxh_xh += gamma * sdy_xh;
        dw[c0 + cc] += sdy_xh;
        db[c0 + cc] += sdy;
      }
    }
    if (!gx) continue;
    // pass 2: dx = rstd·(dx̂ - mean(dx̂) - x̂·mean(dx̂·x̂))
    const double m1 = sum_dxh / K;     // term 2: through the mean μ
    const double m2 = sum_dxh_xh / K;  // term 3: through the variance σ²
    T* o = gx + r * d.K;
    if (d.S == 1) {
      const T* wr = w ? w + c0 : nullptr;
#pragma omp simd
      for (std::int64_t j = 0; j < d.K; ++j) {
        const double xh = (static_cast<double>(xr[j]) - mu) * rs;
        const double dxh = (wr ? static_cast<double>(wr[j]) : 1.0) * gr[j];  // term 1: the direct path
        o[j] = static_cast<T>(rs * (dxh - m1 - xh * m2));
      }
      continue;
    }
    for (std::int64_t cc = 0; cc < d.Cg; ++cc) {
      const double gamma = w ? static_cast<double>(w[c0 + cc]) : 1.0;
      const T* xs = xr + cc * d.S;
      const T* gsr = gr + cc * d.S;
      T* os = o + cc * d.S;
#pragma omp simd
      for (std::int64_t s = 0; s < d.S; ++s) {
        const double xh = (static_cast<double>(xs[s]) - mu) * rs;
        const double dxh = gamma * gsr[s];  // term 1: the direct path
        os[s] = static_cast<T>(rs * (dxh - m1 - xh * m2));
      }
    }
  }
}

template <class T>
void backward_impl(const Tensor& g, const T* xp, const T* wp, const TensorImpl* wi, const TensorImpl* bi,
                   const Rows& d, const double* mean, const double* rstd, GradSink& gs) {
  const T* gp = g.data<T>();
  Tensor gx;
  if (gs.needs(0)) gx = Tensor::empty(g.shape(), g.dtype());  // dy has x's shape and dtype
  T* gxp = gx.defined() ? gx.data<T>() : nullptr;
  const bool need_w = gs.needs(1), need_b = gs.needs(2);
  // sums[c] = Σ dy·x̂ (dγ), sums[C + c] = Σ dy (dβ), in double
  thread_local std::vector<double> sums;
  sums.assign(static_cast<std::size_t>(2 * d.C), 0.0);
  if (d.S == 1) {  // LayerNorm (and GroupNorm on (N, C)): the per-row kernel
    kernels::ln_rows<T>().backward(gp, xp, gxp, d.R, d.K, d.G, wp, mean, rstd, sums.data(), sums.data() + d.C);
  } else {
    // Fixed row chunks per thread and an ordered merge: the result does not depend on timing.
    const int nt =
        d.R * d.K >= kParallelGrain ? std::max(1, std::min<int>(get_num_threads(), static_cast<int>(d.R))) : 1;
    std::vector<double> part(static_cast<std::size_t>(2 * d.C * nt), 0.0);
    parallel_shares(nt, [&](int t) {
      const std::int64_t rb = d.R * t / nt, re = d.R * (t + 1) / nt;
      double* pw = part.data() + 2 * d.C * t;
      backward_rows<T>(gp, xp, gxp, wp, d, mean, rstd, rb, re, pw, pw + d.C);
    });
    for (int t = 0; t < nt; ++t)
      for (std::int64_t c = 0; c < 2 * d.C; ++c) sums[static_cast<std::size_t>(c)] += part[2 * d.C * t + c];
  }
  if (gx.defined()) gs.add(0, std::move(gx));
  if (need_w) {  // dγ = Σ dy·x̂
    Tensor gw = Tensor::empty(wi->shape, g.dtype());
    T* o = gw.data<T>();
    for (std::int64_t c = 0; c < d.C; ++c) o[c] = static_cast<T>(sums[static_cast<std::size_t>(c)]);
    gs.add(1, std::move(gw));
  }
  if (need_b) {  // dβ = Σ dy
    Tensor gb = Tensor::empty(bi->shape, g.dtype());
    T* o = gb.data<T>();
    for (std::int64_t c = 0; c < d.C; ++c) o[c] = static_cast<T>(sums[static_cast<std::size_t>(d.C + c)]);
    gs.add(2, std::move(gb));
  }
}

void check_affine(const Tensor& t, const char* what, const Tensor& x, std::int64_t C, const char* op) {
  if (!t.defined()) return;
  if (t.numel() != C)
    throw std::invalid_argument(std::string(op) + ": expected " + what + " with " + std::to_string(C) +
                                " values for input of shape " + shape_str(x.shape()) + ", got " + what +
                                " of shape " + shape_str(t.shape()));
  if (t.dtype() != x.dtype())
    throw std::invalid_argument(std::string(op) + ": " + what + " has dtype " + dtype_name(t.dtype()) +
                                " but the input is " + dtype_name(x.dtype()));
}

}  // namespace

Tensor grouped_norm(const Tensor& x, std::int64_t C, std::int64_t S, std::int64_t G, const Tensor& weight,
                    const Tensor& bias, double eps, const char* op, std::vector<double>* group_mean,
                    std::vector<double>* group_var) {
  if (!x.defined()) throw std::invalid_argument(std::string(op) + ": the input is undefined");
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(std::string(op) + ": expected a float32 or float64 input, got " +
                                dtype_name(x.dtype()));
  if (!(eps >= 0 && std::isfinite(eps)))
    throw std::invalid_argument(std::string(op) + ": eps must be >= 0 and finite, got " + std::to_string(eps));
  if (C > 0 && G > 0 && C % G == 0 && S >= 0 && x.numel() == 0) {  // an empty batch or spatial size
    check_affine(weight, "weight", x, C, op);
    check_affine(bias, "bias", x, C, op);
    if (group_mean) group_mean->clear();
    if (group_var) group_var->clear();
    return empty_norm_output(x, weight, bias, op);
  }
  if (C <= 0 || S <= 0 || G <= 0 || C % G != 0 || x.numel() % (C * S) != 0)
    throw std::invalid_argument(std::string(op) + ": cannot split input of shape " + shape_str(x.shape()) + " into " +
                                std::to_string(G) + " groups of " + std::to_string(C) + " channels x " +
                                std::to_string(S) + " positions");
  if (!(eps >= 0)) throw std::invalid_argument(std::string(op) + ": eps must be >= 0, got " + std::to_string(eps));
  check_affine(weight, "weight", x, C, op);
  check_affine(bias, "bias", x, C, op);
  const Rows d{x.numel() / (C * S) * G, C * S / G, G, C / G, S, C};
  // per row: mean (R values) then rstd (R values), what the backward keeps
  std::vector<double> stats(static_cast<std::size_t>(2 * d.R)), var;
  double* mean = stats.data();
  double* rstd = mean + d.R;
  if (d.S != 1 || group_var) var.resize(static_cast<std::size_t>(d.R));
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  TAPEGRAD_DISPATCH_FLOAT(x.dtype(), op, [&] {
    const scalar_t* wp = weight.defined() ? weight.data<scalar_t>() : nullptr;
    const scalar_t* bp = bias.defined() ? bias.data<scalar_t>() : nullptr;
    if (d.S == 1)  // LayerNorm (and GroupNorm on (N, C)): the per-row kernel
      kernels::ln_rows<scalar_t>().forward(x.data<scalar_t>(), out.data<scalar_t>(), d.R, d.K, d.G, wp, bp, eps, mean,
                                           rstd, group_var ? var.data() : nullptr);
    else
      forward_rows<scalar_t>(x.data<scalar_t>(), out.data<scalar_t>(), wp, bp, d, eps, mean, rstd, var.data());
  });
  if (group_mean) group_mean->assign(mean, mean + d.R);
  if (group_var) *group_var = std::move(var);
  if (autograd::needs_grad({&x, &weight, &bias})) {
    autograd::record(op, out, {x, weight, bias},
                     // x's and γ's values without detach()'s shape copies; the parameters' metadata
                     // for the shapes of dγ and dβ; x and γ themselves for a create_graph pass
                     [xs = SavedData(x), ws = SavedData(weight), wi = weight.impl(), bi = bias.impl(), d,
                      stats = std::move(stats), op, x, weight, eps](const Tensor& g, GradSink& gs) {
                       if (autograd::creating_graph()) {  // the differentiable backward, statistics from x
                         grouped_norm_backward_differentiable(g, x, weight, bi ? bi->shape : Shape{}, d.C, d.S, d.G,
                                                              eps, stats.data() + d.R, gs, op);
                         return;
                       }
                       TAPEGRAD_DISPATCH_FLOAT(g.dtype(), op, [&] {
                         backward_impl<scalar_t>(g, xs.data<scalar_t>(), ws.data<scalar_t>(), wi.get(), bi.get(), d,
                                                 stats.data(), stats.data() + d.R, gs);
                       });
                     },
                     autograd::kSavesInputs | autograd::kSecondOrder);
  }
  return out;
}

}  // namespace detail
}  // namespace tapegrad::layers::functional
