// Fused batch-norm forward and backward over x viewed as (N, C, S).
//
// Memory passes (the cost at large sizes): the forward reads x once for the statistics
// (blocks of rows stay in cache for the exact second pass around the block mean; blocks
// are merged with Chan et al.'s parallel-variance update) and once more to write y; the
// backward reads x and dy once for its two reductions and once more to write dx. Outputs
// too large for the cache are written with streaming stores, so they cost no extra read.
// The (N, C) case (S = 1) runs the kernels of kernels/batch_norm_nc.cpp; this file keeps the
// argument checks, the running statistics, the tape node and the S > 1 loops.
#include <tapegrad/layers/functional/batch_norm.h>


#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/layers/functional/empty_input.h>
#include <tapegrad/layers/functional/kernels/batch_norm_nc.h>
#include <tapegrad/layers/functional/kernels/moments.h>
#include <tapegrad/layers/functional/kernels/simd.h>
#include <tapegrad/layers/functional/kernels/thresholds.h>

namespace tapegrad::layers::functional {
namespace {

struct Dims {
  std::int64_t N, C, S;
};

Dims dims_of(const Tensor& x) {
  std::int64_t S = 1;
  for (std::int64_t d = 2; d < x.dim(); ++d) S *= x.size(d);
  return {x.size(0), x.size(1), S};
}

// Per-thread reusable buffers for the per-channel temporaries (kernels::scratch), one tag a use.
struct ThreadStatsTag {};
struct SumPartsTag {};
struct SumsTag {};
struct ChannelTTag {};
struct VarTag {};

// Runs body(t, nt) on nt threads (no parallel region when nt == 1).
template <class F>
void run_threads(int nt, F&& body) {
  if (nt <= 1) {
    body(0, 1);
    return;
  }
#pragma omp parallel num_threads(nt)
  body(omp_get_thread_num_wrapper(), omp_get_num_threads_wrapper());
}

// Writes a row computed by f(out, begin, len) into dst[0, len): directly, or through an
// L1 buffer and streaming stores when `stream`.
template <class T, class F>
void write_row_maybe_streamed(T* dst, std::int64_t len, bool stream, F&& f) {
  if (!stream) {
    f(dst, 0, len);
    return;
  }
  constexpr std::int64_t kChunk = kernels::thresholds::kBnStreamBufferElems;
  alignas(64) T buf[kChunk];
  for (std::int64_t b = 0; b < len; b += kChunk) {
    const std::int64_t n = std::min(kChunk, len - b);
    f(buf, b, n);
    kernels::stream_copy(dst + b, buf, static_cast<std::size_t>(n) * sizeof(T));
  }
}

// Sums over rows in kSumLanes fixed lanes: element i of a row goes to lane i mod kSumLanes,
// and the lanes are added in order at the end. Independent accumulators (one vector) instead
// of one serial chain of additions; the order is still fixed by the source, the same on every
// run and at every thread count.
constexpr int kSumLanes = 8;
template <class T, class F>
inline void lane_sums(const T* __restrict r, std::int64_t len, double* __restrict acc, F f) {
  std::int64_t i = 0;
  for (; i + kSumLanes <= len; i += kSumLanes)
    for (int l = 0; l < kSumLanes; ++l) acc[l] += f(r[i + l]);
  for (int l = 0; i < len; ++i, ++l) acc[l] += f(r[i]);
}
inline double fold_lanes(const double* acc) {
  double s = 0;
  for (int l = 0; l < kSumLanes; ++l) s += acc[l];
  return s;
}

// Statistics of channels [c0, c1) of a (N, C, S) tensor (S > 1), in blocks of rows of S.
template <class T>
void moments_channels(const T* x, Dims d, std::int64_t c0, std::int64_t c1, kernels::PartialMoments& p) {
  const std::int64_t G = kernels::thresholds::bn_spatial_block_rows(d.S);  // rows per statistics block
  for (std::int64_t c = c0; c < c1; ++c) {
    kernels::PartialMoments pc{0, p.mean + c, p.m2 + c};
    for (std::int64_t b = 0; b < d.N; b += G) {
      const std::int64_t e = std::min(b + G, d.N), nb = (e - b) * d.S;
      double sl[kSumLanes] = {}, ql[kSumLanes] = {};
      for (std::int64_t n = b; n < e; ++n) lane_sums(x + (n * d.C + c) * d.S, d.S, sl, [](T v) { return double(v); });
      const double bmean = fold_lanes(sl) / static_cast<double>(nb);
      for (std::int64_t n = b; n < e; ++n)
        lane_sums(x + (n * d.C + c) * d.S, d.S, ql, [bmean](T v) {
          const double u = v - bmean;
          return u * u;
        });
      double q = fold_lanes(ql);
      kernels::merge_moments(pc, 1, nb, &bmean, &q);
    }
  }
}

// Per-channel mean and biased variance of x viewed as (N, C, S), in double.
template <class T>
void moments(const T* x, Dims d, double* mean, double* var) {
  const std::size_t C = static_cast<std::size_t>(d.C);
  if (d.S == 1) {
    kernels::bn_rows_moments<T>(x, d.N, d.C, mean, var);
    return;
  }
  // channel shares: each channel lives in exactly one thread's result
  const int nt = kernels::threads_for(d.N * d.C * d.S);
  std::vector<kernels::PartialMoments> parts(static_cast<std::size_t>(nt));
  double* stats = kernels::scratch<ThreadStatsTag, double>(2 * C * static_cast<std::size_t>(nt));
  std::fill(stats, stats + 2 * C * static_cast<std::size_t>(nt), 0.0);
  for (std::size_t t = 0; t < parts.size(); ++t) {
    parts[t].mean = stats + 2 * C * t;
    parts[t].m2 = parts[t].mean + C;
  }
  run_threads(nt, [&](int t, int n_t) {
    moments_channels<T>(x, d, d.C * t / n_t, d.C * (t + 1) / n_t, parts[static_cast<std::size_t>(t)]);
  });
  const double m = static_cast<double>(d.N * d.S);
  for (int t = 0; t < nt; ++t)
    for (std::int64_t c = d.C * t / nt; c < d.C * (t + 1) / nt; ++c) {
      mean[c] = parts[static_cast<std::size_t>(t)].mean[c];
      var[c] = parts[static_cast<std::size_t>(t)].m2[c] / m;
    }
}

// s1[c] = Σ dy, s2[c] = Σ dy·(x - μ_c) over (n, s), in double, for S > 1 (channel shares).
template <class T>
void backward_sums(const T* x, const T* g, Dims d, const double* mu, double* s1, double* s2) {
  const std::int64_t C = d.C;
  const int nt = kernels::threads_for(d.N * d.C * d.S);
  double* part = kernels::scratch<SumPartsTag, double>(static_cast<std::size_t>(2 * C * nt));
  std::fill(part, part + 2 * C * nt, 0.0);
  run_threads(nt, [&](int t, int n_t) {
    double* p1 = part + 2 * C * t;
    double* p2 = p1 + C;
    for (std::int64_t c = C * t / n_t, e = C * (t + 1) / n_t; c < e; ++c) {
      double l1[kSumLanes] = {}, l2[kSumLanes] = {};
      const double m = mu[c];
      const std::int64_t S = d.S;
      for (std::int64_t n = 0; n < d.N; ++n) {
        const T* __restrict xr = x + (n * C + c) * S;
        const T* __restrict gr = g + (n * C + c) * S;
        lane_sums(gr, S, l1, [](T v) { return double(v); });
        std::int64_t s = 0;  // Σ (x - μ)·dy in the same lanes as lane_sums
        for (; s + kSumLanes <= S; s += kSumLanes)
          for (int l = 0; l < kSumLanes; ++l) l2[l] += (xr[s + l] - m) * static_cast<double>(gr[s + l]);
        for (int l = 0; s < S; ++s, ++l) l2[l] += (xr[s] - m) * static_cast<double>(gr[s]);
      }
      p1[c] = fold_lanes(l1);
      p2[c] = fold_lanes(l2);
    }
  });
  for (std::int64_t c = 0; c < C; ++c) s1[c] = s2[c] = 0.0;
  for (int t = 0; t < nt; ++t)
    for (std::int64_t c = 0; c < C; ++c) {
      s1[c] += part[2 * C * t + c];
      s2[c] += part[2 * C * t + C + c];
    }
}

// out = (x - mu[c])·a[c] + b[c], or, for the backward, out = k1[c]·(g - k2[c] - (x - mu[c])·k3[c]):
// the one element-wise pass, split over rows.
template <class T, class F>
void channel_pass(Dims d, T* out, F f) {
  const bool stream = static_cast<std::size_t>(d.N * d.C * d.S) * sizeof(T) >= kernels::thresholds::kStreamBytes;
  const std::int64_t rows = d.S == 1 ? d.N : d.N * d.C, len = d.S == 1 ? d.C : d.S;
  const int nt = kernels::threads_for(rows * len);
  run_threads(nt, [&](int t, int n_t) {
    for (std::int64_t r = rows * t / n_t, e = rows * (t + 1) / n_t; r < e; ++r)
      write_row_maybe_streamed(out + r * len, len, stream, [&](T* o, std::int64_t b, std::int64_t n) { f(o, r, b, n); });
    if (stream) kernels::fence();
  });
}

template <class T>
Tensor forward_impl(const Tensor& x, Dims d, const double* mean, const double* rstd,
                    const Tensor& weight, const Tensor& bias) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  // y = (x - μ)·(γ·rstd) + β: centring first keeps float32 exact for constant channels
  T* scale = kernels::scratch<ChannelTTag, T>(static_cast<std::size_t>(3 * d.C));
  T* shift = scale + d.C;
  T* mu = shift + d.C;
  const T* w = weight.defined() ? weight.data<T>() : nullptr;
  const T* bb = bias.defined() ? bias.data<T>() : nullptr;
  for (std::int64_t c = 0; c < d.C; ++c) {
    const double g = w ? static_cast<double>(w[c]) : 1.0;
    scale[c] = static_cast<T>(g * rstd[c]);
    shift[c] = bb ? bb[c] : T(0);
    mu[c] = static_cast<T>(mean[c]);
  }
  const T* xp = x.data<T>();
  const T *a = scale, *b = shift, *u = mu;
  if (d.S == 1) {
    kernels::bn_rows_affine<T>(xp, out.data<T>(), d.N, d.C, u, a, b);
  } else {
    channel_pass<T>(d, out.data<T>(), [&](T* o, std::int64_t r, std::int64_t s0, std::int64_t n) {
      const std::int64_t c = r % d.C;
      const T ac = a[c], bc = b[c], uc = u[c];
      const T* xr = xp + r * d.S + s0;
      for (std::int64_t i = 0; i < n; ++i) o[i] = (xr[i] - uc) * ac + bc;
    });
  }
  return out;
}

// Backward. With x̂ = (x - μ)·rstd, dx̂ = γ·dy and m values per channel:
//   term 1 (direct path):        γ·rstd·dy
//   term 2 (through the mean):  -γ·rstd·mean(dy)
//   term 3 (through the var):   -γ·rstd·x̂·mean(dy·x̂) = -γ·rstd·(x - μ)·rstd²·Σ(dy·(x - μ))/m
// so dx = k1·(dy - k2 - (x - μ)·k3) with k1 = γ·rstd, k2 = Σdy/m, k3 = rstd²·Σdy(x - μ)/m
// in train mode, and k2 = k3 = 0 in eval mode (the statistics are constants).
//   dγ = Σ dy·x̂ = rstd·Σ dy·(x - μ),  dβ = Σ dy.
template <class T>
void backward_impl(const Tensor& g, const T* xp, Dims d, const double* mean, const double* rstd, const T* w,
                   bool train, GradSink& gs) {
  const T* gp = g.data<T>();
  const bool need_sums = (train && gs.needs(0)) || gs.needs(1) || gs.needs(2);
  double* sum_dy = kernels::scratch<SumsTag, double>(static_cast<std::size_t>(2 * d.C));
  double* sum_dy_xc = sum_dy + d.C;
  T* k1 = kernels::scratch<ChannelTTag, T>(static_cast<std::size_t>(4 * d.C));
  T* k2 = k1 + d.C;
  T* k3 = k2 + d.C;
  T* mu = k3 + d.C;
  for (std::int64_t c = 0; c < d.C; ++c) mu[c] = static_cast<T>(mean[c]);
  std::fill(sum_dy, sum_dy + 2 * d.C, 0.0);
  if (need_sums) {
    if (d.S == 1)
      kernels::bn_rows_sums<T>(xp, gp, d.N, d.C, mu, sum_dy, sum_dy_xc);
    else
      backward_sums<T>(xp, gp, d, mean, sum_dy, sum_dy_xc);
  }
  const double m = static_cast<double>(d.N * d.S);
  if (gs.needs(0)) {
    for (std::int64_t c = 0; c < d.C; ++c) {
      const double gamma = w ? static_cast<double>(w[c]) : 1.0;
      k1[c] = static_cast<T>(gamma * rstd[c]);
      k2[c] = static_cast<T>(train ? sum_dy[c] / m : 0.0);
      k3[c] = static_cast<T>(train ? rstd[c] * rstd[c] * sum_dy_xc[c] / m : 0.0);
    }
    Tensor gx = Tensor::empty(g.shape(), g.dtype());  // dy has x's shape and dtype
    const T *a = k1, *b = k2, *k = k3, *u = mu;
    if (d.S == 1) {
      kernels::bn_rows_dx<T>(xp, gp, gx.data<T>(), d.N, d.C, u, a, b, k);
    } else {
      channel_pass<T>(d, gx.data<T>(), [&](T* o, std::int64_t r, std::int64_t s0, std::int64_t n) {
        const std::int64_t c = r % d.C;
        const T ac = a[c], bc = b[c], kc = k[c], uc = u[c];
        const T* xr = xp + r * d.S + s0;
        const T* gr = gp + r * d.S + s0;
        for (std::int64_t i = 0; i < n; ++i) o[i] = ac * (gr[i] - bc - (xr[i] - uc) * kc);
      });
    }
    gs.add(0, std::move(gx));
  }
  if (gs.needs(1)) {  // dγ = Σ dy·x̂
    Tensor gw = Tensor::empty({d.C}, g.dtype());
    T* o = gw.data<T>();
    for (std::int64_t c = 0; c < d.C; ++c) o[c] = static_cast<T>(rstd[c] * sum_dy_xc[c]);
    gs.add(1, std::move(gw));
  }
  if (gs.needs(2)) {  // dβ = Σ dy
    Tensor gb = Tensor::empty({d.C}, g.dtype());
    T* o = gb.data<T>();
    for (std::int64_t c = 0; c < d.C; ++c) o[c] = static_cast<T>(sum_dy[c]);
    gs.add(2, std::move(gb));
  }
}

void check_channel_tensor(const Tensor& t, const char* what, const Tensor& x, std::int64_t C) {
  if (!t.defined()) return;
  if (t.dim() != 1 || t.size(0) != C)  // compared without building a Shape (no allocation per call)
    throw std::invalid_argument(std::string("batch_norm: expected ") + what + " of shape [" + std::to_string(C) +
                                "] for input of shape " + shape_str(x.shape()) + ", got " + shape_str(t.shape()));
  if (t.dtype() != x.dtype())
    throw std::invalid_argument(std::string("batch_norm: ") + what + " has dtype " + dtype_name(t.dtype()) +
                                " but the input is " + dtype_name(x.dtype()));
}

}  // namespace

