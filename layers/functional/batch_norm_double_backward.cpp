// batch_norm's backward written with differentiable ops (the create_graph path); the fused
// first-order kernels stay in batch_norm.cpp.
#include <tapegrad/layers/functional/batch_norm_double_backward.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/reduce.h>
#include <tapegrad/core/ops/shape_ops.h>
#include <tapegrad/core/ops/unary.h>

namespace tapegrad::layers::functional::detail {
namespace {
// (1, C, 1, ..., 1): a per-channel tensor broadcast against x.
Shape channel_shape(const Tensor& x) {
  Shape s(static_cast<std::size_t>(x.dim()), 1);
  s[1] = x.size(1);
  return s;
}
// Every dimension but C.
std::vector<std::int64_t> reduced_axes(const Tensor& x) {
  std::vector<std::int64_t> axes{0};
  for (std::int64_t d = 2; d < x.dim(); ++d) axes.push_back(d);
  return axes;
}
}  // namespace

void batch_norm_backward_differentiable(const Tensor& g, const Tensor& x, const Tensor& weight, const double* running_mean,
                                        const double* rstd, bool train, double eps, GradSink& gs, const char* who,
                                        const std::function<Tensor(const Tensor&)>* across, double count) {
  const std::int64_t C = x.size(1);
  const Shape cs = channel_shape(x);
  const std::vector<std::int64_t> axes = reduced_axes(x);
  // the per-channel mean of t, (1, C, 1, ...): over x, or over the whole batch through `across`
  auto batch_mean = [&](const Tensor& t) {
    return across ? reshape(mul((*across)(sum(t, axes)), 1.0 / count), cs) : mean(t, axes, true);
  };
  Tensor mu, invstd;
  if (train) {
    for (std::int64_t c = 0; c < C; ++c)
      if (rstd[c] == 0)
        throw std::logic_error(std::string(who) + ": no double backward for channel " + std::to_string(c) +
                               ", whose variance + eps is 0 (a constant channel with eps = 0)");
    // μ and σ² (biased) from x itself: the second derivative flows through the statistics
    mu = batch_mean(x);
    const Tensor xc = sub(x, mu);
    invstd = rsqrt(add(batch_mean(square(xc)), eps));
  } else {  // eval: the running statistics are constants
    mu = Tensor::from_vector(std::vector<double>(running_mean, running_mean + C), cs, Dtype::Float64).to(x.dtype());
    invstd = Tensor::from_vector(std::vector<double>(rstd, rstd + C), cs, Dtype::Float64).to(x.dtype());
  }
  const Tensor xhat = mul(sub(x, mu), invstd);  // x̂ = (x − μ)·invstd
  if (gs.needs(1)) gs.add(1, sum(mul(g, xhat), axes));  // dγ = Σ g·x̂
  if (gs.needs(2)) gs.add(2, sum(g, axes));             // dβ = Σ g
  if (!gs.needs(0)) return;
  const Tensor scale = weight.defined() ? mul(reshape(weight, cs), invstd) : invstd;  // γ·invstd
  if (!train) {
    gs.add(0, mul(g, scale));  // the direct path only: the statistics are constants
    return;
  }
  // dx = (γ·invstd/m)·(m·g − Σg − x̂·Σ(g·x̂)) = γ·invstd·(g − mean(g) − x̂·mean(g·x̂)):
  //   term 1 (direct path)        γ·invstd·g
  //   term 2 (through μ)         −γ·invstd·mean(g)
  //   term 3 (through σ²)        −γ·invstd·x̂·mean(g·x̂)
  const Tensor t2 = batch_mean(g);
  const Tensor t3 = mul(xhat, batch_mean(mul(g, xhat)));
  gs.add(0, mul(scale, sub(sub(g, t2), t3)));
}

}  // namespace tapegrad::layers::functional::detail
