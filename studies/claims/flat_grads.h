#pragma once
// Gradients as flat float64 vectors, one per parameter tensor, and the measures the ICS and
// landscape probes (deep_linear.h, mlp_probes.h) take of them.
#include <vector>

namespace claims {

using FlatGrads = std::vector<std::vector<double>>;

/// a·b.
double dot(const std::vector<double>& a, const std::vector<double>& b);
/// ‖a − b‖₂.
double dist(const std::vector<double>& a, const std::vector<double>& b);
/// ‖G‖₂ over every tensor: √(Σ_j G_j·G_j).
double grad_norm(const FlatGrads& G);
/// ‖G − G'‖₂ over every tensor: √(Σ_j ‖G_j − G'_j‖₂²).
double grad_dist(const FlatGrads& G, const FlatGrads& Gp);

}  // namespace claims
