#include <tapegrad/layers/fuse_batch_norm.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/batch_norm_relu.h>
#include <tapegrad/layers/clamp.h>
#include <tapegrad/layers/conv.h>
#include <tapegrad/layers/fuse_clone.h>
#include <tapegrad/layers/identity.h>
#include <tapegrad/layers/linear.h>

namespace tapegrad::layers {

namespace {

std::string join_path(const std::string& prefix, const std::string& name) { return prefix.empty() ? name : prefix + "." + name; }

const BatchNormBase* plain_batch_norm(const Module& m, const char* type) {
  return m.type_name() == type ? dynamic_cast<const BatchNormBase*>(&m) : nullptr;
}

// The BatchNorm1dReLU of layers::fuse_modules (exactly that class), else nullptr.
const BatchNorm1dReLU* fused_batch_norm_relu(const Module& m) {
  return m.type_name() == "BatchNorm1dReLU" ? dynamic_cast<const BatchNorm1dReLU*>(&m) : nullptr;
}

// After folding a BatchNorm1dReLU at child i into the Linear before it: its ReLU [and Clamp]
// back as modules, in the places of the Identity children fuse_modules left (skipped), so the
// result is the one the unfused model gives. Returns how many children after i were used.
std::size_t push_activation(const BatchNorm1dReLU& f, const Sequential& seq, std::size_t i, Sequential& out) {
  out.push_back(std::make_shared<ReLU>());
  if (f.clip) out.push_back(std::make_shared<Clamp>(f.clip->first, f.clip->second));
  std::size_t used = 0;
  const std::size_t slots = f.clip ? 2 : 1;
  while (used < slots && i + 1 + used < seq.size() && seq[i + 1 + used]->type_name() == "Identity" &&
         dynamic_cast<const Identity*>(seq[i + 1 + used].get()))
    ++used;
  return used;
}

void check_model(Module& model) {
  for (const auto& [path, m] : model.named_modules()) {
    const std::string where = path.empty() ? "the model" : "module '" + path + "'";
    if (m->is_training())
      throw std::invalid_argument("fuse_batch_norm: expected a model in eval mode, but " + where + " (" + m->type_name() +
                                  ") is in train mode; call eval() first");
    if (const auto* bn = dynamic_cast<const BatchNormBase*>(m); bn && !bn->options.track_running_stats)
      throw std::invalid_argument("fuse_batch_norm: " + where + " (" + m->type_name() +
                                  ") has no running statistics (track_running_stats=false): in eval mode it "
                                  "normalises with batch statistics, which cannot be folded into weights");
  }
}

// s = γ/√(var + eps) and t = β − s·mean, per channel, in float64.
void bn_affine(const BatchNormBase& bn, std::vector<double>& s, std::vector<double>& t) {
  const auto mean = bn.running_mean.to_vector(), var = bn.running_var.to_vector();
  const std::size_t c = mean.size();
  const auto gamma = bn.weight.defined() ? bn.weight.to_vector() : std::vector<double>(c, 1.0);
  const auto beta = bn.bias.defined() ? bn.bias.to_vector() : std::vector<double>(c, 0.0);
  s.resize(c);
  t.resize(c);
  for (std::size_t i = 0; i < c; ++i) {
    s[i] = gamma[i] / std::sqrt(var[i] + bn.options.eps);
    t[i] = beta[i] - s[i] * mean[i];
  }
}

// weight' = row i of `weight` (out, ...) scaled by s[i], bias' = s·bias + t (bias undefined: 0),
// written into the fused layer's `dst_weight` and `dst_bias`.
void fold(const Tensor& weight, const Tensor& bias, std::int64_t out, const BatchNormBase& bn, Tensor& dst_weight,
          Tensor& dst_bias) {
  std::vector<double> s, t;
  bn_affine(bn, s, t);
  auto w = weight.to_vector();
  const std::size_t per_row = w.size() / static_cast<std::size_t>(out);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] *= s[i / per_row];
  const auto b = bias.defined() ? bias.to_vector() : std::vector<double>(static_cast<std::size_t>(out), 0.0);
  std::vector<double> nb(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) nb[i] = s[i] * b[i] + t[i];
  NoGradGuard ng;
  dst_weight.copy_(Tensor::from_vector(w, weight.shape(), Dtype::Float64));
  dst_bias.copy_(Tensor::from_vector(nb, {out}, Dtype::Float64));
}

void check_width(std::int64_t layer, std::int64_t bn, const std::string& lpath, const Module& l, const std::string& bpath,
                 const Module& b) {
  if (layer != bn)
    throw std::invalid_argument("fuse_batch_norm: module '" + lpath + "' (" + l.type_name() + ") has " +
                                std::to_string(layer) + " outputs but the following module '" + bpath + "' (" +
                                b.type_name() + ") normalises " + std::to_string(bn) + " features");
}

std::shared_ptr<Sequential> fuse_sequential(const Sequential& seq, const std::string& prefix, FuseReport& report) {
  auto out = std::make_shared<Sequential>();
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const Module& m = *seq[i];
    const std::string path = join_path(prefix, std::to_string(i));
    const Module* next = i + 1 < seq.size() ? seq[i + 1].get() : nullptr;
    const std::string next_path = join_path(prefix, std::to_string(i + 1));
    if (const auto* lin = dynamic_cast<const Linear*>(&m); lin && next) {
      const auto* fused = fused_batch_norm_relu(*next);
      if (const BatchNormBase* bn = fused ? fused : plain_batch_norm(*next, "BatchNorm1d")) {
        check_width(lin->out_features, bn->num_features, path, m, next_path, *next);
        Generator init(0);
        auto f = std::make_shared<Linear>(lin->in_features, lin->out_features, true, lin->weight.dtype(), init);
        fold(lin->weight, lin->bias, lin->out_features, *bn, f->weight, f->bias);
        f->eval();
        out->push_back(f);
        ++report.fused;
        ++i;
        if (fused) i += push_activation(*fused, seq, i, *out);
        continue;
      }
    }
    if (const auto* conv = dynamic_cast<const Conv2d*>(&m); conv && next) {
      if (const auto* bn = plain_batch_norm(*next, "BatchNorm2d")) {
        check_width(conv->out_channels, bn->num_features, path, m, next_path, *next);
        Generator init(0);
        auto f = std::make_shared<Conv2d>(conv->in_channels, conv->out_channels, conv->kernel_size, conv->stride,
                                          conv->padding, conv->dilation, conv->groups, true, conv->weight.dtype(), init);
        fold(conv->weight, conv->bias, conv->out_channels, *bn, f->weight, f->bias);
        f->eval();
        out->push_back(f);
        ++report.fused;
        ++i;
        continue;
      }
    }
    if (const auto* inner = dynamic_cast<const Sequential*>(&m)) {
      out->push_back(fuse_sequential(*inner, path, report));
      continue;
    }
    out->push_back(clone_module(m, path));
  }
  out->eval();
  return out;
}

}  // namespace

std::shared_ptr<Sequential> fuse_batch_norm(const Module& model, FuseReport* report) {
  check_model(const_cast<Module&>(model));  // named_modules() is non-const; nothing is changed
  FuseReport r;
  std::shared_ptr<Sequential> out;
  if (const auto* seq = dynamic_cast<const Sequential*>(&model)) {
    out = fuse_sequential(*seq, "", r);
  } else {
    out = std::make_shared<Sequential>();
    out->push_back(clone_module(model));
    out->eval();
  }
  if (report) *report = r;
  return out;
}

}  // namespace tapegrad::layers
