// Factories for the normalisation family, Dropout and the activation modules (Softmax and
// LogSoftmax included).
#include <memory>

#include "golden_runner/support.h"
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/identity.h>
#include <tapegrad/layers/batch_renorm.h>
#include <tapegrad/layers/dropout.h>
#include <tapegrad/layers/group_norm.h>
#include <tapegrad/layers/instance_norm.h>
#include <tapegrad/layers/layer_norm.h>
#include <tapegrad/layers/local_response_norm.h>
#include <tapegrad/layers/softmax.h>

namespace golden {
namespace {

using namespace tapegrad;

layers::InstanceNormOptions in_options(const json& a, Dtype dtype) {
  layers::InstanceNormOptions o;
  o.eps = a.value("eps", 1e-5);
  o.momentum = a.value("momentum", 0.1);
  o.affine = a.value("affine", false);
  o.track_running_stats = a.value("track_running_stats", false);
  o.dtype = dtype;
  return o;
}


const bool registered = [] {
  add_module("LayerNorm", [](const json& a, Dtype dt) -> layers::ModulePtr {
    const json& ns = a.at("normalized_shape");
    Shape shape = ns.is_array() ? ns.get<Shape>() : Shape{ns.get<std::int64_t>()};
    return std::make_shared<layers::LayerNorm>(shape, a.value("eps", 1e-5), a.value("elementwise_affine", true),
                                               a.value("bias", true), dt);
  });
  add_module("GroupNorm", [](const json& a, Dtype dt) -> layers::ModulePtr {
    return std::make_shared<layers::GroupNorm>(a.at("num_groups").get<std::int64_t>(),
                                               a.at("num_channels").get<std::int64_t>(), a.value("eps", 1e-5),
                                               a.value("affine", true), dt);
  });
  add_module("InstanceNorm1d", [](const json& a, Dtype dt) -> layers::ModulePtr {
    return std::make_shared<layers::InstanceNorm1d>(a.at("num_features").get<std::int64_t>(), in_options(a, dt));
  });
  add_module("InstanceNorm2d", [](const json& a, Dtype dt) -> layers::ModulePtr {
    return std::make_shared<layers::InstanceNorm2d>(a.at("num_features").get<std::int64_t>(), in_options(a, dt));
  });
  add_module("BatchRenorm1d", [](const json& a, Dtype dt) -> layers::ModulePtr {
    return std::make_shared<layers::BatchRenorm1d>(a.at("num_features").get<std::int64_t>(), bn_options(a, dt),
                                                   a.value("rmax", 3.0), a.value("dmax", 5.0));
  });
  add_module("BatchRenorm2d", [](const json& a, Dtype dt) -> layers::ModulePtr {
    return std::make_shared<layers::BatchRenorm2d>(a.at("num_features").get<std::int64_t>(), bn_options(a, dt),
                                                   a.value("rmax", 3.0), a.value("dmax", 5.0));
  });
  add_module("LocalResponseNorm", [](const json& a, Dtype) -> layers::ModulePtr {
    return std::make_shared<layers::LocalResponseNorm>(a.at("size").get<std::int64_t>(), a.value("alpha", 1e-4),
                                                       a.value("beta", 0.75), a.value("k", 1.0));
  });
  add_module("Dropout", [](const json& a, Dtype) -> layers::ModulePtr {
    return std::make_shared<layers::Dropout>(a.value("p", 0.5));
  });
  add_module("Sigmoid", [](const json&, Dtype) -> layers::ModulePtr { return std::make_shared<layers::Sigmoid>(); });
  add_module("Tanh", [](const json&, Dtype) -> layers::ModulePtr { return std::make_shared<layers::Tanh>(); });
  add_module("GELU", [](const json& a, Dtype) -> layers::ModulePtr {
    return std::make_shared<layers::GELU>(a.value("approximate", std::string("none")));
  });
  add_module("Softmax", [](const json& a, Dtype) -> layers::ModulePtr {
    return std::make_shared<layers::Softmax>(a.at("dim").get<std::int64_t>());
  });
  add_module("LogSoftmax", [](const json& a, Dtype) -> layers::ModulePtr {
    return std::make_shared<layers::LogSoftmax>(a.at("dim").get<std::int64_t>());
  });
  add_module("Identity", [](const json&, Dtype) -> layers::ModulePtr { return std::make_shared<layers::Identity>(); });
  add_module("LeakyReLU", [](const json& a, Dtype) -> layers::ModulePtr {
    return std::make_shared<layers::LeakyReLU>(a.value("negative_slope", 0.01));
  });
  add_module("Flatten", [](const json& a, Dtype) -> layers::ModulePtr {
    return std::make_shared<layers::Flatten>(a.value("start_dim", std::int64_t{1}), a.value("end_dim", std::int64_t{-1}));
  });
  return true;
}();

}  // namespace
}  // namespace golden
