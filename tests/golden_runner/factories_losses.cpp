// Factories for the losses (MSELoss is registered with the skeleton's layers).
#include "golden_runner/support.h"
#include <tapegrad/layers/losses.h>

namespace golden {
namespace {

using namespace tapegrad;

const bool registered = [] {
  add_loss("CrossEntropyLoss", [](const json& a) -> LossFn {
    layers::CrossEntropyLoss l{layers::parse_reduction(a.value("reduction", "mean")), a.value("ignore_index", -100)};
    return [l](const Tensor& x, const Tensor& t) { return l(x, t); };
  });
  add_loss("NLLLoss", [](const json& a) -> LossFn {
    layers::NLLLoss l{layers::parse_reduction(a.value("reduction", "mean")), a.value("ignore_index", -100)};
    return [l](const Tensor& x, const Tensor& t) { return l(x, t); };
  });
  add_loss("BCEWithLogitsLoss", [](const json& a) -> LossFn {
    layers::BCEWithLogitsLoss l{layers::parse_reduction(a.value("reduction", "mean"))};
    return [l](const Tensor& x, const Tensor& t) { return l(x, t); };
  });
  return true;
}();

}  // namespace
}  // namespace golden
