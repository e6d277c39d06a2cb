#pragma once
// batch_norm's argument checks and the (N, C, S) view of its input, shared by the entry points
// of layers/functional/batch_norm.cpp (defined in batch_norm_checks.cpp). Internal.
#include <cstdint>
#include <string>

#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/functional/running_stats.h>

namespace tapegrad::layers::functional::detail {

/// x (N, C, *) viewed as (N, C, S): S is the product of the trailing sizes (1 for (N, C)).
struct BnDims {
  std::int64_t N, C, S;
};

/// The (N, C, S) view of x (x.dim() >= 2).
BnDims bn_dims_of(const Tensor& x);

/// What every batch_norm entry point checks first, once per call: x (N, C, *) floating,
/// weight / bias (C) of x's dtype when defined, eps >= 0 and finite, and the running
/// statistics (RunningStats::check: momentum, shapes, dtypes). Throws std::invalid_argument
/// naming `who`, the expected and the actual value.
BnDims bn_check_common(const std::string& who, const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const RunningStats& running, double eps);

}  // namespace tapegrad::layers::functional::detail
