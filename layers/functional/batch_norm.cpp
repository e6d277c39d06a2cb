// Fused batch-norm forward and backward over x viewed as (N, C, S).
//
// Memory passes (the cost at large sizes): the forward reads x once for the statistics
// (blocks of rows stay in cache for the exact second pass around the block mean; blocks
// are merged with Chan et al.'s parallel-variance update) and once more to write y; the
// backward reads x and dy once for its two reductions and once more to write dx. Outputs
// too large for the cache are written with streaming stores, so they cost no extra read.
// The (N, C) case (S = 1) runs the kernels of kernels/batch_norm_nc.h, the S > 1 case those
// of kernels/batch_norm_ncs.h (both compiled per ISA level, kernels/cpu/); this file keeps
// the split among threads and the tape node; the argument checks are in
// batch_norm_checks.cpp, and the running statistics are updated by RunningStats
// (running_stats.cpp).
#include <tapegrad/layers/functional/batch_norm.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/activation.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/kernels/pointwise.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/layers/functional/batch_norm_double_backward.h>
#include <tapegrad/layers/functional/empty_input.h>
#include <tapegrad/layers/functional/kernels/batch_norm_checks.h>
#include <tapegrad/layers/functional/kernels/batch_norm_nc.h>
#include <tapegrad/layers/functional/kernels/batch_norm_ncs.h>
#include <tapegrad/layers/functional/kernels/moments.h>
#include <tapegrad/layers/functional/kernels/simd.h>
#include <tapegrad/layers/functional/kernels/thresholds.h>

