// Local response normalisation: forward, then its backward closure (the fused kernel, or the same
// formula from differentiable ops in a create_graph pass).
#include <tapegrad/layers/functional/local_response_norm.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/index_ops.h>
#include <tapegrad/core/ops/shape_ops.h>
#include <tapegrad/core/ops/view_ops.h>
#include <tapegrad/core/parallel.h>

namespace tapegrad::layers::functional {
namespace {

struct LrnDims {
  std::int64_t N, C, S, size;
  double alpha, beta, k;
  std::int64_t lo(std::int64_t c) const { return std::max<std::int64_t>(0, c - size / 2); }
  std::int64_t hi(std::int64_t c) const { return std::min<std::int64_t>(C - 1, c + (size - 1) / 2); }
  // samples per thread chunk: small inputs stay serial
  std::int64_t grain() const { return parallel_rows_grain(C * S); }
};

// D[n, c, s] = k + alpha/size · Σ_{c' in window(c)} x[n, c', s]²
template <class T>
void lrn_denominator(const T* x, const LrnDims& d, double* D) {
  parallel_for(d.N, d.grain(), [&](std::int64_t nb, std::int64_t ne) {
    std::vector<double> acc(static_cast<std::size_t>(d.S));
    for (std::int64_t n = nb; n < ne; ++n)
      for (std::int64_t c = 0; c < d.C; ++c) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t c2 = d.lo(c); c2 <= d.hi(c); ++c2) {
          const T* xr = x + (n * d.C + c2) * d.S;
          for (std::int64_t s = 0; s < d.S; ++s) acc[s] += static_cast<double>(xr[s]) * xr[s];
        }
        double* Dr = D + (n * d.C + c) * d.S;
        for (std::int64_t s = 0; s < d.S; ++s) Dr[s] = d.k + d.alpha / static_cast<double>(d.size) * acc[s];
      }
  });
}

template <class T>
void lrn_backward(const T* g, const T* x, const double* D, const LrnDims& d, T* gx) {
  const double coef = 2.0 * d.alpha * d.beta / static_cast<double>(d.size);
  parallel_for(d.N, d.grain(), [&](std::int64_t nb, std::int64_t ne) {
    // u[c, s] = dy·x·D^(-beta-1): what each channel's output sends back to its window
    std::vector<double> u(static_cast<std::size_t>(d.C * d.S)), acc(static_cast<std::size_t>(d.S));
    for (std::int64_t n = nb; n < ne; ++n) {
      const std::int64_t base = n * d.C * d.S;
      for (std::int64_t i = 0; i < d.C * d.S; ++i)
        u[i] = static_cast<double>(g[base + i]) * x[base + i] * std::pow(D[base + i], -d.beta - 1.0);
      for (std::int64_t j = 0; j < d.C; ++j) {
        // channels c whose window holds j: c - size/2 <= j <= c + (size-1)/2
        const std::int64_t cb = std::max<std::int64_t>(0, j - (d.size - 1) / 2);
        const std::int64_t ce = std::min<std::int64_t>(d.C - 1, j + d.size / 2);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t c = cb; c <= ce; ++c)
          for (std::int64_t s = 0; s < d.S; ++s) acc[s] += u[c * d.S + s];
        for (std::int64_t s = 0; s < d.S; ++s) {
          const std::int64_t i = base + j * d.S + s;
          // term 1: direct path dy_j·D_j^-beta; term 2: through the squares in the windows
          gx[i] = static_cast<T>(g[i] * std::pow(D[i], -d.beta) - coef * x[i] * acc[s]);
        }
      }
    }
  });
}

