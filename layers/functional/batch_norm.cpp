// Fused batch-norm forward and backward over x viewed as (N, C, S).
#include "layers/functional/batch_norm.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/autograd.h"
#include "core/parallel.h"

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

// Σ over (n, s) of f(n, c, s) for every channel c, in double, split over threads.
// f is called as f(row_ptr_offset_elements) style by the two layouts below.
template <class T>
void channel_sums(const T* x, const T* y, Dims d, const double* center, double* s1, double* s2) {
  // s1[c] = Σ x (or Σ y when y != null); s2[c] = Σ (x - center)·(y or (x - center))
  const std::int64_t C = d.C;
  for (std::int64_t c = 0; c < C; ++c) s1[c] = s2[c] = 0.0;
  const int nt = d.N * d.C * d.S >= kParallelGrain ? get_num_threads() : 1;
  std::vector<double> part(static_cast<std::size_t>(2 * C * nt), 0.0);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int t = 0; t < nt; ++t) {
    double* p1 = part.data() + 2 * C * t;
    double* p2 = p1 + C;
    if (d.S == 1) {
      const std::int64_t b = d.N * t / nt, e = d.N * (t + 1) / nt;
      for (std::int64_t n = b; n < e; ++n) {
        const T* xr = x + n * C;
        const T* yr = y ? y + n * C : nullptr;
        if (yr)
          for (std::int64_t c = 0; c < C; ++c) {
            p1[c] += yr[c];
            p2[c] += (xr[c] - center[c]) * static_cast<double>(yr[c]);
          }
        else
          for (std::int64_t c = 0; c < C; ++c) {
            const double v = xr[c] - center[c];
            p1[c] += xr[c];
            p2[c] += v * v;
          }
      }
    } else {
      const std::int64_t b = C * t / nt, e = C * (t + 1) / nt;
      for (std::int64_t c = b; c < e; ++c) {
        double a1 = 0, a2 = 0;
        const double m = center[c];
        for (std::int64_t n = 0; n < d.N; ++n) {
          const T* xr = x + (n * C + c) * d.S;
          const T* yr = y ? y + (n * C + c) * d.S : nullptr;
          if (yr)
            for (std::int64_t s = 0; s < d.S; ++s) {
              a1 += yr[s];
              a2 += (xr[s] - m) * static_cast<double>(yr[s]);
            }
          else
            for (std::int64_t s = 0; s < d.S; ++s) {
              const double v = xr[s] - m;
              a1 += xr[s];
              a2 += v * v;
            }
        }
        p1[c] = a1;
        p2[c] = a2;
      }
    }
  }
  for (int t = 0; t < nt; ++t)
    for (std::int64_t c = 0; c < C; ++c) {
      s1[c] += part[2 * C * t + c];
      s2[c] += part[2 * C * t + C + c];
    }
}

// out = x·a[c] + b[c] (+ g·... see callers): the one element-wise pass.
template <class T, class F>
void channel_map(Dims d, F f) {
  const std::int64_t rows = d.N * d.C;
  parallel_for(rows, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(d.S, 1)),
               [&](std::int64_t b, std::int64_t e) {
                 if (d.S == 1) {
                   // rows are (n, c) pairs in order; c = row % C
                   for (std::int64_t r = b; r < e; ++r) f(r, r % d.C, 1);
                 } else {
                   for (std::int64_t r = b; r < e; ++r) f(r * d.S, r % d.C, d.S);
                 }
               });
}

