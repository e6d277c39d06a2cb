#pragma once
// Fusing BatchNorm1d -> ReLU [-> Clamp] and ReLU -> Clamp into one module each, for training speed.
#include <cstddef>

#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// What fuse_modules did.
struct FuseModulesReport {
  std::size_t batch_norm_relu = 0;  ///< BatchNorm1d -> ReLU [-> Clamp] runs made into a BatchNorm1dReLU
  std::size_t relu_clamp = 0;       ///< ReLU -> Clamp pairs made into a ReLUClamp
};

/// Rewrites `model` in place so that, in every Sequential inside it (the model itself and
/// nested ones, at any depth), consecutive children of exactly these classes (not subclasses)
/// run as one op each, as torch.ao.quantization.fuse_modules does (there the patterns are
/// named; here they are found):
///   BatchNorm1d, ReLU [, Clamp(lo, hi) with lo <= 0 <= hi]  ->  BatchNorm1dReLU, Identity [, Identity]
///   ReLU, Clamp(lo, hi) with lo <= 0 <= hi                   ->  ReLUClamp, Identity
/// The first module of a pattern is replaced by the fused module, the others by Identity, so
/// child names and indices, the parameters and buffers (the same tensors: BatchNorm1dReLU
/// takes over the BatchNorm1d's handles, so an optimizer built before keeps working) and the
/// state_dict keys are unchanged: checkpoints load either way. Outputs and gradients have
/// the bits of the unfused model in float32 and float64, train and eval mode (tested);
/// each pattern saves a tape node and an allocation per forward. Other modules, a Clamp
/// whose bounds do not contain 0 (relu_clamp would not be a clamp of the ReLU), and
/// SyncBatchNorm are left alone; running it again changes nothing.
/// What changes: a forward hook sees the fused module's output (BatchNorm1dReLU: after the
/// activation) and Identity's in the other places, and anomaly mode records the fused op
/// under the fused module's name. Call it after building the model and after any module
/// swap (distributed::convert_sync_batchnorm refuses a fused model), before holding pointers
/// to its children. io::export_onnx writes the same graph for a fused model as for the
/// unfused one, and fuse_batch_norm folds a BatchNorm1dReLU like a BatchNorm1d.
/// Throws nothing for well-formed models.
FuseModulesReport fuse_modules(Module& model);

}  // namespace tapegrad::layers
