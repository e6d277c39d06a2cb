#include <tapegrad/io/onnx_export.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/file_io.h>
#include <tapegrad/core/shape.h>
#include <tapegrad/core/warnings.h>
#include <tapegrad/io/onnx_proto.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/batch_norm_relu.h>
#include <tapegrad/layers/clamp.h>
#include <tapegrad/layers/conv.h>
#include <tapegrad/layers/dropout.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/functional/window.h>
#include <tapegrad/layers/group_norm.h>
#include <tapegrad/layers/identity.h>
#include <tapegrad/layers/instance_norm.h>
#include <tapegrad/layers/layer_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/pooling.h>
#include <tapegrad/layers/relu_clamp.h>
#include <tapegrad/layers/sequential.h>

namespace tapegrad::io {

namespace {

namespace op = onnx_proto;
using op::Attribute;

std::string where(const std::string& path, const layers::Module& m) {
  return (path.empty() ? std::string("the model") : "module '" + path + "'") + " (" + m.type_name() + ")";
}

class GraphBuilder {
 public:
  explicit GraphBuilder(Dtype dt) : dtype_(dt), elem_(dt == Dtype::Float64 ? op::kDouble : op::kFloat) {}

  int elem() const { return elem_; }
  /// The module path of each node of model().nodes, in order.
  const std::vector<std::string>& node_paths() const { return node_paths_; }
  op::Model& model() { return model_; }

  std::string fresh(const std::string& base) { return base + "_" + std::to_string(counter_++); }

  std::string node(const std::string& op_type, const std::string& path, std::vector<std::string> inputs,
                   std::vector<Attribute> attrs = {}) {
    const std::string out = fresh((path.empty() ? std::string("x") : path) + "/" + op_type);
    model_.nodes.push_back({op_type, out, std::move(inputs), {out}, std::move(attrs)});
    node_paths_.push_back(path);
    return out;
  }

  // An initializer of the model's float type from values (rounded from float64).
  std::string constant(const std::string& name, const std::vector<double>& v, std::vector<std::int64_t> dims) {
    op::TensorData t;
    t.name = unique(name);
    t.dims = std::move(dims);
    t.data_type = elem_;
    if (dtype_ == Dtype::Float64) {
      t.raw.resize(v.size() * 8);
      std::memcpy(t.raw.data(), v.data(), t.raw.size());
    } else {
      std::vector<float> f(v.begin(), v.end());
      t.raw.resize(f.size() * 4);
      std::memcpy(t.raw.data(), f.data(), t.raw.size());
    }
    model_.initializers.push_back(std::move(t));
    return model_.initializers.back().name;
  }
  std::string constant(const std::string& name, const Tensor& v) {
    std::vector<std::int64_t> dims(v.shape().begin(), v.shape().end());
    return constant(name, v.to_vector(), dims);
  }
  std::string int64s(const std::string& name, const std::vector<std::int64_t>& v) {
    op::TensorData t;
    t.name = unique(name);
    t.dims = {static_cast<std::int64_t>(v.size())};
    t.data_type = op::kInt64;
    t.raw.resize(v.size() * 8);
    std::memcpy(t.raw.data(), v.data(), t.raw.size());
    model_.initializers.push_back(std::move(t));
    return model_.initializers.back().name;
  }

 private:
  std::string unique(const std::string& name) {
    for (const auto& t : model_.initializers)
      if (t.name == name) return fresh(name);
    return name;
  }
  Dtype dtype_;
  int elem_;
  op::Model model_;
  std::vector<std::string> node_paths_;
  int counter_ = 0;
};

std::string key(const std::string& path, const std::string& name) { return path.empty() ? name : path + "." + name; }

std::vector<std::int64_t> ints(const Shape& s) { return {s.begin(), s.end()}; }

// (C) -> (C, 1, ..., 1) so that it broadcasts over (N, C, *) of rank `rank`.
std::vector<std::int64_t> channel_dims(std::int64_t c, std::int64_t rank) {
  std::vector<std::int64_t> d{c};
  for (std::int64_t i = 2; i < rank; ++i) d.push_back(1);
  return d;
}

std::vector<double> values_or(const Tensor& t, std::size_t n, double fill) {
  return t.defined() ? t.to_vector() : std::vector<double>(n, fill);
}

// The end padding of one spatial dim that makes ONNX's pool output size (ceil_mode 0:
// floor((in + pad + end − dilation·(kernel − 1) − 1)/stride) + 1) equal tapegrad's. With
// ceil_mode tapegrad, like PyTorch, drops a last window that would start in the end padding;
// ONNX's ceil_mode keeps it (a window of padding only). So ceil_mode is never written: the end
// padding grows until the last window tapegrad keeps fits (less than the dilated kernel).
std::int64_t pool_end_pad(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                          std::int64_t dilation, bool ceil_mode) {
  const std::int64_t out = layers::functional::pool_output_size(in, kernel, stride, pad, dilation, ceil_mode);
  return std::max(pad, (out - 1) * stride + dilation * (kernel - 1) + 1 - in - pad);
}

class Exporter {
 public:
  explicit Exporter(Dtype dt) : g(dt) {}
  GraphBuilder g;