template <class T>
Tensor forward_impl(const Tensor& x, Dims d, const std::vector<double>& mean, const std::vector<double>& rstd,
                    const Tensor& weight, const Tensor& bias) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  // y = (x - μ)·(γ·rstd) + β: centring first keeps float32 exact for constant channels
  std::vector<T> scale(static_cast<std::size_t>(d.C)), shift(static_cast<std::size_t>(d.C)),
      mu(static_cast<std::size_t>(d.C));
  const T* w = weight.defined() ? weight.data<T>() : nullptr;
  const T* bb = bias.defined() ? bias.data<T>() : nullptr;
  for (std::int64_t c = 0; c < d.C; ++c) {
    const double g = w ? static_cast<double>(w[c]) : 1.0;
    const double s = g * rstd[c];
    scale[c] = static_cast<T>(s);
    shift[c] = bb ? bb[c] : T(0);
    mu[c] = static_cast<T>(mean[c]);
  }
  const T* xp = x.data<T>();
  T* yp = out.data<T>();
  if (d.S == 1) {
    parallel_for(d.N, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(d.C, 1)),
                 [&](std::int64_t b, std::int64_t e) {
                   for (std::int64_t n = b; n < e; ++n) {
                     const T* xr = xp + n * d.C;
                     T* yr = yp + n * d.C;
                     for (std::int64_t c = 0; c < d.C; ++c) yr[c] = (xr[c] - mu[c]) * scale[c] + shift[c];
                   }
                 });
  } else {
    channel_map<T>(d, [&](std::int64_t off, std::int64_t c, std::int64_t len) {
      const T a = scale[c], b = shift[c], u = mu[c];
      for (std::int64_t s = 0; s < len; ++s) yp[off + s] = (xp[off + s] - u) * a + b;
    });
  }
  return out;
}

// Backward: gx = k1[c]·(dy - k2[c] - (x - μ_c)·k3[c]) where for train
// k1 = γ·rstd, k2 = Σdy/m, k3 = rstd²·Σ(dy·x̂)/m·(1/rstd)... see below; for eval k2 = k3 = 0.
template <class T>
void backward_impl(const Tensor& g, const Tensor& x, Dims d, const std::vector<double>& mean,
                   const std::vector<double>& rstd, const Tensor& weight, bool train, GradSink& gs) {
  const T* gp = g.data<T>();
  const T* xp = x.data<T>();
  std::vector<double> sum_dy(static_cast<std::size_t>(d.C)), sum_dy_xc(static_cast<std::size_t>(d.C));
  // sum_dy = Σ dy;  sum_dy_xc = Σ dy·(x - μ)  (so Σ dy·x̂ = rstd·sum_dy_xc)
  channel_sums<T>(xp, gp, d, mean.data(), sum_dy.data(), sum_dy_xc.data());
  const T* w = weight.defined() ? weight.data<T>() : nullptr;
  const double m = static_cast<double>(d.N * d.S);
  if (gs.needs(0)) {
    // term 1 (direct path):        γ·rstd·dy
    // term 2 (through the mean):  -γ·rstd·mean(dy)
    // term 3 (through the var):   -γ·rstd·x̂·mean(dy·x̂) = -γ·rstd·(x-μ)·rstd²·Σ(dy·(x-μ))/m
    std::vector<T> k1(static_cast<std::size_t>(d.C)), k2(static_cast<std::size_t>(d.C)),
        k3(static_cast<std::size_t>(d.C)), mu(static_cast<std::size_t>(d.C));
    for (std::int64_t c = 0; c < d.C; ++c) {
      const double gamma = w ? static_cast<double>(w[c]) : 1.0;
      k1[c] = static_cast<T>(gamma * rstd[c]);
      k2[c] = static_cast<T>(train ? sum_dy[c] / m : 0.0);
      k3[c] = static_cast<T>(train ? rstd[c] * rstd[c] * sum_dy_xc[c] / m : 0.0);
      mu[c] = static_cast<T>(mean[c]);
    }
    Tensor gx = Tensor::empty(x.shape(), x.dtype());
    T* gxp = gx.data<T>();
    if (d.S == 1) {
      parallel_for(d.N, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(d.C, 1)),
                   [&](std::int64_t b, std::int64_t e) {
                     for (std::int64_t n = b; n < e; ++n) {
                       const T* xr = xp + n * d.C;
                       const T* gr = gp + n * d.C;
                       T* o = gxp + n * d.C;
                       for (std::int64_t c = 0; c < d.C; ++c)
                         o[c] = k1[c] * (gr[c] - k2[c] - (xr[c] - mu[c]) * k3[c]);
                     }
                   });
    } else {
      channel_map<T>(d, [&](std::int64_t off, std::int64_t c, std::int64_t len) {
        const T a = k1[c], b = k2[c], k = k3[c], u = mu[c];
        for (std::int64_t s = 0; s < len; ++s) gxp[off + s] = a * (gp[off + s] - b - (xp[off + s] - u) * k);
      });
    }
    gs.add(0, std::move(gx));
  }
  if (gs.needs(1)) {  // dγ = Σ dy·x̂
    Tensor gw = Tensor::empty({d.C}, x.dtype());
    for (std::int64_t c = 0; c < d.C; ++c) gw.data<T>()[c] = static_cast<T>(rstd[c] * sum_dy_xc[c]);
    gs.add(1, std::move(gw));
  }
  if (gs.needs(2)) {  // dβ = Σ dy
    Tensor gb = Tensor::empty({d.C}, x.dtype());
    for (std::int64_t c = 0; c < d.C; ++c) gb.data<T>()[c] = static_cast<T>(sum_dy[c]);
    gs.add(2, std::move(gb));
  }
}

