#pragma once
// The classification studies' epoch loop: minibatch steps (train_step) over a loader, the mean
// loss of each epoch, and a rule that may end the training early (a crash, a divergence).
#include <cstdint>
#include <functional>

#include <tapegrad/core/tensor.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/optim/optimizer.h>

namespace studies::kit {

/// What may end a training early: called after each step with the 1-based step count and the
/// step's loss; true ends the training there, that step's loss left out of the epoch's mean.
using StopRule = std::function<bool(std::int64_t step, double loss)>;
/// Called before each step with the 0-based step count and the batch (a probe, a schedule).
using BeforeStep = std::function<void(std::int64_t step, const tapegrad::Tensor& X, const tapegrad::Tensor& y)>;

/// `net` in train mode, then up to `epochs` passes over `loader`, one train_step (cross-entropy,
/// `opt`) per batch, until `stop` says so. Returns the mean loss of the last epoch's steps
/// (NaN when none counted).
double train_epochs(tapegrad::layers::Module& net, tapegrad::optim::Optimizer& opt, tapegrad::data::DataLoader& loader,
                    int epochs, const StopRule& stop, const BeforeStep& before_step = {});

}  // namespace studies::kit