// Σ over the channel window of each output channel, from differentiable ops: x (N, C, S) padded
// with `front` zero channels before and `back` after, then the sum of its `front + back + 1`
// shifts of C channels (out[c] = Σ_{c' = c - front}^{c + back} x[c'], absent channels 0).
Tensor window_sum(const Tensor& x, std::int64_t front, std::int64_t back) {
  const std::int64_t N = x.size(0), C = x.size(1), S = x.size(2);
  std::vector<Tensor> parts;
  if (front > 0) parts.push_back(Tensor::zeros({N, front, S}, x.dtype()));
  parts.push_back(x);
  if (back > 0) parts.push_back(Tensor::zeros({N, back, S}, x.dtype()));
  const Tensor padded = parts.size() == 1 ? x : cat(parts, 1);
  Tensor out = narrow(padded, 1, 0, C);
  for (std::int64_t t = 1; t <= front + back; ++t) out = add(out, narrow(padded, 1, t, C));
  return out;
}

// The create_graph backward, the fused kernel's formula from differentiable ops (x, g: (N, C, S)):
//   D  = k + α/n·W(x²),  W = the window sum of channels c - n/2 .. c + (n-1)/2
//   dx = g·D^-β − (2αβ/n)·x·Wᵀ(g·x·D^(-β-1)),  Wᵀ = the window c - (n-1)/2 .. c + n/2
// (y = x·D^-β differentiated by the product and chain rules; PyTorch composes LRN from
// differentiable ops, torch/nn/functional.py, so its double backward is of the same function).
Tensor lrn_backward_differentiable(const Tensor& g, const Tensor& x, const LrnDims& d) {
  const double n = static_cast<double>(d.size);
  const Tensor D = add(mul(window_sum(square(x), d.size / 2, (d.size - 1) / 2), d.alpha / n), d.k);
  const Tensor term1 = mul(g, pow(D, -d.beta));  // term 1: the direct path
  const Tensor u = mul(mul(g, x), pow(D, -d.beta - 1.0));
  // term 2: through the squares in the windows that hold each channel
  const Tensor term2 = mul(mul(x, window_sum(u, (d.size - 1) / 2, d.size / 2)), 2.0 * d.alpha * d.beta / n);
  return sub(term1, term2);
}

}  // namespace

Tensor local_response_norm(const Tensor& x, std::int64_t size, double alpha, double beta, double k) {
  if (!x.defined() || x.dim() < 3)
    throw std::invalid_argument("local_response_norm: expected input of shape (N, C, *) with 3 or more dims, got " +
                                (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor")));
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(std::string("local_response_norm: expected a float input, got ") +
                                dtype_name(x.dtype()));
  if (size < 1) throw std::invalid_argument("local_response_norm: size must be >= 1, got " + std::to_string(size));
  std::int64_t S = 1;
  for (std::int64_t i = 2; i < x.dim(); ++i) S *= x.size(i);
  const LrnDims d{x.size(0), x.size(1), S, size, alpha, beta, k};
  auto D = std::make_shared<std::vector<double>>(static_cast<std::size_t>(x.numel()));
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "local_response_norm", [&] {
    const scalar_t* xp = x.data<scalar_t>();
    scalar_t* yp = out.data<scalar_t>();
    lrn_denominator<scalar_t>(xp, d, D->data());
    const double* Dp = D->data();
    parallel_for(x.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) yp[i] = static_cast<scalar_t>(xp[i] * std::pow(Dp[i], -beta));
    });
  });
  if (autograd::needs_grad({&x}))
    autograd::record(
        "local_response_norm", out, {x},
        [x = x.detach(), xg = x, d, D](const Tensor& g, GradSink& gs) {
          if (autograd::creating_graph()) {  // x with its graph, so the gradient carries one
            const Shape s3{d.N, d.C, d.S};
            gs.add(0, reshape(lrn_backward_differentiable(reshape(g, s3), reshape(xg, s3), d), xg.shape()));
            return;
          }
          Tensor gx = Tensor::empty(x.shape(), x.dtype());
          TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "local_response_norm_backward", [&] {
            lrn_backward<scalar_t>(g.data<scalar_t>(), x.data<scalar_t>(), D->data(), d, gx.data<scalar_t>());
          });
          gs.add(0, std::move(gx));
        },
        autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

}  // namespace tapegrad::layers::functional
