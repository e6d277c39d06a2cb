#include <tapegrad/distributed/sync_batch_norm.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/distributed/comm.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/layers/functional/batch_norm.h>

namespace tapegrad::distributed {
namespace {

// Global per-channel mean and M2 of all ranks' x, merged in rank order (Chan et al. 1979).
// Returns the global count per channel.
std::int64_t global_moments(const Tensor& x, std::vector<double>& mean, std::vector<double>& m2) {
  const std::int64_t C = x.size(1);
  const std::size_t Cs = static_cast<std::size_t>(C);
  const std::int64_t local_n = x.numel() / std::max<std::int64_t>(C, 1);
  std::vector<double> mine(2 * Cs + 1, 0.0);
  mine[0] = static_cast<double>(local_n);  // exact up to 2^53 values per channel
  if (local_n > 0) {
    Tensor mu, var;
    layers::functional::batch_moments(x, mu, var);
    const double* pm = mu.data<double>();
    const double* pv = var.data<double>();
    for (std::size_t c = 0; c < Cs; ++c) {
      mine[1 + c] = pm[c];
      mine[1 + Cs + c] = pv[c] * static_cast<double>(local_n);
    }
  }
  const int R = world_size();
  std::vector<double> all(mine.size() * static_cast<std::size_t>(R));
  // the header names this layer's num_features: ranks whose layers differ throw here, every one
  detail::allgather(mine.data(), static_cast<std::int64_t>(mine.size()), all.data(), detail::kSyncBatchNormStats, C);
  mean.assign(Cs, 0.0);
  m2.assign(Cs, 0.0);
  double n = 0;
  for (int r = 0; r < R; ++r) {
    const double* p = all.data() + static_cast<std::size_t>(r) * mine.size();
    const double nb = p[0];
    if (nb == 0) continue;
    const double na = n;
    n += nb;
    for (std::size_t c = 0; c < Cs; ++c) {
      if (na == 0) {
        mean[c] = p[1 + c];
        m2[c] = p[1 + Cs + c];
        continue;
      }
      const double delta = p[1 + c] - mean[c];
      mean[c] += delta * nb / n;
      m2[c] += p[1 + Cs + c] + delta * delta * na * nb / n;
    }
  }
  return static_cast<std::int64_t>(n);
}

// Σ over ranks of t (C values per rank), as a tape op for a create_graph backward: y = Σ_r t_r,
// so d(Σ_r L_r)/dt_r = Σ_s dL_s/dy, the same all-reduce of the incoming gradients (a sum
// all-reduce is its own adjoint); its backward is this op again, so it differentiates any
// number of times. Every rank must run the same sequence of them (they are collectives).
Tensor allreduce_channels(const Tensor& t, std::int64_t C) {
  std::vector<double> v = t.to_vector();
  detail::allreduce_sum(v.data(), static_cast<std::int64_t>(v.size()), detail::kSyncBatchNormGrad, C);
  Tensor out = Tensor::from_vector(v, t.shape(), Dtype::Float64);
  if (t.dtype() != Dtype::Float64) out = out.to(t.dtype());
  if (autograd::needs_grad({&t}))
    autograd::record(
        "sync_batch_norm_allreduce", out, {t},
        [C](const Tensor& g, GradSink& gs) { gs.add(0, allreduce_channels(g, C)); },
        autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
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
  check_dtype(x);
  if (!is_training() && options.track_running_stats)  // eval with running statistics: BatchNorm, no communication
    return layers::functional::batch_norm(x, weight, bias, running_stats(), false, options.eps, type_name());
  // Train mode (or no running statistics): the statistics of every rank's batch. The
  // normalisation, the running-statistics update, the refusal of m <= 1 (every rank sees
  // the same m, so every rank throws and none is left waiting) and the backward are
  // functional::batch_norm_with_stats'; the backward's sums are allreduced before dx.
  std::vector<double> mean, m2;
  const std::int64_t m = global_moments(x, mean, m2);
  std::vector<double> var(mean.size());
  for (std::size_t c = 0; c < var.size(); ++c) var[c] = m > 0 ? m2[c] / static_cast<double>(m) : 0.0;
  const std::int64_t C = x.size(1);
  layers::functional::BatchStats stats{Tensor::from_vector(mean, {C}, Dtype::Float64),
                                       Tensor::from_vector(var, {C}, Dtype::Float64), m,
                                       "over all " + std::to_string(world_size()) + " ranks",
                                       [C](double* sums, std::int64_t n) {
                                         detail::allreduce_sum(sums, n, detail::kSyncBatchNormGrad, C);
                                       },
                                       [C](const Tensor& t) { return allreduce_channels(t, C); }};
  return layers::functional::batch_norm_with_stats(x, stats, weight, bias, running_stats(), options.eps, type_name());
}

layers::ModulePtr convert_sync_batchnorm(layers::ModulePtr module) {
  if (!module) throw std::invalid_argument("convert_sync_batchnorm: the module is null");
  const std::string t = module->type_name();
  if (t == "BatchNorm1dReLU")  // its ReLU (and Clamp) live inside it: a SyncBatchNorm in its place would drop them
    throw std::invalid_argument(
        "convert_sync_batchnorm: expected an unfused model, got a BatchNorm1dReLU (made by layers::fuse_modules); "
        "convert first, then fuse (SyncBatchNorm is left unfused)");
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
