#include <tapegrad/debug/bn_grad_check.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace tapegrad::debug {

BnBackwardCheck bn_backward_invariants(const Tensor& x, const Tensor& dx) {
  if (!x.defined() || !dx.defined() || x.shape() != dx.shape() || x.dim() < 2) {
    std::string msg = "bn_backward_invariants: expected x and dx of one shape (N, C, *), got ";
    msg += x.defined() ? shape_str(x.shape()) : "undefined";
    msg += " and ";
    msg += dx.defined() ? shape_str(dx.shape()) : "undefined";
    throw std::invalid_argument(msg);
  }
  const std::int64_t N = x.size(0), C = x.size(1), S = x.numel() / std::max<std::int64_t>(N * C, 1);
  if (N * S < 2)
    throw std::invalid_argument("bn_backward_invariants: need at least 2 values per channel, got shape " +
                                shape_str(x.shape()));
  const auto vx = x.to_vector(), vd = dx.to_vector();
  auto at = [&](std::int64_t n, std::int64_t c, std::int64_t s) { return (n * C + c) * S + s; };
  BnBackwardCheck r;
  const double m = static_cast<double>(N * S);
  for (std::int64_t c = 0; c < C; ++c) {
    double mu = 0, var = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t s = 0; s < S; ++s) mu += vx[at(n, c, s)];
    mu /= m;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t s = 0; s < S; ++s) var += (vx[at(n, c, s)] - mu) * (vx[at(n, c, s)] - mu);
    const double sd = std::sqrt(var / m);
    double s1 = 0, a1 = 0, s2 = 0, a2 = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t s = 0; s < S; ++s) {
        const double d = vd[at(n, c, s)];
        const double xh = sd > 0 ? (vx[at(n, c, s)] - mu) / sd : 0.0;
        s1 += d;
        a1 += std::fabs(d);
        s2 += d * xh;
        a2 += std::fabs(d * xh);
      }
    if (a1 > 0) r.col_sum = std::max(r.col_sum, std::fabs(s1) / a1);
    if (a2 > 0) r.col_dot_xhat = std::max(r.col_dot_xhat, std::fabs(s2) / a2);
  }
  return r;
}

std::string BnBackwardCheck::to_string() const {
  std::ostringstream os;
  os << "max_c |sum dX|/sum|dX| = " << col_sum << ", max_c |sum dX*xhat|/sum|dX*xhat| = " << col_dot_xhat
     << (ok() ? " (ok)" : " (FAILED)");
  return os.str();
}

}  // namespace tapegrad::debug
