#pragma once
// Deep copies of modules, the building block of the inference rewrites (fuse_batch_norm.h).
#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// A new module of the same kind with the same hyperparameters, its own copies of every
/// parameter and buffer (same values, dtype and requires_grad) and the same train/eval mode.
/// Known kinds: Sequential (and the models built on it, MLP and CNN, which come back as a
/// plain Sequential with the same children and state_dict keys), Linear, Conv2d,
/// BatchNorm1d/2d, LayerNorm, GroupNorm, InstanceNorm1d/2d, ReLU, Sigmoid, Tanh, LeakyReLU,
/// GELU, Clamp, Dropout (the copy draws its masks from the default generator), Identity,
/// Flatten, Unflatten, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d.
/// Throws std::invalid_argument naming the module's path and type for any other kind
/// (e.g. "cannot copy module '2' (SyncBatchNorm)"). `path` prefixes those messages.
ModulePtr clone_module(const Module& m, const std::string& path = "");

}  // namespace tapegrad::layers
