#pragma once
// The golden runner's second-order kinds (tests/golden/README.md): "double_backward" (a
// module's first-order gradients taken with create_graph, then the gradients of a weighted
// sum of them), "hvp" (Hessian-vector products of a Sequential's mean loss) and
// "gradient_penalty" (the WGAN-GP penalty of a Sequential critic and its parameter gradient).
#include <string>

#include "golden_runner/outcome.h"
#include "golden_runner/support.h"

namespace golden {

/// Whether `kind` is one of the second-order kinds run_second_order_case knows.
bool is_second_order_kind(const std::string& kind);

/// Runs one case of a second-order kind in `dtype` and compares every array the case gives
/// (within `tol`), appending a message per difference to o.failures. A module, loss or layer
/// type with no factory is a failure naming the type (never a skip). Throws what tapegrad
/// throws (the caller reports it against the case).
void run_second_order_case(Outcome& o, const std::string& where, const json& c, tapegrad::Dtype dtype,
                           const Tolerance& tol);

}  // namespace golden