  // Emits the nodes of module `m` applied to the value `in`, whose example is `x` (batch 2).
  // Returns the output value's name and sets `y` to m's output on `x`. `after` names the
  // nodes of a fused module's second and third op (BatchNorm1dReLU's Relu and Clip,
  // ReLUClamp's Clip): the paths of the Identity children fuse_modules left in their places,
  // so a fused model gives the unfused one's graph; empty: `path`.
  std::string emit(layers::Module& m, const std::string& path, const std::string& in, const Tensor& x, Tensor& y,
                   std::pair<std::string, std::string> after = {}) {
    if (auto* s = dynamic_cast<layers::Sequential*>(&m)) {
      std::string cur = in;
      Tensor cx = x;
      // child j's path when it is an Identity (a fused pattern's placeholder), else `fallback`
      auto slot = [&](std::size_t j, const std::string& fallback) {
        return j < s->size() && dynamic_cast<layers::Identity*>((*s)[j].get()) ? key(path, std::to_string(j)) : fallback;
      };
      for (std::size_t i = 0; i < s->size(); ++i) {
        Tensor cy;
        const std::string pi = key(path, std::to_string(i));
        std::pair<std::string, std::string> next;
        if (auto* f = dynamic_cast<layers::BatchNorm1dReLU*>((*s)[i].get())) {
          next.first = slot(i + 1, pi);
          if (f->clip) next.second = next.first == pi ? pi : slot(i + 2, pi);
        } else if (dynamic_cast<layers::ReLUClamp*>((*s)[i].get())) {
          next.second = slot(i + 1, pi);
        }
        cur = emit(*(*s)[i], pi, cur, cx, cy, next);
        cx = cy;
      }
      y = cx;
      return cur;
    }
    y = m(x);
    const std::int64_t rank = x.dim();
    const std::string& p = path;
    const std::string& relu_path = after.first.empty() ? p : after.first;
    const std::string& clip_path = after.second.empty() ? p : after.second;
    if (auto* f = dynamic_cast<layers::BatchNorm1dReLU*>(&m)) {  // BatchNormalization, Relu [, Clip], as unfused
      if (!f->options.track_running_stats)
        throw std::invalid_argument("export_onnx: " + where(p, m) +
                                    " has no running statistics (track_running_stats=false): in eval mode it "
                                    "normalises with batch statistics, which ONNX's BatchNormalization does not");
      std::string out = running_norm(p, in, rank, f->num_features, f->weight, f->bias, f->running_mean, f->running_var,
                                     f->options.eps);
      out = g.node("Relu", relu_path, {out});
      if (f->clip) out = clip(clip_path, out, f->clip->first, f->clip->second);
      return out;
    }
    if (auto* f = dynamic_cast<layers::ReLUClamp*>(&m)) return clip(clip_path, g.node("Relu", p, {in}), f->lo, f->hi);
    if (auto* l = dynamic_cast<layers::Linear*>(&m)) {
      if (rank == 2 && l->bias.defined())
        return g.node("Gemm", p, {in, g.constant(key(p, "weight"), l->weight), g.constant(key(p, "bias"), l->bias)},
                      {Attribute::of_int("transB", 1)});
      // MatMul with Wᵀ (in, out), then the bias
      const auto w = l->weight.to_vector();
      std::vector<double> wt(w.size());
      for (std::int64_t o = 0; o < l->out_features; ++o)
        for (std::int64_t i = 0; i < l->in_features; ++i) wt[i * l->out_features + o] = w[o * l->in_features + i];
      std::string out = g.node("MatMul", p, {in, g.constant(key(p, "weight_t"), wt, {l->in_features, l->out_features})});
      if (l->bias.defined()) out = g.node("Add", p, {out, g.constant(key(p, "bias"), l->bias)});
      return out;
    }
    if (auto* c = dynamic_cast<layers::Conv2d*>(&m)) {
      std::vector<std::string> inputs{in, g.constant(key(p, "weight"), c->weight)};
      if (c->bias.defined()) inputs.push_back(g.constant(key(p, "bias"), c->bias));
      return g.node("Conv", p, inputs,
                    {Attribute::of_ints("kernel_shape", {c->kernel_size.h, c->kernel_size.w}),
                     Attribute::of_ints("strides", {c->stride.h, c->stride.w}),
                     Attribute::of_ints("pads", {c->padding.h, c->padding.w, c->padding.h, c->padding.w}),
                     Attribute::of_ints("dilations", {c->dilation.h, c->dilation.w}),
                     Attribute::of_int("group", c->groups)});
    }
    if (m.type_name() == "BatchNorm1d" || m.type_name() == "BatchNorm2d") {
      auto* bn = dynamic_cast<layers::BatchNormBase*>(&m);
      if (bn) {
        if (!bn->options.track_running_stats)
          throw std::invalid_argument("export_onnx: " + where(p, m) +
                                      " has no running statistics (track_running_stats=false): in eval mode it "
                                      "normalises with batch statistics, which ONNX's BatchNormalization does not");
        return running_norm(p, in, rank, bn->num_features, bn->weight, bn->bias, bn->running_mean, bn->running_var,
                            bn->options.eps);
      }
    }
    if (auto* n = dynamic_cast<layers::InstanceNormBase*>(&m)) {
      const auto c = static_cast<std::size_t>(n->num_features);
      if (n->options.track_running_stats)  // eval mode: the running statistics, as BatchNorm
        return running_norm(p, in, rank, n->num_features, n->weight, n->bias, n->running_mean, n->running_var,
                            n->options.eps);
      return g.node("InstanceNormalization", p,
                    {in, g.constant(key(p, "weight"), values_or(n->weight, c, 1.0), {n->num_features}),
                     g.constant(key(p, "bias"), values_or(n->bias, c, 0.0), {n->num_features})},
                    {Attribute::of_float("epsilon", static_cast<float>(n->options.eps))});
    }
    if (auto* n = dynamic_cast<layers::LayerNorm*>(&m)) {
      std::vector<std::int64_t> axes;
      for (std::size_t i = n->normalized_shape.size(); i > 0; --i) axes.insert(axes.begin(), -static_cast<std::int64_t>(i));
      const std::vector<Attribute> reduce{Attribute::of_ints("axes", axes), Attribute::of_int("keepdims", 1)};
      const std::string mean = g.node("ReduceMean", p, {in}, reduce);
      const std::string d = g.node("Sub", p, {in, mean});
      const std::string var = g.node("ReduceMean", p, {g.node("Mul", p, {d, d})}, reduce);
      const std::string sd = g.node("Sqrt", p, {g.node("Add", p, {var, g.constant(key(p, "eps"), {n->eps}, {})})});
      std::string out = g.node("Div", p, {d, sd});
      if (n->weight.defined()) out = g.node("Mul", p, {out, g.constant(key(p, "weight"), n->weight)});
      if (n->bias.defined()) out = g.node("Add", p, {out, g.constant(key(p, "bias"), n->bias)});
      return out;
    }
    if (auto* n = dynamic_cast<layers::GroupNorm*>(&m)) {
      const auto groups = static_cast<std::size_t>(n->num_groups);
      const std::string grouped = g.node("Reshape", p, {in, g.int64s(key(p, "group_shape"), {0, n->num_groups, -1})});
      const std::string normed =
          g.node("InstanceNormalization", p,
                 {grouped, g.constant(key(p, "ones"), std::vector<double>(groups, 1.0), {n->num_groups}),
                  g.constant(key(p, "zeros"), std::vector<double>(groups, 0.0), {n->num_groups})},
                 {Attribute::of_float("epsilon", static_cast<float>(n->eps))});
      std::string out = g.node("Reshape", p, {normed, g.node("Shape", p, {in})});
      const auto dims = channel_dims(n->num_channels, rank);
      if (n->weight.defined()) out = g.node("Mul", p, {out, g.constant(key(p, "weight"), n->weight.to_vector(), dims)});
      if (n->bias.defined()) out = g.node("Add", p, {out, g.constant(key(p, "bias"), n->bias.to_vector(), dims)});
      return out;
    }
    if (dynamic_cast<layers::ReLU*>(&m)) return g.node("Relu", p, {in});
    if (dynamic_cast<layers::Sigmoid*>(&m)) return g.node("Sigmoid", p, {in});
    if (dynamic_cast<layers::Tanh*>(&m)) return g.node("Tanh", p, {in});
    if (auto* a = dynamic_cast<layers::LeakyReLU*>(&m))
      return g.node("LeakyRelu", p, {in}, {Attribute::of_float("alpha", static_cast<float>(a->negative_slope))});
    if (auto* a = dynamic_cast<layers::GELU*>(&m)) return gelu(p, in, a->approximate == "tanh");
    if (auto* c = dynamic_cast<layers::Clamp*>(&m)) return clip(p, in, c->lo, c->hi);
    if (dynamic_cast<layers::Dropout*>(&m) || dynamic_cast<layers::Identity*>(&m)) return in;  // no node
    if (auto* f = dynamic_cast<layers::Flatten*>(&m)) {
      const std::int64_t start = f->start_dim < 0 ? f->start_dim + rank : f->start_dim;
      const std::int64_t end = f->end_dim < 0 ? f->end_dim + rank : f->end_dim;
      if (start == 0)
        throw std::invalid_argument("export_onnx: " + where(p, m) +
                                    " merges the batch dim (start_dim 0); only start_dim >= 1 keeps the batch dynamic");
      if (end == rank - 1 && start == 1) return g.node("Flatten", p, {in}, {Attribute::of_int("axis", 1)});
      return reshape_keeping_batch(p, in, y);
    }
    if (auto* u = dynamic_cast<layers::Unflatten*>(&m)) {
      const std::int64_t dim = u->dim < 0 ? u->dim + rank : u->dim;
      if (dim == 0)
        throw std::invalid_argument("export_onnx: " + where(p, m) + " splits the batch dim; the batch must stay dim 0");
      return reshape_keeping_batch(p, in, y);
    }
    if (auto* mp = dynamic_cast<layers::MaxPool2d*>(&m)) {
      const std::int64_t eh = pool_end_pad(x.shape()[rank - 2], mp->kernel_size.h, mp->stride.h, mp->padding.h, mp->dilation.h,
                                           mp->ceil_mode);
      const std::int64_t ew = pool_end_pad(x.shape()[rank - 1], mp->kernel_size.w, mp->stride.w, mp->padding.w, mp->dilation.w,
                                           mp->ceil_mode);
      std::string src = in;
      std::vector<std::int64_t> pads{mp->padding.h, mp->padding.w, eh, ew};
      if (eh >= mp->kernel_size.h || ew >= mp->kernel_size.w) {
        // ONNX Runtime refuses pads >= kernel_shape (a dilated window): pad with -inf first
        src = pad(p, in, pads, -std::numeric_limits<double>::infinity());
        pads = {0, 0, 0, 0};
      }
      std::vector<Attribute> at{Attribute::of_ints("kernel_shape", {mp->kernel_size.h, mp->kernel_size.w}),
                                Attribute::of_ints("strides", {mp->stride.h, mp->stride.w}), Attribute::of_ints("pads", pads)};
      if (!(mp->dilation == layers::Size2(1))) at.push_back(Attribute::of_ints("dilations", {mp->dilation.h, mp->dilation.w}));
      return g.node("MaxPool", p, {src}, at);
    }
    if (auto* ap = dynamic_cast<layers::AvgPool2d*>(&m)) {
      const layers::Size2 k = ap->kernel_size, st = ap->stride, pd = ap->padding;
      const std::int64_t h = x.shape()[rank - 2], w = x.shape()[rank - 1];
      const std::int64_t eh = pool_end_pad(h, k.h, st.h, pd.h, 1, ap->ceil_mode);
      const std::int64_t ew = pool_end_pad(w, k.w, st.w, pd.w, 1, ap->ceil_mode);
      const std::string out =
          g.node("AveragePool", p, {in},
                 {Attribute::of_ints("kernel_shape", {k.h, k.w}), Attribute::of_ints("strides", {st.h, st.w}),
                  Attribute::of_ints("pads", {pd.h, pd.w, eh, ew}),
                  Attribute::of_int("count_include_pad", ap->count_include_pad ? 1 : 0)});
      if (!ap->count_include_pad || (eh == pd.h && ew == pd.w)) return out;
      // count_include_pad: ONNX's divisor is the window clipped to the input plus *all* its
      // padding, tapegrad's (PyTorch's) the window clipped to in + padding, without the end
      // padding added for ceil_mode. Each output is rescaled by ONNX's divisor / tapegrad's.
      // (Not a zero Pad + count_include_pad 0: ONNX Runtime 1.20.1 fuses such a Pad into the
      // pool's pads and then leaves it out of the divisor.)
      const std::int64_t oh = y.shape()[rank - 2], ow = y.shape()[rank - 1];
      auto span = [](std::int64_t i, std::int64_t s, std::int64_t pad, std::int64_t kernel, std::int64_t in_size,
                     std::int64_t end) {
        const std::int64_t start = i * s - pad;
        return static_cast<double>(std::min(start + kernel, in_size + end) - start);
      };
      std::vector<double> scale(static_cast<std::size_t>(oh * ow));
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j)
          scale[i * ow + j] = span(i, st.h, pd.h, k.h, h, eh) * span(j, st.w, pd.w, k.w, w, ew) /
                              (span(i, st.h, pd.h, k.h, h, pd.h) * span(j, st.w, pd.w, k.w, w, pd.w));
      return g.node("Mul", p, {out, g.constant(key(p, "divisor_scale"), scale, {oh, ow})});
    }
    if (auto* ap = dynamic_cast<layers::AdaptiveAvgPool2d*>(&m)) {
      const std::int64_t h = x.shape()[rank - 2], w = x.shape()[rank - 1], oh = ap->output_size.h, ow = ap->output_size.w;
      if (oh == 1 && ow == 1) return g.node("GlobalAveragePool", p, {in});
      if (h % oh != 0 || w % ow != 0)
        throw std::invalid_argument("export_onnx: " + where(p, m) + " pools " + std::to_string(h) + "x" + std::to_string(w) +
                                    " to " + std::to_string(oh) + "x" + std::to_string(ow) +
                                    ": its windows differ in size, which no ONNX pool expresses; expected sizes "
                                    "divisible by the output size, or output (1, 1)");
      return g.node("AveragePool", p, {in},
                    {Attribute::of_ints("kernel_shape", {h / oh, w / ow}), Attribute::of_ints("strides", {h / oh, w / ow})});
    }
    throw std::invalid_argument("export_onnx: cannot export " + where(p, m) +
                                ": no ONNX mapping for that module type (supported: Sequential, Linear, Conv2d, "
                                "BatchNorm1d/2d, BatchNorm1dReLU, LayerNorm, GroupNorm, InstanceNorm1d/2d, MaxPool2d, AvgPool2d, "
                                "AdaptiveAvgPool2d, ReLU, Sigmoid, Tanh, LeakyReLU, GELU, Clamp, ReLUClamp, Flatten, Unflatten, "
                                "Dropout, Identity)");
  }

