#include "flat_grads.h"

#include <cmath>
#include <cstddef>

namespace claims {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double dist(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(s);
}

double grad_norm(const FlatGrads& G) {
  double s = 0;
  for (const auto& g : G) s += dot(g, g);
  return std::sqrt(s);
}

double grad_dist(const FlatGrads& G, const FlatGrads& Gp) {
  double s = 0;
  for (std::size_t j = 0; j < G.size(); ++j) s += dist(G[j], Gp[j]) * dist(G[j], Gp[j]);
  return std::sqrt(s);
}

}  // namespace claims
