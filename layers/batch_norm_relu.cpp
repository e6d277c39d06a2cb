#include <tapegrad/layers/batch_norm_relu.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace tapegrad::layers {

namespace {
std::optional<std::pair<double, double>> checked_clip(std::optional<std::pair<double, double>> clip) {
  if (clip && !(clip->first <= 0 && clip->second >= 0))  // also refuses NaN
    throw std::invalid_argument("BatchNorm1dReLU: expected a clip with lo <= 0 <= hi, got lo=" +
                                std::to_string(clip->first) + ", hi=" + std::to_string(clip->second));
  return clip;
}
}  // namespace

BatchNorm1dReLU::BatchNorm1dReLU(std::int64_t num_features, BatchNormOptions options,
                                 std::optional<std::pair<double, double>> clip)
    : BatchNorm1d(num_features, options), clip(checked_clip(clip)) {}

BatchNorm1dReLU::BatchNorm1dReLU(const BatchNorm1d& bn, std::optional<std::pair<double, double>> clip)
    : BatchNorm1d(bn, ShareState{}), clip(checked_clip(clip)) {}

std::shared_ptr<BatchNorm1dReLU> BatchNorm1dReLU::sharing(const BatchNorm1d& bn,
                                                          std::optional<std::pair<double, double>> clip) {
  return std::shared_ptr<BatchNorm1dReLU>(new BatchNorm1dReLU(bn, clip));
}

std::string BatchNorm1dReLU::extra_repr() const {
  std::string s = BatchNorm1d::extra_repr();
  if (clip) {
    std::ostringstream os;
    os << ", clip=(" << clip->first << ", " << clip->second << ")";
    s += os.str();
  }
  return s;
}

}  // namespace tapegrad::layers
