#include "checkpoint_io.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <tapegrad/core/archive.h>
#include <tapegrad/core/safetensors.h>
#include <tapegrad/data/fashion_mnist.h>
#include <tapegrad/train/early_stopping.h>

namespace fmnist {

using namespace tapegrad;

namespace {

std::string g17(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string join_dims(const std::vector<std::int64_t>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);  // appended: g++ 12's -Wrestrict misreads "," + std::string
  }
  return out;
}

// The model's Linear (rank 2) and Conv2d (rank 4) weights as the metadata describes them,
// checked against the file's tensors before anything is built: a lying or corrupted
// metadata line must not make us allocate its architecture (4,000,000 channels), nor be
// blamed on command-line flags the user never gave.
void check_architecture_against_tensors(const std::string& path, const Config& a, const SafetensorsContent& c) {
  struct Want {
    Shape shape;         // -1: not checked (follows from the image size)
    std::string source;  // the metadata key that implies it
  };
  std::vector<Want> want;
  const std::int64_t classes = data::kFashionMnistClasses;
  if (a.model == "cnn") {
    std::int64_t in = 1;
    for (auto ch : a.cnn.channels) {
      want.push_back({{ch, in, 3, 3}, "fmnist.cnn.channels " + join_dims(a.cnn.channels)});
      in = ch;
    }
    if (a.cnn.head > 0) {
      want.push_back({{a.cnn.head, -1}, "fmnist.cnn.head " + std::to_string(a.cnn.head)});
      want.push_back({{classes, a.cnn.head}, "fmnist.cnn.head " + std::to_string(a.cnn.head)});
    } else {
      want.push_back({{classes, -1}, "fmnist.cnn.channels " + join_dims(a.cnn.channels)});
    }
  } else {
    std::int64_t in = data::kFashionMnistPixels;
    for (auto h : a.hidden) {
      want.push_back({{h, in}, "fmnist.hidden " + join_dims(a.hidden)});
      in = h;
    }
    want.push_back({{classes, in}, "fmnist.hidden " + join_dims(a.hidden)});
  }
  std::vector<std::pair<std::string, Shape>> have;  // file order = the model's layer order
  for (const auto& [k, t] : c.tensors)
    if (k.rfind("model.", 0) == 0 && k.size() > 7 && k.compare(k.size() - 7, 7, ".weight") == 0 &&
        (t.dim() == 2 || t.dim() == 4))
      have.emplace_back(k, t.shape());
  const std::string where = "'" + path + "': its metadata (fmnist.model " + a.model + ") does not match its tensors: ";
  for (std::size_t i = 0; i < want.size(); ++i) {
    const Shape& w = want[i].shape;
    if (i >= have.size())
      throw std::invalid_argument(where + want[i].source + " implies a weight " + shape_str(w) + " (layer " +
                                  std::to_string(i + 1) + ") that the file does not hold; refusing to build the "
                                  "model (the file was edited or corrupted)");
    const Shape& h = have[i].second;
    bool same = h.size() == w.size();
    for (std::size_t d = 0; same && d < w.size(); ++d) same = w[d] < 0 || w[d] == h[d];
    if (!same)
      throw std::invalid_argument(where + want[i].source + " implies " + shape_str(w) + " for " + have[i].first +
                                  ", the file holds " + shape_str(h) + " (-1: any); refusing to build the model "
                                  "(the file was edited or corrupted)");
  }
  if (have.size() > want.size())
    throw std::invalid_argument(where + "it holds " + std::to_string(have.size()) + " Linear/Conv2d weights, the "
                                "metadata describes " + std::to_string(want.size()) + " (" + have[want.size()].first +
                                " is one too many); refusing to build the model");
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
                {"fmnist.schedule", c.schedule},
                {"fmnist.lr", g17(learning_rate(c))},
                {"fmnist.batch_size", std::to_string(c.batch_size)},
                {"fmnist.optimizer", c.optimizer}};
  return x;
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  const Archive c = Archive::load(path);
  CheckpointInfo info;
  // The extras "preprocess.*" are the Standardizer's state_dict; files written before it
  // carried "feature_shape" hold the 784 pixels of (N, 784) rows.
  std::vector<std::pair<std::string, Tensor>> pre;
  for (const auto& [k, t] : optim::training_checkpoint_extras(c))
    if (k.rfind("preprocess.", 0) == 0) pre.emplace_back(k.substr(11), t);
  if (!pre.empty()) {
    if (std::none_of(pre.begin(), pre.end(), [](const auto& p) { return p.first == "feature_shape"; }))
      pre.emplace_back("feature_shape", Tensor::from_int64({data::kFashionMnistPixels}, {1}));
    try {
      info.standardizer = data::Standardizer::from_state_dict(pre);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("'" + path + "': preprocessing: " + e.what());
    }
  }
  auto meta = [&](const char* k) -> const std::string* {
    auto it = c.metadata().find(k);
    return it == c.metadata().end() ? nullptr : &it->second;
  };
  try {  // absent in files written before they were stored
    if (meta("fmnist.lr")) {
      std::size_t used = 0;
      const double lr = std::stod(*meta("fmnist.lr"), &used);
      if (used != meta("fmnist.lr")->size() || !(lr > 0 && std::isfinite(lr))) throw std::invalid_argument("not > 0");
      info.learning_rate = lr;
    }
    if (meta("fmnist.batch_size")) {
      std::size_t used = 0;
      const long long b = std::stoll(*meta("fmnist.batch_size"), &used);
      if (used != meta("fmnist.batch_size")->size() || b < 1) throw std::invalid_argument("not >= 1");
      info.batch_size = b;
    }
  } catch (const std::exception&) {
    throw std::invalid_argument("'" + path + "': malformed fmnist.lr '" +
                                (meta("fmnist.lr") ? *meta("fmnist.lr") : std::string()) + "' or fmnist.batch_size '" +
                                (meta("fmnist.batch_size") ? *meta("fmnist.batch_size") : std::string()) +
                                "': expected a finite number > 0 and an integer >= 1");
  }
  if (meta("fmnist.optimizer")) {
    const std::string& o = *meta("fmnist.optimizer");
    if (o != "sgd" && o != "adam" && o != "adamw")
      throw std::invalid_argument("'" + path + "': malformed fmnist.optimizer '" + o + "': expected sgd, adam or adamw");
    info.optimizer = o;
  }
  if (meta("fmnist.hidden") && meta("fmnist.norm") && meta("fmnist.dropout")) {
    Config a;
    try {
      a.hidden = parse_hidden(*meta("fmnist.hidden"));
      // whole strings: stoi/stoll/stod read "16.9" as 16 and "0.2x" as 0.2
      a.dropout = train::parse_double(*meta("fmnist.dropout"), "fmnist.dropout");
      if (meta("fmnist.epochs")) a.epochs = train::parse_count(*meta("fmnist.epochs"), "fmnist.epochs");
      if (meta("fmnist.model")) a.model = *meta("fmnist.model");  // absent: written before --model cnn, an MLP
      if (meta("fmnist.cnn.channels")) a.cnn.channels = parse_hidden(*meta("fmnist.cnn.channels"), "fmnist.cnn.channels");
      if (meta("fmnist.cnn.head")) a.cnn.head = train::parse_count(*meta("fmnist.cnn.head"), "fmnist.cnn.head");
      if (meta("fmnist.cnn.groups")) a.cnn.groups = train::parse_count(*meta("fmnist.cnn.groups"), "fmnist.cnn.groups");
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
  const SafetensorsContent c = load_safetensors(path);
  check_architecture_against_tensors(path, *info.architecture, c);
  Generator init(0), drop(0);
  std::shared_ptr<layers::Sequential> model;
  try {
    model = build_model(*info.architecture, data::kFashionMnistPixels, data::kFashionMnistClasses, init, &drop);
  } catch (const std::invalid_argument& e) {  // the settings came from the file, not from flags
    throw std::invalid_argument("'" + path + "': cannot build the model its metadata describes: " + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("'" + path + "': cannot build the model its metadata describes: " + e.what());
  }
  layers::StateDict state;
  for (const auto& [k, v] : c.tensors)
    if (k.rfind("model.", 0) == 0) state.insert(k.substr(6), v);
  try {
    model->load_state_dict(state, true);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("'" + path + "': " + e.what());
  }
  Evaluation e = evaluate_model(*model, info.standardizer->transform(raw), parallel);
  if (confusion) *confusion = std::move(e.confusion);
  return e.accuracy();
}

}  // namespace fmnist