 private:
  // Clip(in, lo, hi), its bounds as the initializers "<p>.min" and "<p>.max".
  std::string clip(const std::string& p, const std::string& in, double lo, double hi) {
    return g.node("Clip", p, {in, g.constant(key(p, "min"), {lo}, {}), g.constant(key(p, "max"), {hi}, {})});
  }

  std::string running_norm(const std::string& p, const std::string& in, std::int64_t rank, std::int64_t c,
                           const Tensor& weight, const Tensor& bias, const Tensor& mean, const Tensor& var, double eps) {
    const auto n = static_cast<std::size_t>(c);
    const auto gamma = values_or(weight, n, 1.0), beta = values_or(bias, n, 0.0);
    if (rank >= 3)
      return g.node("BatchNormalization", p,
                    {in, g.constant(key(p, "weight"), gamma, {c}), g.constant(key(p, "bias"), beta, {c}),
                     g.constant(key(p, "running_mean"), mean), g.constant(key(p, "running_var"), var)},
                    {Attribute::of_float("epsilon", static_cast<float>(eps))});
    // (N, C): ONNX's BatchNormalization wants (N, C, D1, ...); the same affine map as Mul + Add
    const auto mu = mean.to_vector(), v = var.to_vector();
    std::vector<double> s(n), t(n);
    for (std::size_t i = 0; i < n; ++i) {
      s[i] = gamma[i] / std::sqrt(v[i] + eps);
      t[i] = beta[i] - s[i] * mu[i];
    }
    return g.node("Add", p, {g.node("Mul", p, {in, g.constant(key(p, "scale"), s, {c})}), g.constant(key(p, "shift"), t, {c})});
  }

