#pragma once
// The bn_buffers_not_loaded mode check (core/mode_checks.h) of a non-strict load.
#include <string>
#include <vector>

#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// For Module::load_state_dict with strict=false, before it writes anything: reports the
/// mode issue "bn_buffers_not_loaded" (a warning, or std::logic_error in Throw mode) when
/// `missing_keys` (the load's, with `model`'s key paths) holds the running_mean or
/// running_var of a norm module of `model` that tracks running statistics and that buffer
/// still has its initial values (0 / 1). The text names the modules ("BatchNorm1d(64) at
/// '1'") and the keys. Nothing with the checks off or paused.
void check_norm_buffers_loaded(Module& model, const std::vector<std::string>& missing_keys);

}  // namespace tapegrad::layers
