#pragma once
// The chapter's regression task as the mode-bug measurements train it: the data, the net
// (models::MLP), and the SGD loop with its validation variants (kit/mode_bugs.h).
//
// Task: X ~ N(0, 1) of shape (n, 50), y = chapter_target(x0, x1, ε) = sin(2·x0) + cos(x1) +
// 0.1·ε (n, 1), 200 train and 100 test samples (drawn as X, then ε, per split: the draws
// the mode-bug tables were measured with; studies::kit::make_chapter_data draws row by row);
// net Linear-BN-ReLU [50, 128, 64, 32, 1]; SGD lr 0.01, batch 32.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <tapegrad/layers/sequential.h>

namespace studies::kit {

struct RegressionData {
  tapegrad::Tensor x_train, y_train, x_test, y_test;  ///< (n, 50) and (n, 1), float32
};
/// The chapter's data, drawn from Generator(seed): X_train, noise_train, X_test, noise_test.
RegressionData make_regression_data(std::uint64_t seed = 0, std::int64_t n_train = 200, std::int64_t n_test = 100,
                                    std::int64_t features = 50);
/// The same task after a per-feature affine change of the inputs (x' = a·x + b, a ~ U[0.5, 2],
/// b ~ U[-1, 1], fixed by seed); the targets are those of the unchanged x. For fine-tuning.
RegressionData make_shifted_data(std::uint64_t seed = 7);

struct NetOptions {
  std::vector<std::int64_t> sizes = {50, 128, 64, 32, 1};
  std::optional<double> momentum = 0.1;  ///< BatchNorm momentum, PyTorch convention
  /// BatchNorm running_var fed with the biased batch variance (divide by m) instead of
  /// PyTorch's unbiased one (m - 1): the other frameworks' convention, for comparison.
  bool biased_running_var = false;
  std::uint64_t seed = 1;  ///< weight init
};
/// Linear -> BatchNorm1d -> ReLU per hidden layer, then Linear (children "0", "1", ...;
/// the BatchNorms are "1", "4", "7").
std::shared_ptr<tapegrad::layers::Sequential> make_net(const NetOptions& options = {});
/// Paths of the net's BatchNorm modules.
std::vector<std::string> batch_norm_paths(tapegrad::layers::Module& net);

/// What the loop does after each epoch's training batches.
enum class Validation {
  None,
  Correct,         ///< eval(), no-grad test loss, train()
  ForgetTrain,     ///< eval(), no-grad test loss, and train() is never called again
  TrainModeNoGrad  ///< no-grad test loss with the model left in train mode (the chapter's code)
};

struct TrainConfig {
  int epochs = 40;
  std::int64_t batch = 32;
  double lr = 0.01;
  std::uint64_t shuffle_seed = 2;
  Validation validation = Validation::Correct;
  /// Put every BatchNorm in eval mode at the start of each epoch (fine-tuning with frozen BN;
  /// γ and β stay trainable).
  bool freeze_bn = false;
};

struct TrainLog {
  std::vector<double> train_loss;  ///< mean minibatch loss per epoch (as the loop sees it)
  std::vector<double> val_loss;    ///< the test loss the loop computed (its own mode), per epoch
  std::vector<double> eval_loss;   ///< eval-mode test loss per epoch, measured without side effects
};

/// Trains `net` with SGD (MSE loss), shuffling with Generator(shuffle_seed). A last batch of
/// one sample is skipped (BatchNorm refuses it in train mode).
TrainLog train_regression(tapegrad::layers::Module& net, const RegressionData& data, const TrainConfig& config);

/// Eval-mode MSE of net on (x, y) with gradients off; every module's mode is restored and no
/// buffer changes.
double eval_mse(tapegrad::layers::Module& net, const tapegrad::Tensor& x, const tapegrad::Tensor& y);

}  // namespace studies::kit
