#pragma once
// Dropout (Srivastava et al. 2014), inverted as in PyTorch's nn.Dropout.
#include <tapegrad/core/random.h>
#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// Train mode: zeroes each element with probability p (default 0.5) and scales the kept
/// ones by 1/(1 - p), with a fresh mask on every call; the backward uses that call's
/// mask. p = 1 zeroes the output and the gradient. Eval mode: the identity (the input
/// tensor itself). Any shape. No parameters or buffers.
/// Masks are drawn from `generator` (which must outlive the module) or, when it is null,
/// from default_generator(); seed it for reproducible masks.
/// Throws std::invalid_argument when p is outside [0, 1] (naming p).
class Dropout : public Module {
 public:
  /// Dropout with probability `p` in [0, 1] (else std::invalid_argument), masks from
  /// `generator` (null: default_generator()).
  explicit Dropout(double p = 0.5, Generator* generator = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;

  double p;  ///< probability of zeroing an element in train mode

 private:
  Generator* gen_;
};

}  // namespace tapegrad::layers
