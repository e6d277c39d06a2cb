#include <tapegrad/models/cnn.h>

#include <memory>
#include <stdexcept>

#include <tapegrad/core/enum_names.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/conv.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/group_norm.h>
#include <tapegrad/layers/instance_norm.h>
#include <tapegrad/layers/layer_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/pooling.h>

namespace tapegrad::models {

namespace {

constexpr NamedValue<ConvNorm> kConvNormNames[] = {{ConvNorm::None, "none"},
                                                   {ConvNorm::Batch, "batch"},
                                                   {ConvNorm::Group, "group"},
                                                   {ConvNorm::Instance, "instance"},
                                                   {ConvNorm::Layer, "layer"}};

}  // namespace

std::string conv_norm_name(ConvNorm n) { return name_of(kConvNormNames, n); }

ConvNorm parse_conv_norm(const std::string& s) { return parse_named(kConvNormNames, s, "norm"); }

namespace {

void check_groups(const CNNOptions& o, std::int64_t width) {
  if (o.groups < 1 || width % o.groups != 0)
    throw std::invalid_argument("CNN: GroupNorm needs the width " + std::to_string(width) +
                                " to be divisible by groups=" + std::to_string(o.groups));
}

layers::BatchNormOptions bn_opts(const CNNOptions& o) {
  layers::BatchNormOptions bo;
  bo.momentum = o.bn_momentum;
  bo.eps = o.eps;
  bo.dtype = o.dtype;
  return bo;
}

layers::ModulePtr conv_norm(const CNNOptions& o, std::int64_t c, std::int64_t h, std::int64_t w) {
  if (o.norm_factory) return o.norm_factory(c, true, Shape{c, h, w});
  switch (o.norm) {
    case ConvNorm::Batch: return std::make_shared<layers::BatchNorm2d>(c, bn_opts(o));
    case ConvNorm::Group: check_groups(o, c); return std::make_shared<layers::GroupNorm>(o.groups, c, o.eps, true, o.dtype);
    case ConvNorm::Instance: {
      layers::InstanceNormOptions io;
      io.eps = o.eps;
      io.affine = true;
      io.dtype = o.dtype;
      return std::make_shared<layers::InstanceNorm2d>(c, io);
    }
    case ConvNorm::Layer: return std::make_shared<layers::LayerNorm>(Shape{c, h, w}, o.eps, true, true, o.dtype);
    case ConvNorm::None: break;
  }
  return nullptr;
}

layers::ModulePtr head_norm(const CNNOptions& o, std::int64_t width) {
  if (o.norm_factory) return o.norm_factory(width, false, Shape{width});
  switch (o.norm) {
    case ConvNorm::Batch: return std::make_shared<layers::BatchNorm1d>(width, bn_opts(o));
    case ConvNorm::Group: check_groups(o, width); return std::make_shared<layers::GroupNorm>(o.groups, width, o.eps, true, o.dtype);
    case ConvNorm::Layer: return std::make_shared<layers::LayerNorm>(Shape{width}, o.eps, true, true, o.dtype);
    case ConvNorm::Instance:
    case ConvNorm::None: break;
  }
  return nullptr;
}

}  // namespace

CNN::CNN(CNNOptions o, Generator& gen) {
  if (o.channels.empty()) throw std::invalid_argument("CNN: expected at least one conv block, got channels = {}");
  if (o.in_channels < 1 || o.num_classes < 1 || o.hidden < 0)
    throw std::invalid_argument("CNN: expected in_channels >= 1, num_classes >= 1, hidden >= 0, got " +
                                std::to_string(o.in_channels) + ", " + std::to_string(o.num_classes) + ", " +
                                std::to_string(o.hidden));
  std::int64_t c = o.in_channels, h = o.height, w = o.width;
  for (std::int64_t out : o.channels) {
    if (out < 1) throw std::invalid_argument("CNN: expected conv widths >= 1, got " + std::to_string(out));
    if (h < 2 || w < 2)
      throw std::invalid_argument("CNN: a " + std::to_string(h) + "x" + std::to_string(w) +
                                  " feature map cannot be pooled by 2; use fewer blocks or larger images");
    push_back(std::make_shared<layers::Conv2d>(c, out, 3, 1, 1, 1, 1, true, o.dtype, gen));
    if (auto n = conv_norm(o, out, h, w)) push_back(n);
    push_back(std::make_shared<layers::ReLU>());
    push_back(std::make_shared<layers::MaxPool2d>(2));
    c = out;
    h /= 2;
    w /= 2;
  }
  push_back(std::make_shared<layers::Flatten>());
  std::int64_t features = 0;
  if (__builtin_mul_overflow(c, h, &features) || __builtin_mul_overflow(features, w, &features))
    throw std::invalid_argument("CNN: expected a flattened size C·H·W that fits in 64 bits, got " + std::to_string(c) +
                                "·" + std::to_string(h) + "·" + std::to_string(w) + " (height " +
                                std::to_string(o.height) + ", width " + std::to_string(o.width) + ")");
  if (o.hidden > 0) {
    push_back(std::make_shared<layers::Linear>(features, o.hidden, true, o.dtype, gen));
    if (auto n = head_norm(o, o.hidden)) push_back(n);
    push_back(std::make_shared<layers::ReLU>());
    features = o.hidden;
  }
  push_back(std::make_shared<layers::Linear>(features, o.num_classes, true, o.dtype, gen));
}

}  // namespace tapegrad::models