namespace tapegrad::layers::functional {
namespace {

using Dims = detail::BnDims;
using detail::bn_dims_of;

// Per-thread reusable buffers for the per-channel temporaries (kernels::scratch), one tag a use.
struct ThreadStatsTag {};
struct SumPartsTag {};
struct SumsTag {};
struct ChannelTTag {};
struct VarTag {};

// Runs body(t, nt) for every share t of nt (no parallel region when nt == 1): each share
// runs once even on a smaller team, so the nt partial results are all written.
template <class F>
void run_threads(int nt, F&& body) {
  parallel_shares(nt, [&](int t) { body(t, nt); });
}

// Per-channel mean and biased variance of x viewed as (N, C, S), in double.
template <class T>
void moments(const T* x, Dims d, double* mean, double* var) {
  const std::size_t C = static_cast<std::size_t>(d.C);
  if (d.S == 1) {
    kernels::bn_rows_forward<T>().moments(x, d.N, d.C, mean, var);
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
    const auto& p = parts[static_cast<std::size_t>(t)];
    kernels::bn_ncs<T>().moments(x, d.N, d.C, d.S, d.C * t / n_t, d.C * (t + 1) / n_t, p.mean, p.m2);
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
    kernels::bn_ncs<T>().sums(x, g, d.N, C, d.S, mu, C * t / n_t, C * (t + 1) / n_t, p1, p1 + C);
  });
  for (std::int64_t c = 0; c < C; ++c) s1[c] = s2[c] = 0.0;
  for (int t = 0; t < nt; ++t)
    for (std::int64_t c = 0; c < C; ++c) {
      s1[c] += part[2 * C * t + c];
      s2[c] += part[2 * C * t + C + c];
    }
}

// Runs pass(r0, r1, stream) over the rows [r0, r1) of each thread's share of the N·C rows
// (S > 1): the one element-wise pass, y = (x - mu[c])·a[c] + b[c] or the backward's dx.
template <class T, class F>
void channel_pass(Dims d, F pass) {
  const bool stream = static_cast<std::size_t>(d.N * d.C * d.S) * sizeof(T) >= kernels::thresholds::kStreamBytes;
  const std::int64_t rows = d.N * d.C;
  const int nt = kernels::threads_for(rows * d.S);
  run_threads(nt, [&](int t, int n_t) { pass(rows * t / n_t, rows * (t + 1) / n_t, stream); });
}

// The normalised output; with act (kernels::kBnAct*) set and S = 1, the activation's output,
// computed in the same pass (`pre` then receives the normalised value, the activation's
// input, which its backward mask reads).
template <class T>
Tensor forward_impl(const Tensor& x, Dims d, const double* mean, const double* rstd,
                    const Tensor& weight, const Tensor& bias, int act = kernels::kBnActNone, double hi = 0,
                    Tensor* pre = nullptr) {
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
  if (d.S == 1 && act != kernels::kBnActNone) {
    *pre = Tensor::empty(x.shape(), x.dtype());
    kernels::bn_rows_forward<T>().affine_act(xp, out.data<T>(), pre->data<T>(), d.N, d.C, u, a, b, act,
                                             static_cast<T>(hi));
  } else if (d.S == 1) {
    kernels::bn_rows_forward<T>().affine(xp, out.data<T>(), d.N, d.C, u, a, b);
  } else {
    T* yp = out.data<T>();
    channel_pass<T>(d, [&](std::int64_t r0, std::int64_t r1, bool stream) {
      kernels::bn_ncs<T>().affine(xp, yp, d.C, d.S, r0, r1, u, a, b, stream);
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
// m is the count the statistics were taken over (N·S, or the global count of
// batch_norm_with_stats), and reduce (when set) turns this input's sums into the whole
// batch's before dx; dγ and dβ take this input's own sums.
// `mask` (S = 1 only): g is the gradient of the activation kernels::kBnAct* `act` fused after
// the normalisation, masked here by its backward from `mask` (see BnRowsBackwardKernels::sums_masked).
template <class T>
void backward_impl(const Tensor& g, const T* xp, Dims d, const double* mean, const double* rstd, const T* w,
                   bool train, double m, const std::function<void(double*, std::int64_t)>* reduce, GradSink& gs,
                   const T* mask = nullptr, int act = kernels::kBnActNone, T hi = T(0)) {
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
  const bool rows = d.N * d.S > 0;
  if (need_sums && rows) {
    if (d.S == 1 && mask)
      kernels::bn_rows_backward<T>().sums_masked(xp, gp, mask, d.N, d.C, mu, sum_dy, sum_dy_xc, act, hi);
    else if (d.S == 1)
      kernels::bn_rows_backward<T>().sums(xp, gp, d.N, d.C, mu, sum_dy, sum_dy_xc);
    else
      backward_sums<T>(xp, gp, d, mean, sum_dy, sum_dy_xc);
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
  if (!gs.needs(0)) return;
  if (train && reduce && *reduce) (*reduce)(sum_dy, 2 * d.C);
  for (std::int64_t c = 0; c < d.C; ++c) {
    const double gamma = w ? static_cast<double>(w[c]) : 1.0;
    k1[c] = static_cast<T>(gamma * rstd[c]);
    k2[c] = static_cast<T>(train ? sum_dy[c] / m : 0.0);
    k3[c] = static_cast<T>(train ? rstd[c] * rstd[c] * sum_dy_xc[c] / m : 0.0);
  }
  Tensor gx = Tensor::empty(g.shape(), g.dtype());  // dy has x's shape and dtype
  const T *a = k1, *b = k2, *k = k3, *u = mu;
  if (!rows) {
  } else if (d.S == 1 && mask) {
    kernels::bn_rows_backward<T>().dx_masked(xp, gp, mask, gx.data<T>(), d.N, d.C, u, a, b, k, act, hi);
  } else if (d.S == 1) {
    kernels::bn_rows_backward<T>().dx(xp, gp, gx.data<T>(), d.N, d.C, u, a, b, k);
  } else {
    T* dxp = gx.data<T>();
    channel_pass<T>(d, [&](std::int64_t r0, std::int64_t r1, bool stream) {
      kernels::bn_ncs<T>().dx(xp, gp, dxp, d.C, d.S, r0, r1, u, a, b, k, stream);
    });
  }
  gs.add(0, std::move(gx));
}

// Records the backward of a train- or eval-mode normalisation of x with the statistics
// stats = [mean (C), rstd (C)] taken over m values per channel. `given`: the statistics came
// from elsewhere (batch_norm_with_stats), so a create_graph backward cannot recompute them
// from x and refuses (std::logic_error naming `who`).
void record_backward(Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, Dims d,
                     std::vector<double> stats, bool training, double m,
                     std::function<void(double*, std::int64_t)> reduce, double eps, bool given = false,
                     std::string who = "batch_norm", std::function<Tensor(const Tensor&)> across = {}) {
  if (!autograd::needs_grad({&x, &weight, &bias})) return;
  autograd::record("batch_norm", out, {x, weight, bias},
                   [xs = SavedData(x), ws = SavedData(weight), x, weight, d, stats = std::move(stats), training, m,
                    reduce = std::move(reduce), eps, given, who = std::move(who),
                    across = std::move(across)](const Tensor& g, GradSink& gs) {
                     if (autograd::creating_graph()) {
                       if (given && !across)
                         throw std::logic_error(who + ": no double backward with batch statistics given from "
                                                      "outside the input (batch_norm_with_stats without sum_over_batch)");
                       detail::batch_norm_backward_differentiable(g, x, weight, stats.data(), stats.data() + d.C,
                                                                  training, eps, gs, given ? who.c_str() : "batch_norm",
                                                                  given ? &across : nullptr, m);
                       return;
                     }
                     TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "batch_norm_backward", [&] {
                       backward_impl<scalar_t>(g, xs.data<scalar_t>(), d, stats.data(), stats.data() + d.C,
                                               ws.data<scalar_t>(), training, m, &reduce, gs);
                     });
                   },
                   autograd::kSavesInputs | autograd::kSecondOrder);
}

}  // namespace

void batch_moments(const Tensor& x, Tensor& mean_out, Tensor& var_out) {
  if (x.dim() < 2) throw std::invalid_argument("batch_moments: expected (N, C, *), got " + shape_str(x.shape()));
  const Dims d = bn_dims_of(x);
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
  // momentum only matters (and is only checked) when running statistics are updated
  const std::optional<double> f = training && running_mean.defined() ? std::optional<double>(momentum) : std::nullopt;
  return batch_norm(x, weight, bias, RunningStats{running_mean, running_var, Tensor(), f, unbiased_running_var},
                    training, eps, "batch_norm");
}

namespace {
// batch_norm's forward without the tape node: checks, statistics (running ones updated),
// the normalised output. `stats` receives [mean (C), rstd (C)], what the backward keeps.
// An empty x returns detail::empty_norm_output, recorded (`empty` set).
// With act set (batch_norm_relu), an (N, C) input gets the activation in the same pass
// (forward_impl's act, hi, pre); other shapes return the normalised values.
Tensor normalise(const Tensor& x, const Tensor& weight, const Tensor& bias, const RunningStats& running,
                 bool use_batch_stats, double eps, const std::string& who, Dims& d, std::vector<double>& stats,
                 bool& empty, int act = kernels::kBnActNone, double hi = 0, Tensor* pre = nullptr) {
  d = detail::bn_check_common(who, x, weight, bias, running, eps);
  if (!use_batch_stats && !running.defined())
    throw std::invalid_argument(who + ": eval mode (training=false) needs running_mean and running_var");
  const std::int64_t m = d.N * d.S;
  if (use_batch_stats && m <= 1)  // the message only when it throws
    check_values_per_channel(who, m, "value per channel", "input of shape " + shape_str(x.shape()), running.defined());
  running.check_mode(who, use_batch_stats);  // before any buffer changes
  empty = x.numel() == 0;
  if (empty) return detail::empty_norm_output(x, weight, bias, "batch_norm");  // eval on an empty batch
  stats.resize(static_cast<std::size_t>(2 * d.C));
  double* mean = stats.data();
  double* rstd = mean + d.C;
  return TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "batch_norm", [&] {
    const scalar_t* xp = x.data<scalar_t>();
    if (use_batch_stats) {
      double* var = kernels::scratch<VarTag, double>(static_cast<std::size_t>(d.C));
      moments<scalar_t>(xp, d, mean, var);
      // A constant channel with eps = 0 has σ² + eps = 0: like PyTorch, use rstd = 0 (output β,
      // zero gradients) instead of dividing by zero.
      kernels::inverse_std(var, eps, rstd, d.C);
      running.update(mean, var, m);
    } else {
      const scalar_t* rm = running.running_mean.data<scalar_t>();
      const scalar_t* rv = running.running_var.data<scalar_t>();
      for (std::int64_t c = 0; c < d.C; ++c) {
        mean[c] = rm[c];
        rstd[c] = 1.0 / std::sqrt(static_cast<double>(rv[c]) + eps);
      }
    }
    return forward_impl<scalar_t>(x, d, mean, rstd, weight, bias, act, hi, pre);
  });
}

// The activation after the normalisation: relu, or relu then clamp(lo, hi) (lo <= 0 <= hi),
// through the core ops themselves (not recorded), so the values are theirs.
Tensor activation(const Tensor& a, const std::optional<std::pair<double, double>>& clip) {
  NoGradGuard no_grad;
  return clip ? relu_clamp(a, clip->first, clip->second) : relu(a);
}

// The derivative of relu (or relu_clamp up to hi) at `a`, the activation's input: 1 where it
// passes the gradient, 0 elsewhere (the kernels the first-order backward runs, applied to ones).
Tensor activation_mask(const Tensor& a, bool clipped, double hi) {
  Tensor ones = Tensor::ones(a.shape(), a.dtype());
  Tensor mask = Tensor::empty(a.shape(), a.dtype());
  TAPEGRAD_DISPATCH_FLOAT(a.dtype(), "batch_norm_relu_backward", [&] {
    if (clipped)
      tapegrad::kernels::relu_clamp_backward<scalar_t>(ones.data<scalar_t>(), a.data<scalar_t>(),
                                                       mask.data<scalar_t>(), a.numel(), static_cast<scalar_t>(hi));
    else
      tapegrad::kernels::relu_backward<scalar_t>(ones.data<scalar_t>(), a.data<scalar_t>(), mask.data<scalar_t>(),
                                                 a.numel());
  });
  return mask;
}
}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const RunningStats& running,
                  bool use_batch_stats, double eps, const std::string& who) {
  Dims d{};
  std::vector<double> stats;
  bool empty = false;
  Tensor out = normalise(x, weight, bias, running, use_batch_stats, eps, who, d, stats, empty);
  if (empty) return out;
  record_backward(out, x, weight, bias, d, std::move(stats), use_batch_stats, static_cast<double>(d.N * d.S), {},
                  eps);
  if (use_batch_stats) running.watch_backward(who, out);
  return out;
}

Tensor batch_norm_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, const RunningStats& running,
                       bool use_batch_stats, double eps, const std::string& who,
                       std::optional<std::pair<double, double>> clip) {
  if (clip && !(clip->first <= 0 && clip->second >= 0))  // NaN fails both
    throw std::invalid_argument(who + ": batch_norm_relu's clip must have lo <= 0 <= hi, got lo=" +
                                std::to_string(clip->first) + ", hi=" + std::to_string(clip->second));
  Dims d{};
  std::vector<double> stats;
  bool empty = false;
  const double hi = clip ? clip->second : 0.0;
  const int act = clip ? kernels::kBnActReluClamp : kernels::kBnActRelu;
  Tensor pre;  // the fused activation's input, for its backward mask
  Tensor a = normalise(x, weight, bias, running, use_batch_stats, eps, who, d, stats, empty, act, hi, &pre);
  if (empty) return clip ? relu_clamp(a, clip->first, clip->second) : relu(a);  // recorded apart
  if (d.S == 1) {
    // (N, C): normalise ran the activation in its pass; the backward masks dy inside
    // batch_norm's kernels, from the activation's input (held privately, as relu holds its
    // input: an in-place write to the output does not affect this backward)
    if (!autograd::needs_grad({&x, &weight, &bias})) return a;
    const double m = static_cast<double>(d.N);
    autograd::record(
        "batch_norm_relu", a, {x, weight, bias},
        [xs = SavedData(x), ws = SavedData(weight), ms = SavedData(pre), x, weight, pre, d, stats = std::move(stats),
         training = use_batch_stats, m, hi, act, eps](const Tensor& g, GradSink& gs) {
          if (autograd::creating_graph()) {
            // the activation's derivative is piecewise constant: g times its mask, then batch_norm's
            const Tensor mask = activation_mask(pre, act == kernels::kBnActReluClamp, hi);
            detail::batch_norm_backward_differentiable(mul(g, mask), x, weight, stats.data(), stats.data() + d.C,
                                                       training, eps, gs, "batch_norm_relu");
            return;
          }
          TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "batch_norm_relu_backward", [&] {
            const std::function<void(double*, std::int64_t)> no_reduce;
            backward_impl<scalar_t>(g, xs.data<scalar_t>(), d, stats.data(), stats.data() + d.C, ws.data<scalar_t>(),
                                    training, m, &no_reduce, gs, ms.data<scalar_t>(), act,
                                    static_cast<scalar_t>(hi));
          });
        },
        autograd::kSavesInputs | autograd::kSecondOrder);
    if (use_batch_stats) running.watch_backward(who, a);
    return a;
  }
  Tensor y = activation(a, clip);
  if (!autograd::needs_grad({&x, &weight, &bias})) return y;
  const double m = static_cast<double>(d.N * d.S);
  const bool clipped = static_cast<bool>(clip);
  autograd::record("batch_norm_relu", y, {x, weight, bias},
                   [xs = SavedData(x), ws = SavedData(weight), x, weight, a = std::move(a), d,
                    stats = std::move(stats), training = use_batch_stats, m, hi, clipped,
                    eps](const Tensor& g, GradSink& gs) {
                     if (autograd::creating_graph()) {
                       const Tensor mask = activation_mask(a, clipped, hi);
                       detail::batch_norm_backward_differentiable(mul(g, mask), x, weight, stats.data(),
                                                                  stats.data() + d.C, training, eps, gs,
                                                                  "batch_norm_relu");
                       return;
                     }
                     TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "batch_norm_relu_backward", [&] {
                       // the activation's backward (relu's, or relu_clamp's mask), then batch_norm's
                       // (core/kernels/pointwise.h: the loops relu and relu_clamp run)
                       Tensor ga = Tensor::empty(g.shape(), g.dtype());
                       if (clipped)
                         tapegrad::kernels::relu_clamp_backward<scalar_t>(g.data<scalar_t>(), a.data<scalar_t>(),
                                                                          ga.data<scalar_t>(), g.numel(),
                                                                          static_cast<scalar_t>(hi));
                       else
                         tapegrad::kernels::relu_backward<scalar_t>(g.data<scalar_t>(), a.data<scalar_t>(),
                                                                    ga.data<scalar_t>(), g.numel());
                       const std::function<void(double*, std::int64_t)> no_reduce;
                       backward_impl<scalar_t>(ga, xs.data<scalar_t>(), d, stats.data(), stats.data() + d.C,
                                               ws.data<scalar_t>(), training, m, &no_reduce, gs);
                     });
                   },
                   autograd::kSavesInputs | autograd::kSecondOrder);
  if (use_batch_stats) running.watch_backward(who, y);
  return y;
}

