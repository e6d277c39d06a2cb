#include <tapegrad/layers/fuse_clone.h>

#include <stdexcept>

#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/batch_norm_relu.h>
#include <tapegrad/layers/clamp.h>
#include <tapegrad/layers/conv.h>
#include <tapegrad/layers/dropout.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/group_norm.h>
#include <tapegrad/layers/identity.h>
#include <tapegrad/layers/instance_norm.h>
#include <tapegrad/layers/layer_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/pooling.h>
#include <tapegrad/layers/relu_clamp.h>
#include <tapegrad/layers/sequential.h>

namespace tapegrad::layers {

namespace {

Dtype dtype_of(const Module& m) {
  for (const auto& [name, t] : m.named_parameters(false)) return t.dtype();
  for (const auto& [name, t] : m.named_buffers(false))
    if (t.dtype() != Dtype::Int64) return t.dtype();
  return Dtype::Float32;
}

// The parameters' requires_grad follows the source (a frozen layer stays frozen).
void copy_state(const Module& from, Module& to) {
  to.load_state_dict(from.state_dict(), true);
  auto src = from.named_parameters(false);
  auto dst = to.named_parameters(false);
  for (std::size_t i = 0; i < src.size() && i < dst.size(); ++i) dst[i].second.requires_grad_(src[i].second.requires_grad());
}

template <class T>
const T* as(const Module& m) {
  return dynamic_cast<const T*>(&m);
}

ModulePtr make_copy(const Module& m, const std::string& path) {
  const std::string where = path.empty() ? "the model" : "module '" + path + "'";
  if (const auto* s = as<Sequential>(m)) {
    auto out = std::make_shared<Sequential>();
    for (std::size_t i = 0; i < s->size(); ++i)
      out->push_back(clone_module(*(*s)[i], path.empty() ? std::to_string(i) : path + "." + std::to_string(i)));
    return out;
  }
  const Dtype dt = dtype_of(m);
  Generator init(0);  // the initial values are overwritten by the copy; a local generator leaves the default one alone
  if (const auto* l = as<Linear>(m))
    return std::make_shared<Linear>(l->in_features, l->out_features, l->bias.defined(), dt, init);
  if (const auto* c = as<Conv2d>(m))
    return std::make_shared<Conv2d>(c->in_channels, c->out_channels, c->kernel_size, c->stride, c->padding, c->dilation,
                                    c->groups, c->bias.defined(), dt, init);
  if (const auto* b = as<BatchNorm1dReLU>(m); b && m.type_name() == "BatchNorm1dReLU")
    return std::make_shared<BatchNorm1dReLU>(b->num_features, b->options, b->clip);
  if (m.type_name() == "BatchNorm1d" || m.type_name() == "BatchNorm2d") {
    // exact types only: subclasses (BatchRenorm, SyncBatchNorm) carry more than BatchNorm's state
    const auto* b = as<BatchNormBase>(m);
    if (b && m.type_name() == "BatchNorm1d") return std::make_shared<BatchNorm1d>(b->num_features, b->options);
    if (b) return std::make_shared<BatchNorm2d>(b->num_features, b->options);
  }
  if (const auto* n = as<LayerNorm>(m))
    return std::make_shared<LayerNorm>(n->normalized_shape, n->eps, n->elementwise_affine, n->bias.defined(), dt);
  if (const auto* g = as<GroupNorm>(m)) return std::make_shared<GroupNorm>(g->num_groups, g->num_channels, g->eps, g->affine, dt);
  if (const auto* i = as<InstanceNorm1d>(m)) return std::make_shared<InstanceNorm1d>(i->num_features, i->options);
  if (const auto* i = as<InstanceNorm2d>(m)) return std::make_shared<InstanceNorm2d>(i->num_features, i->options);
  if (as<ReLU>(m)) return std::make_shared<ReLU>();
  if (as<Sigmoid>(m)) return std::make_shared<Sigmoid>();
  if (as<Tanh>(m)) return std::make_shared<Tanh>();
  if (const auto* a = as<LeakyReLU>(m)) return std::make_shared<LeakyReLU>(a->negative_slope);
  if (const auto* a = as<GELU>(m)) return std::make_shared<GELU>(a->approximate);
  if (const auto* a = as<Clamp>(m)) return std::make_shared<Clamp>(a->lo, a->hi);
  if (const auto* a = as<ReLUClamp>(m)) return std::make_shared<ReLUClamp>(a->lo, a->hi);
  if (const auto* d = as<Dropout>(m)) return std::make_shared<Dropout>(d->p);
  if (as<Identity>(m)) return std::make_shared<Identity>();
  if (const auto* f = as<Flatten>(m)) return std::make_shared<Flatten>(f->start_dim, f->end_dim);
  if (const auto* u = as<Unflatten>(m)) return std::make_shared<Unflatten>(u->dim, u->unflattened_size);
  if (const auto* p = as<MaxPool2d>(m))
    return std::make_shared<MaxPool2d>(p->kernel_size, p->stride, p->padding, p->dilation, p->ceil_mode);
  if (const auto* p = as<AvgPool2d>(m))
    return std::make_shared<AvgPool2d>(p->kernel_size, p->stride, p->padding, p->ceil_mode, p->count_include_pad);
  if (const auto* p = as<AdaptiveAvgPool2d>(m)) return std::make_shared<AdaptiveAvgPool2d>(p->output_size);
  throw std::invalid_argument("cannot copy " + where + " (" + m.type_name() +
                              "): no copy is known for that module type (known: Sequential, Linear, Conv2d, "
                              "BatchNorm1d/2d, BatchNorm1dReLU, LayerNorm, GroupNorm, InstanceNorm1d/2d, the activations, Clamp, ReLUClamp, "
                              "Dropout, Identity, Flatten, Unflatten, the 2-D pools)");
}

}  // namespace

ModulePtr clone_module(const Module& m, const std::string& path) {
  ModulePtr out = make_copy(m, path);
  if (!as<Sequential>(m)) copy_state(m, *out);
  // train(mode) recurses; a Sequential's children already carry their own modes, so only
  // the container's own flag is set (Module::train would overwrite theirs).
  if (as<Sequential>(m)) {
    const auto kids = out->named_children();
    std::vector<bool> modes;
    for (const auto& [n, c] : kids) modes.push_back(c->is_training());
    out->train(m.is_training());
    for (std::size_t i = 0; i < kids.size(); ++i) kids[i].second->train(modes[i]);
  } else {
    out->train(m.is_training());
  }
  return out;
}

}  // namespace tapegrad::layers