void batch_moments(const Tensor& x, Tensor& mean_out, Tensor& var_out) {
  if (x.dim() < 2) throw std::invalid_argument("batch_moments: expected (N, C, *), got " + shape_str(x.shape()));
  const Dims d = dims_of(x);
  std::vector<double> mean, var;
  if (d.N * d.S == 0) {
    mean.assign(static_cast<std::size_t>(d.C), std::nan(""));
    var = mean;
  } else {
    mean.resize(static_cast<std::size_t>(d.C));
    var.resize(static_cast<std::size_t>(d.C));
    TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "batch_moments",
                            [&] { moments<scalar_t>(x.data<scalar_t>(), d, mean.data(), var.data()); });
  }
  mean_out = Tensor::from_vector(mean, {d.C}, Dtype::Float64);
  var_out = Tensor::from_vector(var, {d.C}, Dtype::Float64);
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps, bool unbiased_running_var) {
  if (!x.defined() || x.dim() < 2)
    throw std::invalid_argument("batch_norm: expected input of shape (N, C, *), got " +
                                (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor")));
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(std::string("batch_norm: expected a float input, got ") + dtype_name(x.dtype()));
  const Dims d = dims_of(x);
  check_channel_tensor(weight, "weight", x, d.C);
  check_channel_tensor(bias, "bias", x, d.C);
  check_channel_tensor(running_mean, "running_mean", x, d.C);
  check_channel_tensor(running_var, "running_var", x, d.C);
  if (running_mean.defined() != running_var.defined())
    throw std::invalid_argument("batch_norm: running_mean and running_var must both be given or both be omitted");
  if (!training && !running_mean.defined())
    throw std::invalid_argument("batch_norm: eval mode (training=false) needs running_mean and running_var");
  if (!(eps >= 0 && std::isfinite(eps)))
    throw std::invalid_argument("batch_norm: eps must be >= 0 and finite, got " + std::to_string(eps));
  if (training && running_mean.defined() && !(momentum >= 0.0 && momentum <= 1.0))
    throw std::invalid_argument("batch_norm: momentum must be in [0, 1] (PyTorch convention; a Keras decay of 0.99 "
                                "is momentum 0.01), got " + std::to_string(momentum));
  const std::int64_t m = d.N * d.S;
  if (training && m <= 1)
    throw std::invalid_argument("batch_norm: expected more than 1 value per channel when training, got input of shape " +
                                shape_str(x.shape()) + " (" + std::to_string(m) +
                                " value per channel); use eval() for single-sample inference");
  if (x.numel() == 0) return detail::empty_norm_output(x, weight, bias, "batch_norm");  // eval on an empty batch
  // mean (C values) then rstd (C values): what the backward keeps
  std::vector<double> stats(static_cast<std::size_t>(2 * d.C));
  double* mean = stats.data();
  double* rstd = mean + d.C;
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "batch_norm", [&] {
    const scalar_t* xp = x.data<scalar_t>();
    if (training) {
      double* var = kernels::scratch<VarTag, double>(static_cast<std::size_t>(d.C));
      moments<scalar_t>(xp, d, mean, var);
      // A constant channel with eps = 0 has σ² + eps = 0: like PyTorch, use rstd = 0 (output β,
      // zero gradients) instead of dividing by zero.
      kernels::inverse_std(var, eps, rstd, d.C);
      if (running_mean.defined()) {
        running_mean.impl()->storage->bump_version();  // in-place writes: a graph that saved them notices
        running_var.impl()->storage->bump_version();
        scalar_t* rm = running_mean.data<scalar_t>();
        scalar_t* rv = running_var.data<scalar_t>();
        const double unbias = unbiased_running_var ? static_cast<double>(m) / static_cast<double>(m - 1) : 1.0;
        for (std::int64_t c = 0; c < d.C; ++c) {
          rm[c] = static_cast<scalar_t>((1.0 - momentum) * rm[c] + momentum * mean[c]);
          rv[c] = static_cast<scalar_t>((1.0 - momentum) * rv[c] + momentum * var[c] * unbias);
        }
      }
    } else {
      const scalar_t* rm = running_mean.data<scalar_t>();
      const scalar_t* rv = running_var.data<scalar_t>();
      for (std::int64_t c = 0; c < d.C; ++c) {
        mean[c] = rm[c];
        rstd[c] = 1.0 / std::sqrt(static_cast<double>(rv[c]) + eps);
      }
    }
    return forward_impl<scalar_t>(x, d, mean, rstd, weight, bias);
  });
  if (autograd::needs_grad({&x, &weight, &bias})) {
    autograd::record("batch_norm", out, {x, weight, bias},
                     [xs = SavedData(x), ws = SavedData(weight), d, stats = std::move(stats),
                      training](const Tensor& g, GradSink& gs) {
                       TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "batch_norm_backward", [&] {
                         backward_impl<scalar_t>(g, xs.data<scalar_t>(), d, stats.data(), stats.data() + d.C,
                                                 ws.data<scalar_t>(), training, gs);
                       });
                     });
  }
  return out;
}

}  // namespace tapegrad::layers::functional
