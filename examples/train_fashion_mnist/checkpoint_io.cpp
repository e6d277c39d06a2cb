#include "checkpoint_io.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/data/fashion_mnist.h>

namespace fmnist {

using namespace tapegrad;

namespace {

std::string g17(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

optim::CheckpointExtras checkpoint_extras(const Config& c, const data::Standardizer& s) {
  optim::CheckpointExtras x;
  for (auto& [k, t] : s.state_dict()) x.tensors.emplace_back("preprocess." + k, t);
  auto join = [](const std::vector<std::int64_t>& v) {
    std::string out;
    for (auto h : v) {
      if (!out.empty()) out += ',';
      out += std::to_string(h);
    }
    return out;
  };
  x.metadata = {{"preprocess", "x = pixels / 255; input = (x - preprocess.mean) / preprocess.std"},
                {"fmnist.model", c.model},
                {"fmnist.hidden", join(c.hidden)},
                {"fmnist.cnn.channels", join(c.cnn.channels)},
                {"fmnist.cnn.head", std::to_string(c.cnn.head)},
                {"fmnist.cnn.groups", std::to_string(c.cnn.groups)},
                {"fmnist.norm", c.norm},
                {"fmnist.dropout", g17(c.dropout)},
                {"fmnist.epochs", std::to_string(c.epochs)},
                {"fmnist.schedule", c.schedule}};
  return x;
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  const SafetensorsContent c = load_safetensors(path);
  CheckpointInfo info;
  // "preprocess.*" is the Standardizer's state_dict; files written before it carried
  // "feature_shape" hold the 784 pixels of (N, 784) rows.
  std::vector<std::pair<std::string, Tensor>> pre;
  for (const auto& [k, t] : c.tensors)
    if (k.rfind("preprocess.", 0) == 0) pre.emplace_back(k.substr(11), t);
  if (!pre.empty()) {
    if (!c.find("preprocess.feature_shape"))
      pre.emplace_back("feature_shape", Tensor::from_int64({data::kFashionMnistPixels}, {1}));
    try {
      info.standardizer = data::Standardizer::from_state_dict(pre);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("'" + path + "': preprocessing: " + e.what());
    }
  }
  auto meta = [&](const char* k) -> const std::string* {
    auto it = c.metadata.find(k);
    return it == c.metadata.end() ? nullptr : &it->second;
  };
  if (meta("fmnist.hidden") && meta("fmnist.norm") && meta("fmnist.dropout")) {
    Config a;
    try {
      a.hidden = parse_hidden(*meta("fmnist.hidden"));
      a.dropout = std::stod(*meta("fmnist.dropout"));
      if (meta("fmnist.epochs")) a.epochs = std::stoi(*meta("fmnist.epochs"));
      if (meta("fmnist.model")) a.model = *meta("fmnist.model");  // absent: written before --model cnn, an MLP
      if (meta("fmnist.cnn.channels")) a.cnn.channels = parse_hidden(*meta("fmnist.cnn.channels"), "fmnist.cnn.channels");
      if (meta("fmnist.cnn.head")) a.cnn.head = std::stoll(*meta("fmnist.cnn.head"));
      if (meta("fmnist.cnn.groups")) a.cnn.groups = std::stoll(*meta("fmnist.cnn.groups"));
    } catch (const std::exception& e) {
      throw std::invalid_argument("'" + path + "': malformed fmnist.* metadata: " + e.what());
    }
    a.norm = *meta("fmnist.norm");
    if (meta("fmnist.schedule")) a.schedule = *meta("fmnist.schedule");
    if (!(a.dropout >= 0 && a.dropout < 1) || a.epochs < 1)
      throw std::invalid_argument("'" + path + "': fmnist.dropout " + *meta("fmnist.dropout") + " or fmnist.epochs out of range");
    info.architecture = a;
  }
  return info;
}

double evaluate_checkpoint(const std::string& path, const data::Dataset& raw,
                           std::vector<std::vector<std::int64_t>>* confusion, DataParallel* parallel) {
  const CheckpointInfo info = read_checkpoint_info(path);
  if (!info.standardizer)
    throw std::invalid_argument("'" + path + "' holds no input preprocessing (preprocess.mean / preprocess.std); "
                                "it was written before checkpoints kept it");
  if (!info.architecture)
    throw std::invalid_argument("'" + path + "' holds no architecture (fmnist.hidden / fmnist.norm metadata)");
  Generator init(0), drop(0);
  auto model = build_model(*info.architecture, data::kFashionMnistPixels, data::kFashionMnistClasses, init, &drop);
  const SafetensorsContent c = load_safetensors(path);
  layers::StateDict state;
  for (const auto& [k, v] : c.tensors)
    if (k.rfind("model.", 0) == 0) state.insert(k.substr(6), v);
  model->load_state_dict(state, true);
  Evaluation e = evaluate_model(*model, info.standardizer->transform(raw), parallel);
  if (confusion) *confusion = std::move(e.confusion);
  return e.accuracy();
}

}  // namespace fmnist