  std::string gelu(const std::string& p, const std::string& in, bool tanh_form) {
    const std::string half_x = g.node("Mul", p, {in, g.constant(key(p, "half"), {0.5}, {})});
    const std::string one = g.constant(key(p, "one"), {1.0}, {});
    std::string inner;
    if (!tanh_form) {
      inner = g.node("Erf", p, {g.node("Mul", p, {in, g.constant(key(p, "inv_sqrt2"), {1.0 / std::sqrt(2.0)}, {})})});
    } else {  // tanh(√(2/π)·(x + 0.044715·x³))
      const std::string x3 = g.node("Mul", p, {g.node("Mul", p, {in, in}), in});
      const std::string sum = g.node("Add", p, {in, g.node("Mul", p, {x3, g.constant(key(p, "c"), {0.044715}, {})})});
      inner = g.node("Tanh", p, {g.node("Mul", p, {sum, g.constant(key(p, "k"), {std::sqrt(2.0 / M_PI)}, {})})});
    }
    return g.node("Mul", p, {half_x, g.node("Add", p, {inner, one})});
  }

  // Pad (constant `value`) of the two spatial dims of (N, C, H, W): pads (top, left, bottom, right).
  std::string pad(const std::string& p, const std::string& in, const std::vector<std::int64_t>& pads, double value) {
    return g.node("Pad", p,
                  {in, g.int64s(key(p, "pads"), {0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]}),
                   g.constant(key(p, "pad_value"), {value}, {})});
  }

