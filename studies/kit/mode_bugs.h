#pragma once
// The module-mode bugs on the chapter's regression task, each one reproduced and
// measured. Shared by studies/mode_bugs (which prints the table) and its tests.
//
// Task: X ~ N(0, 1) of shape (n, 50), y = sin(2·x0) + cos(x1) + 0.1·ε (n, 1), 200 train and
// 100 test samples; net Linear-BN-ReLU [50, 128, 64, 32, 1]; SGD lr 0.01, batch 32.
// Training runs only depend on seeds, so a correct and a buggy run start from the same
// weights and see the same batches; where a bug does not touch training (momentum,
// biased running variance) the weights are identical and only the running statistics differ.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kit/training.h"
#include <tapegrad/debug/bn_grad_check.h>
#include <tapegrad/layers/sequential.h>

namespace studies::kit {

// ---- the measurements ------------------------------------------------------------------

/// Inference in train mode.
struct TrainModeInference {
  double eval_dependence = 0;   ///< batch_dependence in eval mode (rounding only)
  double train_dependence = 0;  ///< the same test sample, random companions, train mode
  std::string batch_of_one_error;
  std::int64_t audit_bn_train_no_grad = 0;  ///< ModeAudit findings for one train-mode prediction
};
TrainModeInference measure_train_mode_inference(std::uint64_t seed = 0);

/// train() forgotten after validation vs the correct loop.
struct ForgottenTrain {
  TrainLog correct, buggy;
  double buggy_stats_change = 0;    ///< max |Δ| of running stats from epoch 1's end to the last epoch
  double correct_stats_change = 0;  ///< the same for the correct loop
  std::int64_t audit_step_in_eval = 0, audit_frozen_stats = 0;  ///< on the buggy loop
  std::int64_t audit_correct_issues = 0;                        ///< on the correct loop
};
ForgottenTrain measure_forgotten_train(int epochs = 40, std::uint64_t seed = 0);

/// Evaluating the test set in train mode (no-grad), as the chapter's code does.
struct TestLeak {
  double eval_before = 0;           ///< eval-mode test loss of the trained model
  double reported_loss = 0;         ///< the train-mode test loss the chapter's loop prints
  double eval_after_1 = 0;          ///< eval-mode test loss after one train-mode evaluation
  double eval_after_10 = 0;         ///< ... after ten
  double mean_change_1 = 0, var_change_1 = 0;    ///< max |Δ running_mean|, |Δ running_var| after one
  double mean_change_10 = 0, var_change_10 = 0;  ///< after ten
  std::vector<std::string> changed_buffers;       ///< buffers_changed keys after one evaluation
  std::int64_t audit_bn_train_no_grad = 0;        ///< findings during the ten evaluations
  std::int64_t audit_correct_issues = 0;          ///< findings for ten correct eval-mode evaluations
  bool correct_changed_buffers = false;           ///< whether the correct evaluations changed any buffer
};
TestLeak measure_test_leak(std::uint64_t seed = 0);

/// BatchNorm momentum convention mixed up.
struct MomentumMixup {
  double eval_intended = 0;  ///< momentum 0.01 (decay 0.99 converted correctly)
  double eval_mixed = 0;     ///< momentum 0.99 (the decay passed as a PyTorch momentum)
  double eval_default = 0;   ///< momentum 0.1 (PyTorch default)
  double gap_intended = 0, gap_mixed = 0, gap_default = 0;  ///< running_stats_gap worst mean gap (train set)
  double var_gap_intended = 0, var_gap_mixed = 0, var_gap_default = 0;  ///< worst |ln var ratio|
  double max_weight_diff = 0;  ///< between the three trained nets: 0 (momentum does not touch training)
};
MomentumMixup measure_momentum_mixup(int epochs = 40, std::uint64_t seed = 0);

/// Biased (divide by m) vs unbiased (m - 1) running variance at one batch size.
struct BiasedVariance {
  std::int64_t batch = 0;
  double eval_unbiased = 0, eval_biased = 0;
  double var_ratio = 0;  ///< mean over channels of running_var biased / unbiased (≈ (m-1)/m)
  double var_gap_unbiased = 0, var_gap_biased = 0;  ///< running_stats_gap worst |ln var ratio| (train set)
};
BiasedVariance measure_biased_variance(std::int64_t batch, int epochs, std::uint64_t seed = 0);

/// Checkpoint saved without buffers (layers::save(..., false), a temporary file), loaded
/// non-strictly into a freshly initialised model.
struct CheckpointNoBuffers {
  std::size_t missing_keys = 0;  ///< reported by load_state_dict (strict = false)
  std::vector<std::string> missing;
  double max_output_diff = 0;  ///< eval outputs, loaded vs real model, on the test set
  double eval_real = 0, eval_loaded = 0;
  std::size_t never_updated = 0;  ///< mode_report(loaded).never_updated().size()
  double gap_loaded = 0;          ///< running_stats_gap worst mean gap of the loaded model
  bool used_file = false;         ///< saved to and loaded from a safetensors file (layers/checkpoint.h)
  std::string strict_error;       ///< what a strict load of the same file says
};
CheckpointNoBuffers measure_checkpoint_without_buffers(std::uint64_t seed = 0);

/// Fine-tuning on shifted inputs with BatchNorm frozen (eval mode, γ/β trainable) vs train mode.
struct FrozenFinetune {
  double eval_before = 0;           ///< pretrained model on the shifted test set
  double eval_frozen = 0;           ///< after fine-tuning with frozen BN
  double eval_train_mode = 0;       ///< after fine-tuning with train-mode BN
  std::int64_t audit_step_in_eval = 0;       ///< frozen run, default audit
  std::int64_t audit_step_in_eval_allowed = 0;  ///< frozen run, allow_eval = the BN paths
};
FrozenFinetune measure_frozen_finetune(int pre_epochs = 40, int ft_epochs = 20, std::uint64_t seed = 0);

/// The chapter's backward checks on the real fused kernel: the first BatchNorm's input for
/// a training batch of 32 of a trained net, in float64, with a random upstream gradient.
tapegrad::debug::BnBackwardCheck measure_bn_backward_invariants(std::uint64_t seed = 0);

}  // namespace studies::kit