Tensor batch_norm_with_stats(const Tensor& x, const BatchStats& given, const Tensor& weight, const Tensor& bias,
                             const RunningStats& running, double eps, const std::string& who) {
  const Dims d = detail::bn_check_common(who, x, weight, bias, running, eps);
  for (const auto& [t, what] : {std::pair{&given.mean, "mean"}, std::pair{&given.var, "var"}})
    if (!t->defined() || t->dtype() != Dtype::Float64 || t->dim() != 1 || t->size(0) != d.C)
      throw std::invalid_argument(who + ": expected the batch " + what + " as float64 of shape [" +
                                  std::to_string(d.C) + "], got " +
                                  (t->defined() ? std::string(dtype_name(t->dtype())) + " " + shape_str(t->shape())
                                                : std::string("an undefined tensor")));
  check_values_per_channel(who, given.count,
                           "value per channel" + (given.origin.empty() ? std::string() : " " + given.origin),
                           std::to_string(given.count) + " (this input has shape " + shape_str(x.shape()) + ")",
                           running.defined());
  running.check_mode(who, true);  // before any buffer changes
  std::vector<double> stats(static_cast<std::size_t>(2 * d.C));
  double* mean = stats.data();
  double* rstd = mean + d.C;
  const double* gm = given.mean.data<double>();
  const double* gv = given.var.data<double>();
  std::copy(gm, gm + d.C, mean);
  kernels::inverse_std(gv, eps, rstd, d.C);
  running.update(mean, gv, given.count);
  Tensor out = x.numel() == 0 ? Tensor::empty(x.shape(), x.dtype())
                              : TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "batch_norm_with_stats", [&] {
                                  return forward_impl<scalar_t>(x, d, mean, rstd, weight, bias);
                                });
  record_backward(out, x, weight, bias, d, std::move(stats), true, static_cast<double>(given.count),
                  given.reduce_grad_sums, eps, true, who, given.sum_over_batch);
  running.watch_backward(who, out);
  return out;
}

}  // namespace tapegrad::layers::functional
