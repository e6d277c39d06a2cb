#include "checkpoint_io.h"

#include <cstdio>
#include <map>
#include <stdexcept>

#include "core/safetensors.h"

namespace fmnist {

using namespace tapegrad;

namespace {

constexpr const char* kFormat = "tapegrad-fashion-mnist-v1";

std::string hidden_str(const std::vector<std::int64_t>& h) {
  std::string s;
  for (std::size_t i = 0; i < h.size(); ++i) s += (i ? "," : "") + std::to_string(h[i]);
  return s;
}

std::string exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// What must match for a resumed run to continue the interrupted one.
std::map<std::string, std::string> signature(const Config& c) {
  return {{"hidden", hidden_str(c.hidden)},
          {"norm", c.norm},
          {"dropout", exact(c.dropout)},
          {"optimizer", c.optimizer},
          {"seed", std::to_string(c.seed)},
          {"limit", std::to_string(c.limit)},
          {"batch_size", std::to_string(c.batch_size)}};
}

SafetensorsContent read_checked(const std::string& path) {
  SafetensorsContent content = load_safetensors(path);
  auto it = content.metadata.find("format");
  if (it == content.metadata.end() || it->second != kFormat)
    throw std::runtime_error("checkpoint " + path + ": expected format '" + kFormat + "', got '" +
                             (it == content.metadata.end() ? std::string("(none)") : it->second) + "'");
  return content;
}

const std::string& meta(const SafetensorsContent& c, const std::string& path, const std::string& key) {
  auto it = c.metadata.find(key);
  if (it == c.metadata.end()) throw std::runtime_error("checkpoint " + path + ": metadata '" + key + "' is missing");
  return it->second;
}

layers::StateDict with_prefix(const SafetensorsContent& c, const std::string& prefix) {
  layers::StateDict d;
  for (const auto& [k, v] : c.tensors)
    if (k.rfind(prefix, 0) == 0) d.insert(k.substr(prefix.size()), v);
  return d;
}

}  // namespace

void save_training_checkpoint(const std::string& path, const Config& config, const TrainingState& state,
                              const layers::Module& model, const optim::Optimizer& opt, const Generator& data_gen,
                              const Generator& drop_gen) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [k, v] : model.state_dict()) tensors.emplace_back("model." + k, v);
  for (const auto& [k, v] : opt.state_dict()) tensors.emplace_back("optim." + k, v);
  std::map<std::string, std::string> md = signature(config);
  md["format"] = kFormat;
  md["epoch"] = std::to_string(state.epoch);
  md["best_epoch"] = std::to_string(state.best_epoch);
  md["best_val_accuracy"] = exact(state.best_val_accuracy);
  md["data_gen"] = data_gen.get_state();
  md["drop_gen"] = drop_gen.get_state();
  save_safetensors(path, tensors, md);
}

TrainingState load_training_checkpoint(const std::string& path, const Config& config, layers::Module& model,
                                       optim::Optimizer& opt, Generator& data_gen, Generator& drop_gen) {
  const SafetensorsContent c = read_checked(path);
  for (const auto& [k, v] : signature(config)) {
    const std::string& saved = meta(c, path, k);
    if (saved != v)
      throw std::runtime_error("checkpoint " + path + " was written with " + k + " = " + saved +
                               ", this run has " + k + " = " + v + "; resume with the same options");
  }
  TrainingState st;
  try {
    st.epoch = std::stoi(meta(c, path, "epoch"));
    st.best_epoch = std::stoi(meta(c, path, "best_epoch"));
    st.best_val_accuracy = std::stod(meta(c, path, "best_val_accuracy"));
  } catch (const std::logic_error&) {
    throw std::runtime_error("checkpoint " + path + ": malformed epoch or best_val_accuracy metadata");
  }
  Generator dg, pg;
  dg.set_state(meta(c, path, "data_gen"));
  pg.set_state(meta(c, path, "drop_gen"));

  // Model then optimizer, each load atomic; if the optimizer's fails, the model is put back.
  std::vector<std::pair<std::string, Tensor>> before;
  for (const auto& [k, v] : model.state_dict()) before.emplace_back(k, v.clone());
  model.load_state_dict(with_prefix(c, "model."), true);
  try {
    opt.load_state_dict(with_prefix(c, "optim."));
  } catch (...) {
    layers::StateDict old;
    for (const auto& [k, v] : before) old.insert(k, v);
    model.load_state_dict(old, true);
    throw;
  }
  data_gen = dg;
  drop_gen = pg;
  return st;
}

void load_model_weights(const std::string& path, layers::Module& model) {
  model.load_state_dict(with_prefix(read_checked(path), "model."), true);
}

}  // namespace fmnist