  // Reshape to y's shape with the batch dim copied (0) from the input.
  std::string reshape_keeping_batch(const std::string& p, const std::string& in, const Tensor& y) {
    std::vector<std::int64_t> target = ints(y.shape());
    target[0] = 0;
    return g.node("Reshape", p, {in, g.int64s(key(p, "shape"), target)});
  }
};

// The ops the exporter writes that ONNX Runtime 1.20.1's CPU provider has no float64 (DOUBLE)
// kernel for: a DOUBLE graph with one of them does not load there ("Could not find an
// implementation for Conv(11)"). Measured by the onnx_engines ctest (docs/onnx.md).
constexpr const char* kNoFloat64Kernel[] = {"Conv", "InstanceNormalization", "Erf", "AveragePool", "GlobalAveragePool"};

// The warning naming each such op of the graph and the first module that wrote it; empty when
// there is none.
std::string float64_ops_warning(const op::Model& mp, const std::vector<std::string>& paths) {
  std::string found;
  for (const char* op_type : kNoFloat64Kernel)
    for (std::size_t i = 0; i < mp.nodes.size(); ++i)
      if (mp.nodes[i].op_type == op_type) {
        { if (!found.empty()) found += ", "; found += std::string(op_type) + " (" + (paths[i].empty() ? std::string("the model") : "module '" + paths[i] + "'") + ")"; }
        break;
      }
  if (found.empty()) return {};
  return "export_onnx: the float64 graph has " + found +
         ", for which ONNX Runtime's CPU provider (1.20.1) has no float64 kernel: it will not load the model "
         "(onnx.checker accepts it); export a float32 copy for ONNX Runtime (model.to(Dtype::Float32)). What runs "
         "where: docs/onnx.md";
}

