#pragma once
// The options-struct convention of tapegrad's layers, libtorch's (torch::nn::Conv2dOptions):
// required arguments go to the options' constructor, every other one has a chainable
// setter of the same name that returns the options, and a getter of that name:
//   layers::Conv2d conv(layers::Conv2dOptions(1, 8, 3).stride(1).padding(1).bias(false), gen);
//   conv_options.padding()   // reads it back
// Defaults are PyTorch's. Values are checked by the module's constructor (as the
// positional constructors, which stay), not by the setters.
#include <utility>

/// Declares `T name_` with default `init`, a getter name() and a chainable setter name(v).
#define TAPEGRAD_ARG(T, name, ...)                      \
 public:                                                \
  auto& name(const T& new_##name) {                     \
    this->name##_ = new_##name;                         \
    return *this;                                       \
  }                                                     \
  const T& name() const noexcept { return this->name##_; } \
                                                        \
 private:                                               \
  T name##_ __VA_OPT__(= __VA_ARGS__)
