#pragma once
// What a Fashion-MNIST training checkpoint holds beside the training state, so that the
// file alone reproduces the model's predictions:
//   extras   "preprocess.mean", "preprocess.std" (float64, shape [1]: one value for all
//            pixels, from the training images only), "preprocess.feature_shape" (int64
//            [784]): data::Standardizer::state_dict() under the prefix "preprocess.", stored
//            as "extra/preprocess.mean" ... (optim/training_checkpoint.h);
//   metadata "preprocess" (the recipe: x = pixels / 255, input = (x - mean) / std),
//            "fmnist.hidden" ("256,128"), "fmnist.norm", "fmnist.dropout" (%.17g),
//            "fmnist.epochs" (the epochs the run was planned for: the cosine schedule's
//            T_max), "fmnist.schedule", "fmnist.lr" (%.17g), "fmnist.batch_size",
//            "fmnist.optimizer" (a resume with another --optimizer, --lr, --batch-size or
//            --dropout is refused).
// Reading it back with numpy/PyTorch: mean = f.get_tensor("extra/preprocess.mean") etc.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <tapegrad/data/dataset.h>
#include <tapegrad/optim/training_checkpoint.h>
#include "trainer.h"

namespace fmnist {

/// The extras save_training_checkpoint writes for this run (see above).
tapegrad::optim::CheckpointExtras checkpoint_extras(const Config& config, const tapegrad::data::Standardizer& s);

/// What a checkpoint says about its run. Fields are empty when an older file lacks them.
struct CheckpointInfo {
  std::optional<tapegrad::data::Standardizer> standardizer;
  std::optional<Config> architecture;  ///< hidden, norm, dropout, epochs, schedule set
  std::optional<double> learning_rate;     ///< "fmnist.lr": the run's --lr (or its optimizer's default)
  std::optional<std::int64_t> batch_size;  ///< "fmnist.batch_size": the run's --batch-size
  std::optional<std::string> optimizer;    ///< "fmnist.optimizer": sgd | adam | adamw
};

/// Reads the preprocessing and architecture of a training checkpoint. Throws
/// std::runtime_error for an unreadable file, std::invalid_argument for malformed values
/// (naming the key and the value).
CheckpointInfo read_checkpoint_info(const std::string& path);

/// Predictions from a checkpoint alone: rebuilds the model from its metadata, loads the
/// weights and buffers (strict), standardises `raw` (pixels / 255, as load_fashion_mnist
/// returns them) with the stored statistics and returns the test accuracy (and the
/// confusion matrix). Throws std::invalid_argument when the file lacks the preprocessing
/// or the architecture. With `parallel`, every rank reads the file and evaluates its
/// share of the batches (evaluate_model), with the single-process result.
double evaluate_checkpoint(const std::string& path, const tapegrad::data::Dataset& raw,
                           std::vector<std::vector<std::int64_t>>* confusion = nullptr,
                           DataParallel* parallel = nullptr);

}  // namespace fmnist
