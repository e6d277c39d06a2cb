#pragma once
// The module-mode bug catalogue: every bug the studies reproduce, named once. The chapter's
// table (studies/mode_bugs, measured by kit/mode_bugs.h on the regression task) and
// norm_study's Fashion-MNIST table (norm_study mode-bugs) both take their row names from here.
#include <string>
#include <vector>

namespace studies::kit {

enum class Bug {
  TrainModeInference,   ///< inference with the model left in train mode
  ForgottenTrain,       ///< train() not called again after an eval-mode validation
  TestLeak,             ///< test data evaluated in train mode (no grad): running stats absorb it
  MomentumMixup,        ///< a decay (0.99) passed where PyTorch's momentum (0.01) was meant
  BiasedVariance,       ///< running_var fed the biased (divide by m) batch variance
  CheckpointNoBuffers,  ///< checkpoint without buffers, loaded non-strictly
  FrozenFinetune,       ///< BatchNorm frozen (eval mode) while fine-tuning on shifted inputs
  WrongBackward,        ///< a wrong BatchNorm backward derivation
};

struct BugInfo {
  Bug bug;
  std::string title;  ///< the chapter table's row (studies/mode_bugs); some rows add ", batch m"
  std::string name;   ///< norm_study's row and CSV name (empty: not measured there)
  std::string effect;  ///< what the bug does
};

/// Every bug, in table order.
const std::vector<BugInfo>& catalogue();
/// The entry of `b`.
const BugInfo& info(Bug b);

}  // namespace studies::kit
