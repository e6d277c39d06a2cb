#include <tapegrad/distributed/sync_batch_norm.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/functional/kernels/batch_norm_nc.h>

namespace tapegrad::distributed {
namespace {

using layers::functional::kernels::bn_rows_dx;
using layers::functional::kernels::bn_rows_sums;

struct Dims {
  std::int64_t N, C, S;
};

// Global per-channel mean and M2 of all ranks' x, merged in rank order (Chan et al. 1979).
// Returns the global count per channel.
std::int64_t global_moments(const Tensor& x, Dims d, std::vector<double>& mean, std::vector<double>& m2) {
  const std::size_t C = static_cast<std::size_t>(d.C);
  const std::int64_t local_n = d.N * d.S;
  std::vector<double> mine(2 * C + 1, 0.0);
  mine[0] = static_cast<double>(local_n);  // exact up to 2^53 values per channel
  if (local_n > 0) {
    Tensor mu, var;
    layers::functional::batch_moments(x, mu, var);
    const double* pm = mu.data<double>();
    const double* pv = var.data<double>();
    for (std::size_t c = 0; c < C; ++c) {
      mine[1 + c] = pm[c];
      mine[1 + C + c] = pv[c] * static_cast<double>(local_n);
    }
  }
  const int R = world_size();
  std::vector<double> all(mine.size() * static_cast<std::size_t>(R));
  allgather(mine.data(), static_cast<std::int64_t>(mine.size()), all.data());
  mean.assign(C, 0.0);
  m2.assign(C, 0.0);
  double n = 0;
  for (int r = 0; r < R; ++r) {
    const double* p = all.data() + static_cast<std::size_t>(r) * mine.size();
    const double nb = p[0];
    if (nb == 0) continue;
    const double na = n;
    n += nb;
    for (std::size_t c = 0; c < C; ++c) {
      if (na == 0) {
        mean[c] = p[1 + c];
        m2[c] = p[1 + C + c];
        continue;
      }
      const double delta = p[1 + c] - mean[c];
      mean[c] += delta * nb / n;
      m2[c] += p[1 + C + c] + delta * delta * na * nb / n;
    }
  }
  return static_cast<std::int64_t>(n);
}

// Backward of the synchronised normalisation (see the header).
template <class T>
void backward_impl(const Tensor& g, const Tensor& x, const Tensor& w, Dims d, const std::vector<double>& mean,
                   const std::vector<double>& rstd, std::int64_t m, GradSink& gs) {
  const std::size_t C = static_cast<std::size_t>(d.C);
  const T* xp = x.data<T>();
  const T* gp = g.data<T>();
  std::vector<T> mu(C), k1(C), k2(C), k3(C);
  for (std::size_t c = 0; c < C; ++c) mu[c] = static_cast<T>(mean[c]);
  std::vector<double> sums(2 * C, 0.0);  // Σdy, then Σdy·(x - μ)
  if (d.N * d.S > 0) {
    if (d.S == 1) {
      bn_rows_sums<T>(xp, gp, d.N, d.C, mu.data(), sums.data(), sums.data() + C);
    } else {
      for (std::int64_t n = 0; n < d.N; ++n)
        for (std::size_t c = 0; c < C; ++c) {
          const T* xr = xp + (n * d.C + static_cast<std::int64_t>(c)) * d.S;
          const T* gr = gp + (n * d.C + static_cast<std::int64_t>(c)) * d.S;
          double a = 0, b = 0;
          for (std::int64_t i = 0; i < d.S; ++i) {
            a += gr[i];
            b += gr[i] * (static_cast<double>(xr[i]) - mean[c]);
          }
          sums[c] += a;
          sums[C + c] += b;
        }
    }
  }
  if (gs.needs(1)) {  // dγ = Σ dy·x̂ over this rank's rows
    Tensor gw = Tensor::empty({d.C}, g.dtype());
    for (std::size_t c = 0; c < C; ++c) gw.data<T>()[c] = static_cast<T>(rstd[c] * sums[C + c]);
    gs.add(1, std::move(gw));
  }
  if (gs.needs(2)) {  // dβ = Σ dy over this rank's rows
    Tensor gb = Tensor::empty({d.C}, g.dtype());
    for (std::size_t c = 0; c < C; ++c) gb.data<T>()[c] = static_cast<T>(sums[c]);
    gs.add(2, std::move(gb));
  }
  if (!gs.needs(0)) return;
  allreduce_sum(sums.data(), static_cast<std::int64_t>(2 * C));
  const T* wp = w.defined() ? w.data<T>() : nullptr;
  const double md = static_cast<double>(m);
  for (std::size_t c = 0; c < C; ++c) {
    const double gamma = wp ? static_cast<double>(wp[c]) : 1.0;
    k1[c] = static_cast<T>(gamma * rstd[c]);
    k2[c] = static_cast<T>(sums[c] / md);
    k3[c] = static_cast<T>(rstd[c] * rstd[c] * sums[C + c] / md);
  }
  Tensor gx = Tensor::empty(g.shape(), g.dtype());
  T* o = gx.data<T>();
  if (d.N * d.S > 0) {
    if (d.S == 1) {
      bn_rows_dx<T>(xp, gp, o, d.N, d.C, mu.data(), k1.data(), k2.data(), k3.data());
    } else {
      for (std::int64_t n = 0; n < d.N; ++n)
        for (std::size_t c = 0; c < C; ++c) {
          const std::int64_t off = (n * d.C + static_cast<std::int64_t>(c)) * d.S;
          for (std::int64_t i = 0; i < d.S; ++i)
            o[off + i] = k1[c] * (gp[off + i] - k2[c] - (xp[off + i] - mu[c]) * k3[c]);
        }
    }
  }
  gs.add(0, std::move(gx));
}

}  // namespace

void SyncBatchNorm::check_input(const Tensor& x) const {
  if (x.dim() < 2 || x.dim() > 4)
    throw std::invalid_argument("SyncBatchNorm: expected (N, C), (N, C, L) or (N, C, H, W) input, got " +
                                std::to_string(x.dim()) + "D input of shape " + shape_str(x.shape()));
  check_features(x);
}

Tensor SyncBatchNorm::forward(const Tensor& x) {
  if (!x.defined()) throw std::invalid_argument("SyncBatchNorm: the input is undefined");
  check_input(x);
  if (x.dtype() != options.dtype && (weight.defined() || running_mean.defined()))
    throw std::invalid_argument("SyncBatchNorm: input dtype " + std::string(dtype_name(x.dtype())) +
                                " does not match the module's " + dtype_name(options.dtype) +
                                " (convert with .to() or Module::to())");
  const bool use_batch_stats = is_training() || !options.track_running_stats;
  if (!use_batch_stats)  // eval with running statistics: BatchNorm, no communication
    return layers::functional::batch_norm(x, running_mean, running_var, weight, bias, false, 0.0, options.eps);

  Dims d{x.size(0), x.size(1), 1};
  for (std::int64_t k = 2; k < x.dim(); ++k) d.S *= x.size(k);
  std::vector<double> mean, m2;
  const std::int64_t m = global_moments(x, d, mean, m2);
  if (m <= 1)  // every rank has the same m, so every rank throws: no rank is left waiting
    throw std::invalid_argument("SyncBatchNorm: expected more than 1 value per channel over all " +
                                std::to_string(world_size()) + " ranks when training, got " + std::to_string(m) +
                                " (this rank's input has shape " + shape_str(x.shape()) + ")");
  const std::size_t C = static_cast<std::size_t>(d.C);
  std::vector<double> var(C), rstd(C);
  for (std::size_t c = 0; c < C; ++c) {
    var[c] = m2[c] / static_cast<double>(m);
    rstd[c] = var[c] + options.eps == 0.0 ? 0.0 : 1.0 / std::sqrt(var[c] + options.eps);
  }
  if (is_training() && options.track_running_stats) {
    std::int64_t& nbt = num_batches_tracked.data<std::int64_t>()[0];
    ++nbt;
    const double f = options.momentum ? *options.momentum : 1.0 / static_cast<double>(nbt);
    const double unbiased = 1.0 / static_cast<double>(m - 1);
    TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "SyncBatchNorm", [&] {
      scalar_t* rm = running_mean.data<scalar_t>();
      scalar_t* rv = running_var.data<scalar_t>();
      for (std::size_t c = 0; c < C; ++c) {
        rm[c] = static_cast<scalar_t>((1.0 - f) * rm[c] + f * mean[c]);
        rv[c] = static_cast<scalar_t>((1.0 - f) * rv[c] + f * m2[c] * unbiased);
      }
    });
  }
  // y = (x - μ)·rstd·γ + β: BatchNorm's eval kernel with the global statistics.
  Tensor out;
  {
    NoGradGuard ng;
    Tensor mu_t = Tensor::from_vector(mean, {d.C}, x.dtype());
    Tensor var_t = Tensor::from_vector(var, {d.C}, x.dtype());
    out = layers::functional::batch_norm(x, mu_t, var_t, weight, bias, false, 0.0, options.eps);
  }
  if (autograd::needs_grad({&x, &weight, &bias})) {
    autograd::record("sync_batch_norm", out, {x, weight, bias},
                     [xs = x.detach(), ws = weight.defined() ? weight.detach() : Tensor(), d, mean = std::move(mean),
                      rstd = std::move(rstd), m](const Tensor& g, GradSink& gs) {
                       TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "sync_batch_norm_backward", [&] {
                         backward_impl<scalar_t>(g, xs, ws, d, mean, rstd, m, gs);
                       });
                     });
  }
  return out;
}

layers::ModulePtr convert_sync_batchnorm(layers::ModulePtr module) {
  if (!module) throw std::invalid_argument("convert_sync_batchnorm: the module is null");
  const std::string t = module->type_name();
  if (t == "BatchNorm1d" || t == "BatchNorm2d") {
    auto* bn = dynamic_cast<layers::BatchNormBase*>(module.get());
    if (!bn) return module;
    auto sync = std::make_shared<SyncBatchNorm>(bn->num_features, bn->options);
    sync->load_state_dict(bn->state_dict(), layers::LoadOptions{true, false});  // a conversion: copied as it is
    sync->train(bn->is_training());
    return sync;
  }
  for (auto& [name, child] : module->named_children()) {
    layers::ModulePtr converted = convert_sync_batchnorm(child);
    if (converted != child) module->replace_child(name, converted);
  }
  return module;
}

}  // namespace tapegrad::distributed
