// grouped_norm's backward written with differentiable ops (the create_graph path); the fused
// first-order kernels stay in grouped_norm.cpp and kernels/cpu/layer_norm_rows.cpp.
#include <tapegrad/layers/functional/grouped_norm_double_backward.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/reduce.h>
#include <tapegrad/core/ops/shape_ops.h>
#include <tapegrad/core/ops/unary.h>

namespace tapegrad::layers::functional::detail {

void grouped_norm_backward_differentiable(const Tensor& g, const Tensor& x, const Tensor& weight, const Shape& bias_shape,
                                          std::int64_t C, std::int64_t S, std::int64_t G, double eps,
                                          const double* rstd, GradSink& gs, const char* op) {
  const std::int64_t Cg = C / G, N = x.numel() / (C * S), R = N * G;
  for (std::int64_t r = 0; r < R; ++r)
    if (!std::isfinite(rstd[r]))
      throw std::logic_error(std::string(op) + ": no double backward for group " + std::to_string(r % G) +
                             " of sample " + std::to_string(r / G) +
                             ", whose variance + eps is 0 (a constant group with eps = 0)");
  const Shape view{N, G, Cg, S};
  const std::vector<std::int64_t> row_axes{2, 3};      // one row: Cg channels x S positions
  const std::vector<std::int64_t> channel_axes{0, 3};  // one affine channel: every sample and position
  const Tensor xv = reshape(x, view);
  const Tensor gv = reshape(g, view);
  // μ and σ² (biased) per row from x itself: the second derivative flows through the statistics
  const Tensor xc = sub(xv, mean(xv, row_axes, true));
  const Tensor invstd = rsqrt(add(mean(square(xc), row_axes, true), eps));
  const Tensor xhat = mul(xc, invstd);  // x̂ = (x − μ)·rstd
  if (gs.needs(1)) gs.add(1, reshape(sum(mul(gv, xhat), channel_axes), weight.shape()));  // dγ = Σ g·x̂
  if (gs.needs(2)) gs.add(2, reshape(sum(gv, channel_axes), bias_shape));               // dβ = Σ g
  if (!gs.needs(0)) return;
  const Tensor gh = weight.defined() ? mul(gv, reshape(weight, Shape{1, G, Cg, 1})) : gv;  // dx̂ = γ·g
  // dx = rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)):
  //   term 1 (direct path)   rstd·dx̂
  //   term 2 (through μ)    −rstd·mean(dx̂)
  //   term 3 (through σ²)   −rstd·x̂·mean(dx̂·x̂)
  const Tensor t2 = mean(gh, row_axes, true);
  const Tensor t3 = mul(xhat, mean(mul(gh, xhat), row_axes, true));
  gs.add(0, reshape(mul(invstd, sub(sub(gh, t2), t3)), x.shape()));
}

}  // namespace tapegrad::layers::functional::detail
