#pragma once
// Folding eval-mode BatchNorm into the Linear or Conv2d before it, for inference.
#include <memory>

#include <tapegrad/layers/sequential.h>

namespace tapegrad::layers {

/// What fuse_batch_norm did.
struct FuseReport {
  std::size_t fused = 0;  ///< BatchNorm layers folded into the layer before them
};

/// A copy of an eval-mode model in which every BatchNorm1d (or fuse_modules's BatchNorm1dReLU,
/// whose ReLU [and Clamp] then come back as modules in the places of its Identity children, so
/// a fused and an unfused model give the same copy) that directly follows a Linear,
/// and every BatchNorm2d that directly follows a Conv2d, in the same Sequential, is folded
/// into that layer's weights and removed. With s = γ/√(running_var + eps) per channel
/// (γ = 1, β = 0 without affine):
///   W' = s·W (each output row / output channel scaled),  b' = s·(b − running_mean) + β
/// (b = 0 when the layer has no bias; the fused layer always has one). The arithmetic is done
/// in float64 and rounded once to the model's dtype, so the copy's outputs equal the
/// original's within float32 rounding (tested: 1e-5 in float32, 1e-12 in float64, on every
/// model of models/). Everything else is copied (clone_module); the original is unchanged.
/// The result is a plain Sequential (an MLP or CNN comes back as Sequential) in eval mode;
/// child names are renumbered "0", "1", ... after the removed layers, so its state_dict keys
/// differ from the original's wherever a BatchNorm was removed.
/// Assumes, as in models/, that a Linear followed by BatchNorm1d sees (N, in_features): a
/// Linear over (N, L, C) followed by BatchNorm1d(L) is not a per-feature affine map of the
/// Linear's output and must not be fused (it is fused when L == out_features; avoid that).
/// Throws std::invalid_argument (naming the module's path and type) when any module is in
/// train mode (call eval() first), when a BatchNorm has no running statistics
/// (track_running_stats = false: eval mode then normalises with batch statistics, which no
/// weights can express), when a fused pair's widths differ, and for module kinds
/// clone_module cannot copy.
std::shared_ptr<Sequential> fuse_batch_norm(const Module& model, FuseReport* report = nullptr);

}  // namespace tapegrad::layers
