// Factories for the convolution and pooling layers (conv.json, train_cnn.json; Flatten is
// registered in factories_norms.cpp).
#include <memory>

#include "golden_runner/support.h"
#include <tapegrad/layers/conv.h>
#include <tapegrad/layers/pooling.h>

namespace golden {
namespace {

using namespace tapegrad;
using layers::Size2;

// An int or an [h, w] pair.
Size2 size2(const json& j) {
  if (j.is_array()) return {j.at(0).get<std::int64_t>(), j.at(1).get<std::int64_t>()};
  return j.get<std::int64_t>();
}

std::optional<Size2> opt_size2(const json& a, const char* key) {
  if (!a.contains(key) || a[key].is_null()) return std::nullopt;
  return size2(a[key]);
}

const bool registered = [] {
  add_module("Conv2d", [](const json& a, Dtype dt) -> layers::ModulePtr {
    if (a.value("padding_mode", std::string("zeros")) != "zeros")
      throw std::invalid_argument("Conv2d: only padding_mode 'zeros' is supported");
    return std::make_shared<layers::Conv2d>(a.at("in_channels").get<std::int64_t>(),
                                            a.at("out_channels").get<std::int64_t>(), size2(a.at("kernel_size")),
                                            size2(a.value("stride", json(1))), size2(a.value("padding", json(0))),
                                            size2(a.value("dilation", json(1))), a.value("groups", 1),
                                            a.value("bias", true), dt);
  });
  add_module("MaxPool2d", [](const json& a, Dtype) -> layers::ModulePtr {
    return std::make_shared<layers::MaxPool2d>(size2(a.at("kernel_size")), opt_size2(a, "stride"),
                                               size2(a.value("padding", json(0))), size2(a.value("dilation", json(1))),
                                               a.value("ceil_mode", false));
  });
  add_module("AvgPool2d", [](const json& a, Dtype) -> layers::ModulePtr {
    return std::make_shared<layers::AvgPool2d>(size2(a.at("kernel_size")), opt_size2(a, "stride"),
                                               size2(a.value("padding", json(0))), a.value("ceil_mode", false),
                                               a.value("count_include_pad", true));
  });
  add_module("AdaptiveAvgPool2d", [](const json& a, Dtype) -> layers::ModulePtr {
    return std::make_shared<layers::AdaptiveAvgPool2d>(size2(a.at("output_size")));
  });
  return true;
}();

}  // namespace
}  // namespace golden
