// Losses: each fused forward is followed by its backward closure.
#include <tapegrad/layers/functional/losses.h>

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/ops/kernels.h>
#include <tapegrad/core/parallel.h>

namespace tapegrad::layers::functional {
namespace {

// ---- class-index losses: shared checks ---------------------------------------------------

struct ClassBatch {
  Tensor x;              // (N, C) view of the input
  Tensor target;         // (N) int64
  std::int64_t N = 0, C = 0;
  std::int64_t count = 0;  // rows whose target is not ignore_index
  bool unbatched = false;
};

ClassBatch check_class_batch(const Tensor& input, const Tensor& target, std::int64_t ignore_index, const char* op) {
  if (!input.defined() || !target.defined())
    throw std::invalid_argument(std::string(op) + ": undefined input or target");
  kernels::check_floating(input, op);
  ClassBatch b;
  b.x = input;
  b.target = target;
  if (input.dim() == 1) {  // unbatched: (C) logits, scalar target
    b.unbatched = true;
    b.x = alias_with_shape(input, {1, input.shape()[0]});
    if (target.dim() != 0)
      throw std::invalid_argument(std::string(op) + ": unbatched input of shape " + shape_str(input.shape()) +
                                  " expects a scalar target (shape []), got shape " + shape_str(target.shape()));
    b.target = alias_with_shape(target, {1});
  } else if (input.dim() != 2) {
    throw std::invalid_argument(std::string(op) + ": expected input of shape (N, C) or (C), got " +
                                shape_str(input.shape()));
  }
  b.N = b.x.shape()[0];
  b.C = b.x.shape()[1];
  if (target.dtype() != Dtype::Int64)
    throw std::invalid_argument(std::string(op) + ": target must be int64 class indices, got " +
                                dtype_name(target.dtype()) + " of shape " + shape_str(target.shape()));
  if (!b.unbatched && target.shape() != Shape{b.N})
    throw std::invalid_argument(std::string(op) + ": expected target of shape " + shape_str({b.N}) +
                                " for input of shape " + shape_str(input.shape()) + ", got " +
                                shape_str(target.shape()));
  const std::int64_t* t = b.target.data<std::int64_t>();
  for (std::int64_t i = 0; i < b.N; ++i) {
    if (t[i] == ignore_index) continue;
    if (t[i] < 0 || t[i] >= b.C)
      throw std::invalid_argument(std::string(op) + ": target[" + std::to_string(i) + "] = " +
                                  std::to_string(t[i]) + " is out of range for C = " + std::to_string(b.C) +
                                  " classes (expected 0 <= index < " + std::to_string(b.C) + ")");
    ++b.count;
  }
  return b;
}

// Scalar or per-sample output from per-sample losses (in double), in `dtype`.
Tensor reduce_rows(const std::vector<double>& loss, Reduction r, std::int64_t count, Dtype dtype, bool unbatched,
                   const char* op) {
  if (r == Reduction::None) {
    Tensor out = Tensor::from_vector(loss, unbatched ? Shape{} : Shape{static_cast<std::int64_t>(loss.size())}, dtype);
    return out;
  }
  double s = 0;
  for (double v : loss) s += v;
  if (r == Reduction::Mean) {
    if (count == 0)
      throw std::invalid_argument(std::string(op) + ": mean over zero samples (empty batch, or every target equals "
                                  "ignore_index)");
    s /= static_cast<double>(count);
  }
  return Tensor::scalar(s, dtype);
}

// Per-row weight of the incoming gradient: g_i for None, g/count for Mean, g for Sum.
template <class T>
double row_scale(const T* g, Reduction r, std::int64_t i, std::int64_t count) {
  if (r == Reduction::None) return static_cast<double>(g[i]);
  return r == Reduction::Mean ? static_cast<double>(g[0]) / static_cast<double>(count) : static_cast<double>(g[0]);
}

// create_graph helpers: the (N, C) one-hot of the targets (rows at ignore_index all zero) and the
// (N, 1) per-row scale of the incoming gradient as a recorded op of g (g_i, g/count or g; 0 on
// ignored rows), so that the class losses' gradients are differentiable in g.
Tensor class_onehot(const Tensor& tg, std::int64_t C, std::int64_t ignore_index, Dtype dtype) {
  const std::int64_t N = tg.numel();
  std::vector<double> v(static_cast<std::size_t>(N * C), 0.0);
  const std::int64_t* t = tg.data<std::int64_t>();
  for (std::int64_t i = 0; i < N; ++i)
    if (t[i] != ignore_index) v[static_cast<std::size_t>(i * C + t[i])] = 1.0;
  return Tensor::from_vector(v, {N, C}, dtype);
}

Tensor row_scales(const Tensor& g, Reduction r, std::int64_t N, std::int64_t count, const Tensor& tg,
                  std::int64_t ignore_index) {
  std::vector<double> keep(static_cast<std::size_t>(N));
  const std::int64_t* t = tg.data<std::int64_t>();
  for (std::int64_t i = 0; i < N; ++i) keep[static_cast<std::size_t>(i)] = t[i] == ignore_index ? 0.0 : 1.0;
  const Tensor mask = Tensor::from_vector(keep, {N, 1}, g.dtype());
  if (r == Reduction::None) return mul(reshape(g, {N, 1}), mask);
  const Tensor s = r == Reduction::Mean ? mul(g, 1.0 / static_cast<double>(count)) : g;
  return mul(s, mask);
}

}  // namespace

Reduction parse_reduction(const std::string& name) {
  if (name == "mean") return Reduction::Mean;
  if (name == "sum") return Reduction::Sum;
  if (name == "none") return Reduction::None;
  throw std::invalid_argument("reduction: expected \"none\", \"mean\" or \"sum\", got \"" + name + "\"");
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (!input.defined() || !target.defined()) throw std::invalid_argument("mse_loss: undefined input or target");
  if (input.shape() != target.shape())
    throw std::invalid_argument("mse_loss: input shape " + shape_str(input.shape()) + " and target shape " +
                                shape_str(target.shape()) + " differ");
  if (reduction == Reduction::None) return square(sub(input, target));
  kernels::check_floating(input, "mse_loss");
  kernels::check_same_dtype(input, target, "mse_loss");
  const std::int64_t n = input.numel();
  if (reduction == Reduction::Mean && n == 0) throw std::invalid_argument("mse_loss: mean over an empty input");
  // One fused op: L = k·Σ (x - t)² with k = 1/n (mean) or 1 (sum), summed in double;
  // dL/dx = 2k·(x - t)·g and dL/dt = -dL/dx, recomputed from the saved inputs.
  const double k = reduction == Reduction::Mean ? 1.0 / static_cast<double>(n) : 1.0;
  double s = 0;
  TAPEGRAD_DISPATCH_FLOAT(input.dtype(), "mse_loss", [&] {
    const scalar_t* x = input.data<scalar_t>();
    const scalar_t* t = target.data<scalar_t>();
    for (std::int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(x[i] - t[i]);
      s += d * d;
    }
  });
  Tensor out = Tensor::scalar(s * k, input.dtype());
  if (autograd::needs_grad({&input, &target}))
    autograd::record("mse_loss", out, {input, target}, [input, target, k, n](const Tensor& g, GradSink& gs) {
      if (autograd::creating_graph()) {  // the same formula from recorded ops
        Tensor gx = mul(sub(input, target), mul(g, 2.0 * k));
        if (gs.needs(1)) gs.add(1, neg(gx));
        gs.add(0, std::move(gx));
        return;
      }
      TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "mse_loss_backward", [&] {
        const scalar_t c = static_cast<scalar_t>(2.0 * k * static_cast<double>(g.data<scalar_t>()[0]));
        const scalar_t* x = input.data<scalar_t>();
        const scalar_t* t = target.data<scalar_t>();
        Tensor gx = Tensor::empty(input.shape(), input.dtype());
        scalar_t* o = gx.data<scalar_t>();
        for (std::int64_t i = 0; i < n; ++i) o[i] = c * (x[i] - t[i]);
        if (gs.needs(1)) gs.add(1, mul(gx, -1.0));
        gs.add(0, std::move(gx));
      });
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction, std::int64_t ignore_index) {
  const ClassBatch b = check_class_batch(logits, target, ignore_index, "cross_entropy");
  const std::int64_t N = b.N, C = b.C;
  // lse_i = m_i + log Σ_c exp(x_ic - m_i), accumulated in double for float32 too
  auto lse = std::make_shared<std::vector<double>>(static_cast<std::size_t>(N));
  std::vector<double> loss(static_cast<std::size_t>(N), 0.0);
  const std::int64_t* t = b.target.data<std::int64_t>();
  TAPEGRAD_DISPATCH_FLOAT(logits.dtype(), "cross_entropy", [&] {
    const scalar_t* x = b.x.data<scalar_t>();
    parallel_for(N, kParallelGrain / (C > 0 ? C : 1) + 1, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) {
        const scalar_t* row = x + i * C;
        scalar_t m = -std::numeric_limits<scalar_t>::infinity();
        for (std::int64_t c = 0; c < C; ++c) m = row[c] > m ? row[c] : m;
        if (std::isinf(m)) m = 0;  // a row whose max is ±inf: no shift (inf - inf would be NaN)
        double s = 0;
        for (std::int64_t c = 0; c < C; ++c) s += std::exp(row[c] - m);
        (*lse)[i] = static_cast<double>(m) + std::log(s);
        // loss = (m - x_t) + log s: the max-shifted difference first, exact for large logits
        if (t[i] != ignore_index) loss[i] = static_cast<double>(m - row[t[i]]) + std::log(s);
      }
    });
  });
  Tensor out = reduce_rows(loss, reduction, b.count, logits.dtype(), b.unbatched, "cross_entropy");
  if (autograd::needs_grad({&logits}))
    autograd::record("cross_entropy", out, {logits},
                     [logits, x = b.x.detach(), tg = b.target, lse, reduction, count = b.count, ignore_index,
                      xs = logits.shape()](const Tensor& g, GradSink& gs) {
                       // dx_ic = (softmax_ic - [c == t_i])·scale_i, softmax_ic = exp(x_ic - lse_i)
                       if (autograd::creating_graph()) {
                         const std::int64_t N = x.shape()[0], C = x.shape()[1];
                         const Tensor x2 = reshape(logits, {N, C});
                         gs.add(0, reshape(mul(sub(softmax(x2, 1), class_onehot(tg, C, ignore_index, x.dtype())),
                                               row_scales(g, reduction, N, count, tg, ignore_index)),
                                           xs));
                         return;
                       }
                       Tensor gi = Tensor::empty(xs, x.dtype());
                       TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "cross_entropy_backward", [&] {
                         const std::int64_t N = x.shape()[0], C = x.shape()[1];
                         const scalar_t* px = x.data<scalar_t>();
                         const scalar_t* pg = g.data<scalar_t>();
                         const std::int64_t* t = tg.data<std::int64_t>();
                         scalar_t* po = gi.data<scalar_t>();
                         parallel_for(N, kParallelGrain / (C > 0 ? C : 1) + 1, [&](std::int64_t i0, std::int64_t i1) {
                           for (std::int64_t i = i0; i < i1; ++i) {
                             scalar_t* o = po + i * C;
                             if (t[i] == ignore_index) {
                               for (std::int64_t c = 0; c < C; ++c) o[c] = 0;
                               continue;
                             }
                             const scalar_t sc = static_cast<scalar_t>(row_scale(pg, reduction, i, count));
                             const double l = (*lse)[i];
                             for (std::int64_t c = 0; c < C; ++c)
                               o[c] = std::exp(static_cast<scalar_t>(static_cast<double>(px[i * C + c]) - l)) * sc;
                             o[t[i]] -= sc;
                           }
                         });
                       });
                       gs.add(0, std::move(gi));
                     }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction, std::int64_t ignore_index) {
  const ClassBatch b = check_class_batch(log_probs, target, ignore_index, "nll_loss");
  std::vector<double> loss(static_cast<std::size_t>(b.N), 0.0);
  const std::int64_t* t = b.target.data<std::int64_t>();
  TAPEGRAD_DISPATCH_FLOAT(log_probs.dtype(), "nll_loss", [&] {
    const scalar_t* x = b.x.data<scalar_t>();
    for (std::int64_t i = 0; i < b.N; ++i)
      if (t[i] != ignore_index) loss[i] = -static_cast<double>(x[i * b.C + t[i]]);
  });
  Tensor out = reduce_rows(loss, reduction, b.count, log_probs.dtype(), b.unbatched, "nll_loss");
  if (autograd::needs_grad({&log_probs}))
    autograd::record("nll_loss", out, {log_probs},
                     [tg = b.target, C = b.C, reduction, count = b.count, ignore_index,
                      xs = log_probs.shape()](const Tensor& g, GradSink& gs) {
                       // dx_i[t_i] = -scale_i, everything else 0
                       if (autograd::creating_graph()) {  // linear in g, constant in the input
                         const std::int64_t N = tg.numel();
                         gs.add(0, reshape(mul(neg(class_onehot(tg, C, ignore_index, g.dtype())),
                                               row_scales(g, reduction, N, count, tg, ignore_index)),
                                           xs));
                         return;
                       }
                       Tensor gi = Tensor::zeros(xs, g.dtype());
                       TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "nll_loss_backward", [&] {
                         const scalar_t* pg = g.data<scalar_t>();
                         const std::int64_t* t = tg.data<std::int64_t>();
                         scalar_t* po = gi.data<scalar_t>();
                         for (std::int64_t i = 0, n = tg.numel(); i < n; ++i)
                           if (t[i] != ignore_index)
                             po[i * C + t[i]] = static_cast<scalar_t>(-row_scale(pg, reduction, i, count));
                       });
                       gs.add(0, std::move(gi));
                     }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, Reduction reduction) {
  const char* op = "binary_cross_entropy_with_logits";
  if (!logits.defined() || !target.defined()) throw std::invalid_argument(std::string(op) + ": undefined input or target");
  kernels::check_floating(logits, op);
  kernels::check_floating(target, op);
  kernels::check_same_dtype(logits, target, op);
  if (logits.shape() != target.shape())
    throw std::invalid_argument(std::string(op) + ": target shape " + shape_str(target.shape()) +
                                " must equal the input shape " + shape_str(logits.shape()));
  const std::int64_t n = logits.numel();
  std::vector<double> loss(static_cast<std::size_t>(n));
  TAPEGRAD_DISPATCH_FLOAT(logits.dtype(), op, [&] {
    const scalar_t* x = logits.data<scalar_t>();
    const scalar_t* t = target.data<scalar_t>();
    for (std::int64_t k = 0; k < n; ++k) {
      const double xv = x[k], tv = t[k];
      loss[k] = std::max(xv, 0.0) - xv * tv + std::log1p(std::exp(-std::abs(xv)));
    }
  });
  Tensor out;
  if (reduction == Reduction::None) {
    out = Tensor::from_vector(loss, logits.shape(), logits.dtype());
  } else {
    out = reduce_rows(loss, reduction, n, logits.dtype(), false, op);
  }
  if (autograd::needs_grad({&logits, &target}))
    autograd::record("binary_cross_entropy_with_logits", out, {logits, target},
                     [logits, target, x = logits.detach(), t = target.detach(), reduction,
                      n](const Tensor& g, GradSink& gs) {
                       // dx = (sigmoid(x) - t)·scale, dt = -x·scale
                       if (autograd::creating_graph()) {
                         // scale = g elementwise (none), g/n (mean), g (sum), broadcast from a scalar
                         const Tensor sc = reduction == Reduction::Mean ? mul(g, 1.0 / static_cast<double>(n)) : g;
                         if (gs.needs(1)) gs.add(1, mul(neg(logits), sc));
                         if (gs.needs(0)) gs.add(0, mul(sub(sigmoid(logits), target), sc));
                         return;
                       }
                       TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "binary_cross_entropy_with_logits_backward", [&] {
                         const scalar_t *px = x.data<scalar_t>(), *pt = t.data<scalar_t>(), *pg = g.data<scalar_t>();
                         if (gs.needs(0)) {
                           Tensor gx = Tensor::empty(x.shape(), x.dtype());
                           scalar_t* o = gx.data<scalar_t>();
                           for (std::int64_t k = 0; k < n; ++k) {
                             const double xv = px[k];
                             // sigmoid without overflow on either side
                             const double sg = xv >= 0 ? 1.0 / (1.0 + std::exp(-xv)) : std::exp(xv) / (1.0 + std::exp(xv));
                             o[k] = static_cast<scalar_t>((sg - static_cast<double>(pt[k])) * row_scale(pg, reduction, k, n));
                           }
                           gs.add(0, std::move(gx));
                         }
                         if (gs.needs(1)) {
                           Tensor gt = Tensor::empty(t.shape(), t.dtype());
                           scalar_t* o = gt.data<scalar_t>();
                           for (std::int64_t k = 0; k < n; ++k)
                             o[k] = static_cast<scalar_t>(-static_cast<double>(px[k]) * row_scale(pg, reduction, k, n));
                           gs.add(1, std::move(gt));
                         }
                       });
                     }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

}  // namespace tapegrad::layers::functional
