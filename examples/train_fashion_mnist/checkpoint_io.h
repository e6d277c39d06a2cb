#pragma once
// The trainer's checkpoint: everything needed to continue a run exactly — model
// parameters and buffers (running statistics, num_batches_tracked), optimizer state,
// the epoch counter, the best validation accuracy so far, and the states of the
// generators that shuffle the data and draw dropout masks.
#include <string>

#include "core/random.h"
#include "layers/module.h"
#include "optim/optimizer.h"
#include "trainer.h"

namespace fmnist {

/// Progress of a run, saved with each checkpoint.
struct TrainingState {
  int epoch = 0;                    ///< epochs completed
  int best_epoch = 0;               ///< 0: none yet
  double best_val_accuracy = -1.0;  ///< -1: none yet
};

/// Writes the checkpoint atomically (an interrupted write leaves the old file intact).
void save_training_checkpoint(const std::string& path, const Config& config, const TrainingState& state,
                              const tapegrad::layers::Module& model, const tapegrad::optim::Optimizer& opt,
                              const tapegrad::Generator& data_gen, const tapegrad::Generator& drop_gen);

/// Restores a checkpoint into model, optimizer and generators. Checks that it was written
/// for the same architecture, optimizer and data (hidden sizes, norm, dropout, optimizer,
/// seed, limit) and throws std::runtime_error naming the first difference (nothing is
/// changed then); the model and optimizer loads are strict.
TrainingState load_training_checkpoint(const std::string& path, const Config& config,
                                       tapegrad::layers::Module& model, tapegrad::optim::Optimizer& opt,
                                       tapegrad::Generator& data_gen, tapegrad::Generator& drop_gen);

/// Loads only the model's parameters and buffers (for evaluating the best checkpoint).
void load_model_weights(const std::string& path, tapegrad::layers::Module& model);

}  // namespace fmnist
