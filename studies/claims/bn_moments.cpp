#include "bn_moments.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/view_ops.h>
#include <tapegrad/layers/hooks.h>

namespace claims {

using namespace tapegrad;

namespace {
// Chan, Golub & LeVeque's pairwise update of (n, mean, M2) per channel.
void add_batch(ChannelMoments& m, std::vector<double>& m2, const Tensor& x) {
  const std::int64_t N = x.size(0), C = x.size(1), S = N * C > 0 ? x.numel() / (N * C) : 0;
  const std::vector<double> v = x.to_vector();
  if (m.mean.empty()) m.mean.assign(static_cast<std::size_t>(C), 0.0), m2.assign(static_cast<std::size_t>(C), 0.0);
  const std::int64_t nb = N * S;
  if (nb == 0) return;
  for (std::int64_t c = 0; c < C; ++c) {
    double s = 0, q = 0;
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t k = 0; k < S; ++k) s += v[static_cast<std::size_t>((i * C + c) * S + k)];
    const double mb = s / static_cast<double>(nb);
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t k = 0; k < S; ++k) {
        const double d = v[static_cast<std::size_t>((i * C + c) * S + k)] - mb;
        q += d * d;
      }
    const auto cc = static_cast<std::size_t>(c);
    const double na = static_cast<double>(m.n), nbd = static_cast<double>(nb), nt = na + nbd;
    const double delta = mb - m.mean[cc];
    m.mean[cc] += delta * nbd / nt;
    m2[cc] += q + delta * delta * na * nbd / nt;
  }
  m.n += nb;
}
}  // namespace

std::vector<ChannelMoments> eval_input_moments(layers::Module& model, const std::vector<layers::BatchNormBase*>& bns,
                                               const Tensor& x, std::int64_t batch) {
  // The hook owns its state: another thread may still run a copy of it after removal.
  struct State {
    std::vector<const layers::Module*> targets;
    std::vector<ChannelMoments> out;
    std::vector<std::vector<double>> m2;
  };
  auto st = std::make_shared<State>();
  for (auto* b : bns) st->targets.push_back(b);
  st->out.resize(bns.size());
  st->m2.resize(bns.size());
  std::vector<ChannelMoments>& out = st->out;
  std::vector<std::vector<double>>& m2 = st->m2;
  std::vector<std::pair<layers::Module*, bool>> modes;
  for (auto& [p, mod] : model.named_modules()) modes.emplace_back(mod, mod->is_training());
  {
    NoGradGuard ng;
    ModeChecksPause pause;  // a measurement pass: what is read is each BN's input, not its statistics
    const std::uint64_t id = layers::hooks::add_forward_hook([st](layers::Module& m, const Tensor& in, const Tensor&) {
      for (std::size_t i = 0; i < st->targets.size(); ++i)
        if (st->targets[i] == &m) add_batch(st->out[i], st->m2[i], in);
    });
    try {
      model.eval();
      const std::int64_t N = x.size(0);
      for (std::int64_t b = 0; b < N; b += batch) model(narrow(x, 0, b, std::min(batch, N - b)));
    } catch (...) {
      layers::hooks::remove_hook(id);
      for (auto& [mod, mode] : modes) mod->train(mode);
      throw;
    }
    layers::hooks::remove_hook(id);
    for (auto& [mod, mode] : modes) mod->train(mode);
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i].n < 2)
      throw std::invalid_argument("eval_input_moments: BatchNorm " + std::to_string(i) +
                                  " saw " + std::to_string(out[i].n) + " values per channel, expected >= 2");
    out[i].var.resize(m2[i].size());
    for (std::size_t c = 0; c < m2[i].size(); ++c) out[i].var[c] = m2[i][c] / static_cast<double>(out[i].n - 1);
  }
  return std::move(out);
}

}  // namespace claims
