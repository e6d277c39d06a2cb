#include "kit/norm_net.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>
#include <utility>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/data/fashion_mnist.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/conv.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/group_norm.h>
#include <tapegrad/layers/layer_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/layers/pooling.h>
#include <tapegrad/models/cnn.h>
#include <tapegrad/train/evaluate_batches.h>
#include <tapegrad/debug/buffers.h>
#include "kit/ghost_batch.h"
#include "kit/option_checks.h"

namespace studies::kit {

using namespace tapegrad;

namespace {
// BatchNorm1d whose running_var takes the biased batch variance; outputs unchanged.
class BiasedVarBatchNorm1d : public layers::BatchNorm1d {
 public:
  using layers::BatchNorm1d::BatchNorm1d;
  std::string type_name() const override { return "BatchNorm1d"; }
  Tensor forward(const Tensor& x) override {
    if (!is_training() || !options.track_running_stats) return layers::BatchNorm1d::forward(x);
    const double m = static_cast<double>(x.numel() / x.size(1));
    const double f = options.momentum ? *options.momentum : 1.0 / static_cast<double>(batches_tracked() + 1);
    Tensor out = layers::BatchNorm1d::forward(x);  // throws for m = 1 before any change
    Tensor mu, var;
    layers::functional::batch_moments(x.detach(), mu, var);
    // The base added f·var·m/(m-1); keep f·var.
    running_var.add_(var.to(running_var.dtype()).detach(), -f / (m - 1.0));
    return out;
  }
};
}  // namespace

namespace {
// Every kind with its name, in the order all_kinds() lists them: the one table of the names.
constexpr std::pair<NormKind, const char*> kKinds[] = {{NormKind::Batch, "batch"}, {NormKind::Sync, "sync"},
                                                       {NormKind::Renorm, "renorm"}, {NormKind::Group, "group"},
                                                       {NormKind::Layer, "layer"}, {NormKind::None, "none"}};
}  // namespace

std::string kind_name(NormKind k) {
  for (const auto& [kind, name] : kKinds)
    if (kind == k) return name;
  return "?";
}

NormKind parse_kind(const std::string& s) {
  for (const auto& [kind, name] : kKinds)
    if (name == s) return kind;
  throw std::invalid_argument("unknown norm '" + s + "': expected batch, sync, renorm, group, layer or none");
}

const std::vector<NormKind>& all_kinds() {
  static const std::vector<NormKind> k = [] {
    std::vector<NormKind> out;
    for (const auto& kind : kKinds) out.push_back(kind.first);
    return out;
  }();
  return k;
}


namespace {

// The norm after a layer of `width` features: (N, width) for the MLP and the CNN's head
// (conv = false), (N, width, H, W) after a convolution (conv = true, layer_shape = (C, H, W)).
layers::ModulePtr make_norm(const ModelConfig& c, Model& m, std::int64_t width, bool conv, const Shape& layer_shape) {
  layers::BatchNormOptions bo;
  bo.momentum = c.bn_momentum;
  bo.dtype = c.dtype;
  switch (c.norm) {
    case NormKind::Batch: {
      std::shared_ptr<layers::BatchNormBase> bn;
      if (conv) bn = std::make_shared<layers::BatchNorm2d>(width, bo);
      else bn = std::make_shared<layers::BatchNorm1d>(width, bo);
      m.bns.push_back(bn.get());
      return std::make_shared<GhostBatchNorm>(bn, c.replicas);
    }
    case NormKind::Sync: {
      std::shared_ptr<layers::BatchNormBase> bn;
      if (conv) {
        if (c.biased_running_var)
          throw std::invalid_argument("biased_running_var: only the MLP's BatchNorm1d has this variant");
        bn = std::make_shared<layers::BatchNorm2d>(width, bo);
      } else if (c.biased_running_var) {
        bn = std::make_shared<BiasedVarBatchNorm1d>(width, bo);
      } else {
        bn = std::make_shared<layers::BatchNorm1d>(width, bo);
      }
      m.bns.push_back(bn.get());
      return bn;
    }
    case NormKind::Renorm: {
      std::shared_ptr<layers::BatchNormBase> bn;
      if (conv) {
        auto r = std::make_shared<layers::BatchRenorm2d>(width, bo, 1.0, 0.0);
        m.renorms2d.push_back(r.get());
        bn = r;
      } else {
        auto r = std::make_shared<layers::BatchRenorm1d>(width, bo, 1.0, 0.0);
        m.renorms.push_back(r.get());
        bn = r;
      }
      m.bns.push_back(bn.get());
      return std::make_shared<GhostBatchNorm>(bn, c.replicas);
    }
    case NormKind::Group:
      if (c.groups < 1 || width % c.groups != 0)
        throw std::invalid_argument("GroupNorm: width " + std::to_string(width) + " is not divisible by " +
                                    std::to_string(c.groups) + " groups");
      return std::make_shared<layers::GroupNorm>(c.groups, width, 1e-5, true, c.dtype);
    case NormKind::Layer: return std::make_shared<layers::LayerNorm>(layer_shape, 1e-5, true, true, c.dtype);
    case NormKind::None: break;
  }
  return nullptr;
}

Model build_mlp(const ModelConfig& c, std::int64_t in_features, std::int64_t classes, Generator& init) {
  Model m;
  m.net = std::make_shared<layers::Sequential>();
  std::int64_t width = in_features;
  for (std::int64_t h : c.hidden) {
    m.net->push_back(std::make_shared<layers::Linear>(width, h, true, c.dtype, init));
    if (auto n = make_norm(c, m, h, false, Shape{h})) m.net->push_back(n);
    m.net->push_back(std::make_shared<layers::ReLU>());
    width = h;
  }
  m.net->push_back(std::make_shared<layers::Linear>(width, classes, true, c.dtype, init));
  return m;
}

// models::CNN (its block and head, weights drawn in the same layer order) with the study's
// norms, behind an Unflatten of the flat input rows.
Model build_cnn(const ModelConfig& c, std::int64_t in_features, std::int64_t classes, Generator& init) {
  if (c.image.size() != 3 || c.image[0] * c.image[1] * c.image[2] != in_features)
    throw std::invalid_argument("cnn: expected input rows of C·H·W = image's product features, got " +
                                std::to_string(in_features) + " features for an image of " +
                                std::to_string(c.image.size()) + " dims");
  if (c.channels.empty() || c.head < 1)
    throw std::invalid_argument("cnn: expected at least one conv width and a head >= 1, got " +
                                std::to_string(c.channels.size()) + " widths, head " + std::to_string(c.head));
  Model m;
  models::CNNOptions o;
  o.in_channels = c.image[0];
  o.height = c.image[1];
  o.width = c.image[2];
  o.channels = c.channels;
  o.hidden = c.head;
  o.num_classes = classes;
  o.dtype = c.dtype;
  o.norm_factory = [&](std::int64_t features, bool conv, const Shape& shape) {
    return make_norm(c, m, features, conv, shape);
  };
  m.net = std::make_shared<layers::Sequential>();
  m.net->push_back(std::make_shared<layers::Unflatten>(1, c.image));
  m.net->push_back(std::make_shared<models::CNN>(o, init));
  return m;
}

}  // namespace

Model build_model(const ModelConfig& c, std::int64_t in_features, std::int64_t classes, Generator& init) {
  try {
    if (c.arch == "mlp") return build_mlp(c, in_features, classes, init);
    if (c.arch == "cnn") return build_cnn(c, in_features, classes, init);
  } catch (const std::bad_alloc&) {  // huge widths: name them, not "std::bad_alloc"
    throw std::runtime_error(c.arch == "cnn" ? "cnn: out of memory allocating the parameters of --channels " +
                                                   join_widths(c.channels) + " --head " + std::to_string(c.head) +
                                                   "; use smaller widths"
                                             : "mlp: out of memory allocating the parameters of hidden widths " +
                                                   join_widths(c.hidden) + "; use smaller widths");
  }
  throw std::invalid_argument("unknown model '" + c.arch + "': expected mlp or cnn");
}

void renorm_schedule(Model& m, std::int64_t step, std::int64_t total) {
  if (m.renorms.empty() && m.renorms2d.empty()) return;
  const double f = total > 0 ? static_cast<double>(step) / static_cast<double>(total) : 1.0;
  const double t = std::clamp((f - 0.1) / 0.4, 0.0, 1.0);
  for (auto* r : m.renorms) r->set_clipping(1.0 + 2.0 * t, 5.0 * t);
  for (auto* r : m.renorms2d) r->set_clipping(1.0 + 2.0 * t, 5.0 * t);
}

namespace {
Eval to_eval(const train::ClassifierEvaluation& e) { return {e.accuracy(), e.mean_loss()}; }
}  // namespace

Eval evaluate_eval_mode(layers::Module& net, const data::Dataset& ds) {
  train::ClassifierEvalOptions o;
  o.batch_size = 1000;
  o.loss_dtype = Dtype::Float64;
  return to_eval(train::evaluate_classifier(net, ds.X, ds.y, o));
}

Eval evaluate_train_mode(layers::Module& net, const data::Dataset& ds, std::int64_t batch) {
  const auto saved = debug::snapshot_buffers(net);
  train::ClassifierEvalOptions o;
  o.batch_size = batch;
  o.drop_last = true;
  o.train_mode = true;
  o.loss_dtype = Dtype::Float64;
  const Eval e = to_eval(train::evaluate_classifier(net, ds.X, ds.y, o));
  debug::restore_buffers(net, saved);
  return e;
}

double train_step(layers::Module& net, optim::Optimizer& opt, const Tensor& X, const Tensor& y) {
  opt.zero_grad();
  Tensor loss = layers::cross_entropy(net(X), y);
  loss.backward();
  opt.step();
  return loss.item();
}

bool crashed_loss(double loss) { return !std::isfinite(loss) || std::fabs(loss) > 1e10; }


}  // namespace studies::kit
