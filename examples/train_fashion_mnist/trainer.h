#pragma once
// Fashion-MNIST trainer: the data, model and checkpoint choices of the train_fashion_mnist
// binary around the training room's fit() (tapegrad/train/fit.h), kept in a library so the
// tests run the same code.
//
// Data: the training file's first `limit` images (all when 0); `val_size` of them held out
// at random for validation (default 5,000, or a tenth with --limit); pixels /255 then
// standardised with the mean and std of the remaining training images only. The test
// split (10,000 images) is only used once, at the end, with the best checkpoint's weights
// when a checkpoint path is given, else the last weights.
// Model: 784 -> [Linear -> norm -> ReLU -> Dropout(p)] per hidden width -> Linear(10);
// loss: cross-entropy on the logits.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cnn_model.h"
#include <tapegrad/data/fashion_mnist.h>
#include "evaluation.h"
#include <tapegrad/layers/sequential.h>

namespace fmnist {

struct Config {
  std::string data_dir = tapegrad::data::kFashionMnistDir;
  int epochs = 15;
  std::int64_t batch_size = 128;
  std::optional<double> lr;      ///< default per optimizer: sgd 0.1, adam/adamw 1e-3
  std::string optimizer = "adam";  ///< sgd (momentum 0.9) | adam | adamw (weight decay 1e-2)
  std::string model = "mlp";       ///< mlp | cnn (models::CNN, see cnn_model.h)
  CNNConfig cnn;                   ///< the CNN's widths (--model cnn)
  std::string norm = "batch";      ///< none | batch | layer (mlp); also group | instance (cnn)
  /// none | cosine: the lr follows CosineAnnealingLR(T_max = epochs), stepped per epoch.
  std::string schedule = "cosine";
  double dropout = 0.2;
  std::vector<std::int64_t> hidden = {256, 128};
  std::uint64_t seed = 0;
  /// Training checkpoints (optim/training_checkpoint.h: weights, buffers, optimizer state,
  /// epoch, generator state): the best epoch by validation accuracy to <checkpoint>, the
  /// latest to <checkpoint>.last, both rewritten atomically after each epoch.
  std::string checkpoint;
  /// Continue from a checkpoint (normally <checkpoint>.last) exactly as the uninterrupted
  /// run would have: same batches, dropout masks and updates, bit for bit, with the same
  /// options and thread count. A different architecture or optimizer throws (strict load);
  /// with --checkpoint set, the best so far is re-measured from that file.
  std::string resume;
  int threads = 0;         ///< 0: leave the default (all cores)
  std::int64_t limit = 0;  ///< use only the first N training images (0: all)
  std::int64_t val_size = -1;  ///< -1: 5,000, or limit/10 when limit is set
  /// Stop after this many epochs in this invocation (to simulate an interruption).
  std::optional<int> stop_after;
  bool progress = true;  ///< progress bar on a terminal (ignored when stderr is not a tty)
  /// Data-parallel runtime (tapegrad/train/data_parallel.h: make_mpi_data_parallel); null:
  /// one process. batch_size is then the global batch and must be divisible by the world size.
  std::shared_ptr<DataParallel> parallel;
};

/// Parses "256,128" into {256, 128}; throws std::invalid_argument naming `flag` and the bad item
/// (an empty item, a trailing comma, a non-integer or a value < 1).
std::vector<std::int64_t> parse_hidden(const std::string& text, const std::string& flag = "--hidden");

struct EpochStats {
  int epoch = 0;  ///< 1-based
  double train_loss = 0;
  double val_accuracy = 0;
  double val_loss = 0;  ///< mean cross-entropy over the validation images
  double seconds = 0;             ///< wall time of the training steps (no validation)
  double samples_per_second = 0;  ///< global batch rows per wall second of training steps
  double cpu_seconds = 0;         ///< this process's CPU time (user + sys) in the training steps
  double val_seconds = 0;         ///< wall time of the validation pass
};

struct Result {
  std::vector<EpochStats> history;  ///< epochs run by this invocation
  int best_epoch = 0;
  double best_val_accuracy = 0;
  double test_accuracy = 0;
  /// confusion[true][pred] over the test split.
  std::vector<std::vector<std::int64_t>> confusion;
  /// The final model's state_dict (copies), after the last epoch (not the best weights).
  std::vector<std::pair<std::string, tapegrad::Tensor>> final_state;
  int epochs_done = 0;  ///< counting restored epochs
};

/// Builds the MLP (or, with model = "cnn", the CNN of cnn_model.h) for `config` (weights
/// from init, dropout masks from drop). Throws std::runtime_error naming the widths when the
/// parameters do not fit in memory.
std::shared_ptr<tapegrad::layers::Sequential> build_model(const Config& config, std::int64_t in_features,
                                                          std::int64_t classes, tapegrad::Generator& init,
                                                          tapegrad::Generator* drop);


/// The learning rate the run uses: config.lr, else the optimizer's default (sgd 0.1, adam and
/// adamw 1e-3).
double learning_rate(const Config& config);

/// Trains as the config says, logging through spdlog. Throws std::runtime_error for
/// missing data (naming the Debian package), std::invalid_argument for bad options.
Result train(const Config& config);

/// The confusion matrix as aligned text with class names.
std::string format_confusion(const std::vector<std::vector<std::int64_t>>& confusion);

}  // namespace fmnist
