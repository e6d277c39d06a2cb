#pragma once
// The --model cnn choice of train_fashion_mnist: models::CNN behind an Unflatten that turns
// the loader's (N, 784) rows into (N, 1, 28, 28) images.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/layers/sequential.h>

namespace fmnist {

struct CNNConfig {
  std::vector<std::int64_t> channels = {32, 64};  ///< conv block widths (--channels)
  std::int64_t head = 128;                        ///< hidden width of the linear head (--head, 0: none)
  std::int64_t groups = 8;                        ///< GroupNorm groups (--norm group)
};

/// Sequential(Unflatten(1, {1, side, side}), models::CNN) with `norm` for the conv blocks
/// (none | batch | group | instance | layer), for square images of in_features = side²
/// pixels. Throws std::invalid_argument naming the value for a non-square in_features or
/// an unknown norm.
std::shared_ptr<tapegrad::layers::Sequential> build_cnn(const CNNConfig& config, const std::string& norm,
                                                        std::int64_t in_features, std::int64_t classes,
                                                        tapegrad::Generator& init);

}  // namespace fmnist
