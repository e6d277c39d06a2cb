#include "cnn_model.h"

#include <cmath>
#include <new>
#include <stdexcept>

#include <tapegrad/layers/flatten.h>
#include <tapegrad/models/cnn.h>

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
  try {
    model->push_back(std::make_shared<models::CNN>(o, init));
  } catch (const std::bad_alloc&) {  // a huge --channels / --head: name them, not "std::bad_alloc"
    std::string widths;
    for (auto ch : c.channels) {
      if (!widths.empty()) widths += ',';
      widths += std::to_string(ch);  // appended: g++ 12's -Wrestrict misreads "," + std::string
    }
    throw std::runtime_error("--model cnn: out of memory allocating the parameters of --channels " + widths +
                             " --head " + std::to_string(c.head) + "; use smaller widths");
  }
  return model;
}

}  // namespace fmnist
