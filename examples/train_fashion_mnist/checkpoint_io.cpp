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

std::vector<double> f64_values(const Tensor* t, const std::string& path, const std::string& key) {
  if (!t) return {};
  if (t->dtype() != Dtype::Float64 || t->dim() != 1 || t->numel() < 1)
    throw std::invalid_argument("'" + path + "': '" + key + "' must be a float64 vector, got " + shape_str(t->shape()) +
                                " " + dtype_name(t->dtype()));
  return t->to_vector();
}

}  // namespace

optim::CheckpointExtras checkpoint_extras(const Config& c, const data::Standardizer& s) {
  optim::CheckpointExtras x;
  const auto n = static_cast<std::int64_t>(s.mean().size());
  x.tensors.emplace_back("preprocess.mean", Tensor::from_vector(s.mean(), {n}, Dtype::Float64));
  x.tensors.emplace_back("preprocess.std", Tensor::from_vector(s.stddev(), {n}, Dtype::Float64));
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
  const auto mean = f64_values(c.find("preprocess.mean"), path, "preprocess.mean");
  const auto std = f64_values(c.find("preprocess.std"), path, "preprocess.std");
  if (!mean.empty() || !std.empty()) {
    try {
      info.standardizer = data::Standardizer::from_stats(data::kFashionMnistPixels, mean, std);
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