void check_channel_tensor(const Tensor& t, const char* what, const Tensor& x, std::int64_t C) {
  if (!t.defined()) return;
  if (t.shape() != Shape{C})
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
  std::vector<double> zero(static_cast<std::size_t>(d.C), 0.0), s1(zero), s2(zero);
  const double m = static_cast<double>(d.N * d.S);
  TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "batch_moments", [&] {
    channel_sums<scalar_t>(x.data<scalar_t>(), nullptr, d, zero.data(), s1.data(), s2.data());
    for (std::int64_t c = 0; c < d.C; ++c) zero[c] = s1[c] / m;
    channel_sums<scalar_t>(x.data<scalar_t>(), nullptr, d, zero.data(), s1.data(), s2.data());
  });
  mean_out = Tensor::from_vector(zero, {d.C}, Dtype::Float64);
  for (auto& v : s2) v /= m;
  var_out = Tensor::from_vector(s2, {d.C}, Dtype::Float64);
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
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
  if (!(eps >= 0)) throw std::invalid_argument("batch_norm: eps must be >= 0, got " + std::to_string(eps));
  const std::int64_t m = d.N * d.S;
  if (training && m <= 1)
    throw std::invalid_argument("batch_norm: expected more than 1 value per channel when training, got input of shape " +
                                shape_str(x.shape()) + " (" + std::to_string(m) +
                                " value per channel); use eval() for single-sample inference");
  std::vector<double> mean(static_cast<std::size_t>(d.C)), rstd(static_cast<std::size_t>(d.C));
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "batch_norm", [&] {
    const scalar_t* xp = x.data<scalar_t>();
    if (training) {
      std::vector<double> zero(static_cast<std::size_t>(d.C), 0.0), s1(zero), s2(zero);
      channel_sums<scalar_t>(xp, nullptr, d, zero.data(), s1.data(), s2.data());
      for (std::int64_t c = 0; c < d.C; ++c) mean[c] = s1[c] / static_cast<double>(m);
      // second pass around the mean: exact for constant channels, no cancellation
      channel_sums<scalar_t>(xp, nullptr, d, mean.data(), s1.data(), s2.data());
      for (std::int64_t c = 0; c < d.C; ++c) {
        const double var = s2[c] / static_cast<double>(m);
        rstd[c] = 1.0 / std::sqrt(var + eps);
        s2[c] = var;
      }
      if (running_mean.defined()) {
        scalar_t* rm = running_mean.data<scalar_t>();
        scalar_t* rv = running_var.data<scalar_t>();
        const double unbias = static_cast<double>(m) / static_cast<double>(m - 1);
        for (std::int64_t c = 0; c < d.C; ++c) {
          rm[c] = static_cast<scalar_t>((1.0 - momentum) * rm[c] + momentum * mean[c]);
          rv[c] = static_cast<scalar_t>((1.0 - momentum) * rv[c] + momentum * s2[c] * unbias);
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
                     [x = x.detach(), w = weight.defined() ? weight.detach() : Tensor(), d, mean = std::move(mean),
                      rstd = std::move(rstd), training](const Tensor& g, GradSink& gs) {
                       TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "batch_norm_backward", [&] {
                         backward_impl<scalar_t>(g, x, d, mean, rstd, w, training, gs);
                       });
                     });
  }
  return out;
}

}  // namespace tapegrad::layers::functional
