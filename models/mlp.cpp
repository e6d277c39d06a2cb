#include <tapegrad/models/mlp.h>

#include <memory>
#include <stdexcept>

#include <tapegrad/core/enum_names.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/clamp.h>
#include <tapegrad/layers/dropout.h>
#include <tapegrad/layers/group_norm.h>
#include <tapegrad/layers/layer_norm.h>
#include <tapegrad/layers/linear.h>

namespace tapegrad::models {

namespace {
constexpr NamedValue<Norm> kNormNames[] = {
    {Norm::None, "none"}, {Norm::Batch, "batch"}, {Norm::Layer, "layer"}, {Norm::Group, "group"}};
}  // namespace

std::string norm_name(Norm n) { return name_of(kNormNames, n); }

Norm parse_norm(const std::string& s) { return parse_named(kNormNames, s, "norm"); }

namespace {
layers::ModulePtr make_norm(Norm norm, std::int64_t width, const MLPOptions& o) {
  switch (norm) {
    case Norm::Batch: {
      layers::BatchNormOptions bo;
      bo.momentum = o.bn_momentum;
      bo.eps = o.norm_eps;
      bo.unbiased_running_var = o.bn_unbiased_running_var;
      bo.dtype = o.dtype;
      return std::make_shared<layers::BatchNorm1d>(width, bo);
    }
    case Norm::Layer: return std::make_shared<layers::LayerNorm>(Shape{width}, o.norm_eps, true, true, o.dtype);
    case Norm::Group:
      if (width % o.groups != 0)
        throw std::invalid_argument("MLP: GroupNorm needs the width " + std::to_string(width) +
                                    " to be divisible by groups=" + std::to_string(o.groups));
      return std::make_shared<layers::GroupNorm>(o.groups, width, o.norm_eps, true, o.dtype);
    case Norm::None: break;
  }
  return nullptr;
}
}  // namespace

MLP::MLP(const std::vector<std::int64_t>& sizes, MLPOptions opts, Generator& gen) {
  if (sizes.size() < 2)
    throw std::invalid_argument("MLP: expected at least 2 layer sizes (in, out), got " + std::to_string(sizes.size()));
  if (opts.act_clip && !(*opts.act_clip > 0))
    throw std::invalid_argument("MLP: act_clip must be > 0, got " + std::to_string(*opts.act_clip));
  if (!(opts.dropout >= 0.0 && opts.dropout < 1.0))
    throw std::invalid_argument("MLP: dropout must be in [0, 1), got " + std::to_string(opts.dropout));
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    push_back(std::make_shared<layers::Linear>(sizes[i], sizes[i + 1], true, opts.dtype, gen));
    if (i + 2 == sizes.size()) break;
    if (auto n = make_norm(opts.norm, sizes[i + 1], opts)) push_back(n);
    push_back(std::make_shared<layers::ReLU>());
    if (opts.act_clip) push_back(std::make_shared<layers::Clamp>(-*opts.act_clip, *opts.act_clip));
    if (opts.dropout > 0) push_back(std::make_shared<layers::Dropout>(opts.dropout, opts.dropout_gen));
  }
}

}  // namespace tapegrad::models
