#include "kit/mode_bug_catalogue.h"

namespace studies::kit {

const std::vector<BugInfo>& catalogue() {
  static const std::vector<BugInfo> bugs{
      {Bug::TrainModeInference, "Inference in train mode", "inference in train mode",
       "a test sample's prediction changes with its batch companions; a batch of one is refused"},
      {Bug::ForgottenTrain, "train() forgotten after validation", "train() forgotten after validation",
       "from epoch 2 on the net trains in eval mode: BN normalises with frozen running statistics"},
      {Bug::TestLeak, "Test data evaluated in train mode (the chapter's loop)", "test data through train-mode BN",
       "the test batch's statistics are written into the running statistics; the printed test loss uses "
       "batch statistics"},
      {Bug::MomentumMixup, "Momentum convention mixed up (0.99 given where 0.01 was meant)",
       "momentum 0.99 where 0.01 was meant",
       "running statistics track only the last batch (8 samples at the end of each epoch)"},
      {Bug::BiasedVariance, "Biased running variance", "biased running variance",
       "running_var fed with sum((x-mean)^2)/m instead of /(m-1): scaled by about (m-1)/m"},
      {Bug::CheckpointNoBuffers, "Checkpoint saved without buffers, loaded non-strictly",
       "checkpoint without buffers, non-strict load", "running statistics back at their init values (mean 0, var 1)"},
      {Bug::FrozenFinetune, "Frozen BN while fine-tuning (eval-mode BN, trainable gamma/beta) vs train-mode BN",
       "frozen BN while fine-tuning on shifted inputs",
       "after a shift of the inputs, frozen BN keeps the old domain's statistics"},
      {Bug::WrongBackward, "Wrong BN backward (mutants in tests/debug/test_mutants.cpp)", "",
       "statistics held constant / mean over the wrong axis / N-1 variance in the backward"},
  };
  return bugs;
}

const BugInfo& info(Bug b) {
  for (const auto& e : catalogue())
    if (e.bug == b) return e;
  return catalogue().front();  // unreachable: every Bug has an entry
}

}  // namespace studies::kit