void warn(const std::string& message) {
  if (!message.empty()) emit_warning({"onnx_export", "no_float64_kernel", message});
}

Dtype model_dtype(layers::Module& m) {
  for (const auto& [k, t] : m.named_parameters()) return t.dtype();
  for (const auto& [k, t] : m.named_buffers())
    if (t.dtype() != Dtype::Int64) return t.dtype();
  return Dtype::Float32;
}

// export_onnx without the warning: the bytes, and the warning's text (or nothing) in `warning`.
std::string export_graph(layers::Module& model, const Shape& sample_shape, const OnnxExportOptions& o,
                         std::string& warning) {
  for (const auto& [path, m] : model.named_modules())
    if (m->is_training())
      throw std::invalid_argument("export_onnx: expected a model in eval mode, but " + where(path, *m) +
                                  " is in train mode; call eval() first");
  if (o.input_mean.size() != o.input_std.size())
    throw std::invalid_argument("export_onnx: input_mean and input_std must have the same size, got " +
                                std::to_string(o.input_mean.size()) + " and " + std::to_string(o.input_std.size()));
  const Dtype dt = model_dtype(model);
  Shape in_shape{2};
  in_shape.insert(in_shape.end(), sample_shape.begin(), sample_shape.end());
  for (auto d : sample_shape)
    if (d < 0) throw std::invalid_argument("export_onnx: expected a sample shape of sizes >= 0, got " + shape_str(sample_shape));
  const std::int64_t sample_numel = numel_of(sample_shape);  // throws naming the shape when the product overflows

  Exporter ex(dt);
  std::string cur = o.input_name;
  if (!o.input_mean.empty()) {
    const auto n = static_cast<std::int64_t>(o.input_mean.size());
    if (n != 1 && n != sample_numel)
      throw std::invalid_argument("export_onnx: input_mean has " + std::to_string(n) + " values; expected 1 or " +
                                  std::to_string(sample_numel) + " (the sample shape " + shape_str(sample_shape) + ")");
    for (double s : o.input_std)
      if (!(s > 0) || !std::isfinite(s)) throw std::invalid_argument("export_onnx: input_std must be finite and > 0, got " + std::to_string(s));
    std::vector<std::int64_t> dims = n == 1 ? std::vector<std::int64_t>{} : ints(sample_shape);
    cur = ex.g.node("Sub", "preprocess", {cur, ex.g.constant("preprocess.mean", o.input_mean, dims)});
    cur = ex.g.node("Div", "preprocess", {cur, ex.g.constant("preprocess.std", o.input_std, dims)});
  }
  Tensor y;
  {
    NoGradGuard ng;
    Tensor x = Tensor::zeros(in_shape, dt);
    cur = ex.emit(model, "", cur, x, y);
  }
  auto& mp = ex.g.model();
  if (cur == o.input_name) {
    mp.nodes.push_back({"Identity", "output", {cur}, {o.output_name}, {}});  // a model that computes nothing
  } else {
    mp.nodes.back().outputs[0] = o.output_name;  // the last node computes the output (a chain: nothing reads it)
  }
  std::vector<std::int64_t> in_dims = ints(in_shape), out_dims = ints(y.shape());
  in_dims[0] = out_dims[0] = -1;
  mp.inputs.push_back({o.input_name, ex.g.elem(), in_dims});
  mp.outputs.push_back({o.output_name, ex.g.elem(), out_dims});
  mp.graph_name = o.graph_name;
  mp.doc_string = o.doc_string;
  mp.metadata = o.metadata;
  std::string bytes = onnx_proto::encode(mp);
  if (dt == Dtype::Float64) warning = float64_ops_warning(mp, ex.g.node_paths());
  return bytes;
}

}  // namespace

std::string export_onnx(layers::Module& model, const Shape& sample_shape, const OnnxExportOptions& o) {
  std::string warning;
  std::string bytes = export_graph(model, sample_shape, o, warning);
  warn(warning);
  return bytes;
}

void save_onnx(layers::Module& model, const Shape& sample_shape, const std::string& path, const OnnxExportOptions& o) {
  std::string warning;
  atomic_write_file(path, export_graph(model, sample_shape, o, warning));
  warn(warning);  // only once the file is there
}

}  // namespace tapegrad::io
