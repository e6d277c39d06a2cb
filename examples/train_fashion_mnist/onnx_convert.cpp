#include "onnx_convert.h"

#include <cstdint>

#include <charconv>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string_view>

#include <tapegrad/data/fashion_mnist.h>
#include <tapegrad/io/onnx_export.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/fuse_batch_norm.h>
#include <tapegrad/models/cnn.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/training_checkpoint.h>

namespace fmnist {

using namespace tapegrad;
using namespace tapegrad::io;

namespace {

// The whole string as a decimal int64 >= lo (an optional '-', then digits): no spaces, no '+',
// no fraction or exponent ("16.9", "1e3" are not integers), nothing beyond int64 ("1e30",
// twenty digits); nullopt otherwise.
std::optional<std::int64_t> parse_integer(std::string_view text, std::int64_t lo) {
  std::int64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size() || v < lo) return std::nullopt;
  return v;
}

// The whole string as a decimal integer in [lo, hi], naming the key when it is not one.
std::int64_t parse_int(const std::string& text, const std::string& key, const std::string& path, std::int64_t lo,
                       std::uint64_t hi = static_cast<std::uint64_t>(INT64_MAX)) {
  const auto v = parse_integer(text, lo);
  if (!v || static_cast<std::uint64_t>(*v) > hi)
    throw std::invalid_argument("'" + path + "': " + key + ": expected an integer " +
                                (hi >= static_cast<std::uint64_t>(INT64_MAX)
                                     ? ">= " + std::to_string(lo)
                                     : "from " + std::to_string(lo) + " to " + std::to_string(hi)) +
                                ", got '" + text + "'");
  return *v;
}

std::vector<std::int64_t> parse_widths(const std::string& text, const std::string& key, const std::string& path) {
  std::vector<std::int64_t> out;
  std::size_t pos = 0;
  while (pos <= text.size() && !text.empty()) {
    const std::size_t comma = text.find(',', pos);
    const std::string_view item = std::string_view(text).substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const auto v = parse_integer(item, 1);
    if (!v)
      throw std::invalid_argument("'" + path + "': " + key + ": expected positive integers separated by commas, got '" +
                                  text + "'");
    out.push_back(*v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

double parse_double(const std::string& text, const std::string& key, const std::string& path) {
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size() || !std::isfinite(v))
    throw std::invalid_argument("'" + path + "': " + key + ": expected a finite number, got '" + text + "'");
  return v;
}

// The parameters an architecture declares, bounded before the model is built by what the
// checkpoint's model tensors hold (each parameter takes at least 4 bytes): metadata cannot
// make the converter allocate beyond the file.
struct ParameterBound {
  std::uint64_t limit, used = 0;
  const std::string& path;
  // a layer of at least a x b parameters, declared by `key` = `text`
  void add(std::int64_t a, std::int64_t b, const std::string& key, const std::string& text) {
    const auto ua = static_cast<std::uint64_t>(a), ub = static_cast<std::uint64_t>(b);
    if (ub != 0 && ua > (limit - used) / ub)
      throw std::invalid_argument("'" + path + "': " + key + ": declares '" + text.substr(0, 200) + "', layers of over " +
                                  std::to_string(limit) + " parameters, more than the checkpoint's model tensors hold (" +
                                  std::to_string(4 * limit) + " bytes)");
    used += ua * ub;
  }
};

}  // namespace

std::shared_ptr<layers::Sequential> model_from_fmnist_checkpoint(const SafetensorsContent& c, const std::string& path) {
  auto meta = [&](const char* k) -> const std::string* {
    auto it = c.metadata.find(k);
    return it == c.metadata.end() ? nullptr : &it->second;
  };
  for (const char* k : {"fmnist.hidden", "fmnist.norm", "fmnist.dropout"})
    if (!meta(k))
      throw std::invalid_argument("'" + path + "' holds no architecture: metadata key '" + std::string(k) +
                                  "' is missing (expected a checkpoint written by train_fashion_mnist)");
  const std::string model = meta("fmnist.model") ? *meta("fmnist.model") : "mlp";
  const std::string& norm = *meta("fmnist.norm");
  const double dropout = parse_double(*meta("fmnist.dropout"), "fmnist.dropout", path);
  if (!(dropout >= 0 && dropout < 1))
    throw std::invalid_argument("'" + path + "': fmnist.dropout: expected a value in [0, 1), got " + *meta("fmnist.dropout"));
  const std::int64_t pixels = data::kFashionMnistPixels, classes = data::kFashionMnistClasses;
  std::uint64_t model_bytes = 0;
  for (const auto& [k, v] : c.tensors)
    if (k.rfind("model.", 0) == 0) model_bytes += v.nbytes();
  ParameterBound bound{model_bytes / 4, 0, path};
  Generator init(0);
  std::shared_ptr<layers::Sequential> net;
  if (model == "mlp") {
    models::MLPOptions o;
    o.norm = models::parse_norm(norm);
    o.dropout = dropout;
    std::vector<std::int64_t> sizes{pixels};
    for (auto h : parse_widths(*meta("fmnist.hidden"), "fmnist.hidden", path)) sizes.push_back(h);
    sizes.push_back(classes);
    for (std::size_t i = 0; i + 1 < sizes.size(); ++i)
      bound.add(sizes[i], sizes[i + 1], "fmnist.hidden", *meta("fmnist.hidden"));
    net = std::make_shared<models::MLP>(sizes, o, init);
  } else if (model == "cnn") {
    models::CNNOptions o;
    o.height = o.width = 28;
    if (meta("fmnist.cnn.channels")) o.channels = parse_widths(*meta("fmnist.cnn.channels"), "fmnist.cnn.channels", path);
    if (meta("fmnist.cnn.head")) o.hidden = parse_int(*meta("fmnist.cnn.head"), "fmnist.cnn.head", path, 0, bound.limit);
    if (meta("fmnist.cnn.groups"))
      o.groups = parse_int(*meta("fmnist.cnn.groups"), "fmnist.cnn.groups", path, 1, bound.limit);
    const std::string channels = meta("fmnist.cnn.channels") ? *meta("fmnist.cnn.channels") : std::string("(default)");
    std::int64_t prev = o.in_channels;
    for (auto ch : o.channels) bound.add(prev, ch, "fmnist.cnn.channels", channels), prev = ch;
    bound.add(prev, o.hidden, "fmnist.cnn.head", std::to_string(o.hidden));
    o.num_classes = classes;
    o.norm = models::parse_conv_norm(norm);
    net = std::make_shared<layers::Sequential>();
    net->push_back(std::make_shared<layers::Unflatten>(1, Shape{1, 28, 28}));
    net->push_back(std::make_shared<models::CNN>(o, init));
  } else {
    throw std::invalid_argument("'" + path + "': fmnist.model: expected mlp or cnn, got '" + model + "'");
  }
  layers::StateDict state;
  for (const auto& [k, v] : c.tensors)
    if (k.rfind("model.", 0) == 0) state.insert(k.substr(6), v);
  if (state.size() == 0)
    throw std::invalid_argument("'" + path + "' holds no model tensors (keys starting with 'model.')");
  net->load_state_dict(state, true);
  net->eval();
  return net;
}

std::string convert_checkpoint_to_onnx(const std::string& checkpoint, const std::string& out, const OnnxConvertOptions& options) {
  const SafetensorsContent c = load_safetensors(checkpoint);
  std::shared_ptr<layers::Sequential> net = model_from_fmnist_checkpoint(c, checkpoint);
  std::string summary;
  if (options.fuse_batch_norm) {
    layers::FuseReport r;
    net = layers::fuse_batch_norm(*net, &r);
    summary += "fused " + std::to_string(r.fused) + " BatchNorm layers; ";
  }
  OnnxExportOptions o;
  o.graph_name = "fashion_mnist";
  for (const auto& [k, v] : c.metadata)
    if (k.rfind("fmnist.", 0) == 0) o.metadata.emplace_back(k, v);
  layers::CheckpointExtras extras;
  extras.tensors = optim::training_checkpoint_extras(Archive(c, checkpoint));
  const Tensor* mean = extras.find("preprocess.mean");
  const Tensor* std = extras.find("preprocess.std");
  if (options.fold_preprocessing) {
    if (!mean || !std)
      throw std::invalid_argument("'" + checkpoint +
                                  "' holds no preprocessing (preprocess.mean / preprocess.std) to fold into the graph; "
                                  "convert it with --no-fold-preprocessing and standardise the input yourself");
    o.input_mean = mean->to_vector();
    o.input_std = std->to_vector();
    o.metadata.emplace_back("preprocess", "input = pixels / 255 (the standardisation (x - mean)/std is in the graph)");
    summary += "standardisation folded in; ";
  } else {
    auto it = c.metadata.find("preprocess");
    std::string recipe = it != c.metadata.end() ? it->second : "unknown: the checkpoint does not say";
    if (mean && std && mean->numel() == 1 && std->numel() == 1)
      recipe += " with preprocess.mean = " + std::to_string(mean->item()) + ", preprocess.std = " + std::to_string(std->item());
    o.metadata.emplace_back("preprocess", recipe);
  }
  save_onnx(*net, {data::kFashionMnistPixels}, out, o);
  return summary + "wrote " + out + ": input (N, 784) -> output (N, 10) logits";
}

}  // namespace fmnist
