#include "cnn_model.h"

#include <cmath>
#include <stdexcept>

#include "layers/flatten.h"
#include "models/cnn.h"

namespace fmnist {

std::shared_ptr<tapegrad::layers::Sequential> build_cnn(const CNNConfig& c, const std::string& norm,
                                                        std::int64_t in_features, std::int64_t classes,
                                                        tapegrad::Generator& init) {
  using namespace tapegrad;
  const auto side = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(in_features))));
  if (side * side != in_features)
    throw std::invalid_argument("--model cnn: expected square images, got " + std::to_string(in_features) +
                                " features per image");
  models::CNNOptions o;
  o.height = o.width = side;
  o.channels = c.channels;
  o.hidden = c.head;
  o.num_classes = classes;
  o.norm = models::parse_conv_norm(norm);
  o.groups = c.groups;
  auto model = std::make_shared<layers::Sequential>();
  model->push_back(std::make_shared<layers::Unflatten>(1, Shape{1, side, side}));
  model->push_back(std::make_shared<models::CNN>(o, init));
  return model;
}

}  // namespace fmnist
