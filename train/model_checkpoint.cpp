#include <tapegrad/train/model_checkpoint.h>

#include <cmath>
#include <stdexcept>

#include <tapegrad/core/file_io.h>
#include <tapegrad/train/early_stopping.h>

namespace tapegrad::train {

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options)
    : o_(std::move(options)), best_(std::nan("")) {
  if (o_.path.empty()) throw std::invalid_argument("ModelCheckpoint: expected a path, got ''");
}

void ModelCheckpoint::on_fit_begin(TrainState& s) {
  if (!s.is_main_process()) return;
  if (!o_.monitor.empty()) check_output_file(o_.path);
  if (o_.save_last) check_output_file(last_path());
}

void ModelCheckpoint::after_epoch_end(TrainState& s) {
  const EpochLogs& e = s.history.back();
  bool improved = false;
  if (!o_.monitor.empty()) {
    auto v = e.find(o_.monitor);
    if (!v)
      throw std::invalid_argument("ModelCheckpoint: monitor '" + o_.monitor + "' was not logged by epoch " +
                                  std::to_string(e.epoch) + " (logged: " + e.keys() + ")");
    if (!std::isfinite(*v))  // not a value to compare: the run diverged; no file is written
      throw std::runtime_error("ModelCheckpoint: monitor '" + o_.monitor + "' is " + format_double(*v) +
                               " at epoch " + std::to_string(e.epoch) + ", not a value to compare: the run diverged");
    improved = improves(*v, best_, o_.mode);
    if (improved) {
      best_ = *v;
      best_epoch_ = e.epoch;
    }
  }
  if (s.is_main_process() && (improved || o_.save_last)) {  // ranks hold the same state: rank 0 writes
    const optim::CheckpointExtras extras = s.checkpoint_extras();  // with this epoch's best
    Archive a;  // one archive, written to each file
    optim::write_training_checkpoint(a, *s.model, *s.optimizer, e.epoch, s.scheduler, s.generator, &extras,
                                     improved ? o_.path : last_path());
    if (improved) a.save(o_.path);
    if (o_.save_last) a.save(last_path());
  }
  if (s.parallel) s.parallel->barrier();  // the files exist before any rank goes on
}

std::map<std::string, std::string> ModelCheckpoint::state_dict() const {
  return {{"monitor", o_.monitor}, {"best", format_double(best_)}, {"best_epoch", std::to_string(best_epoch_)}};
}

void ModelCheckpoint::load_state_dict(const std::map<std::string, std::string>& s) {
  if (s.empty()) return;
  if (auto it = s.find("monitor"); it != s.end() && it->second != o_.monitor)
    throw std::invalid_argument("the checkpoint monitored '" + it->second + "', this run monitors '" + o_.monitor + "'");
  double best = std::nan("");
  int best_epoch = 0;
  if (auto it = s.find("best"); it != s.end()) best = parse_double(it->second, "best");
  if (auto it = s.find("best_epoch"); it != s.end()) best_epoch = parse_count(it->second, "best_epoch");
  check_best_state(best, best_epoch);
  best_ = best;
  best_epoch_ = best_epoch;
}

LoadedCheckpoint load_model(const std::string& path, layers::Module& model, bool strict) {
  return load_model(Archive::load(path), model, layers::LoadOptions{.strict = strict});
}

LoadedCheckpoint load_model(const Archive& archive, layers::Module& model, const layers::LoadOptions& options) {
  const std::string& path = archive.source();
  LoadedCheckpoint out;
  if (archive.with_prefix("model.").empty())
    throw std::invalid_argument("load_model: '" + path + "' holds no model.* tensors (not a training checkpoint)");
  out.epoch = optim::check_training_checkpoint(archive, "load_model");  // before the model changes
  out.extras.tensors = optim::training_checkpoint_extras(archive);
  try {
    out.result = model.load_from(archive, options, "model.");
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("load_model: '" + path + "': " + e.what());
  }
  out.extras.metadata = archive.metadata();
  return out;
}

optim::CheckpointExtras standardizer_extras(const data::Standardizer& s, const std::string& prefix) {
  optim::CheckpointExtras x;
  for (auto& [k, t] : s.state_dict()) x.tensors.emplace_back(prefix + k, t);
  x.metadata[prefix + "recipe"] = "input = (x - " + prefix + "mean) / " + prefix + "std";
  return x;
}

data::Standardizer read_standardizer(const LoadedCheckpoint& c, const std::string& prefix) {
  std::vector<std::pair<std::string, Tensor>> state;
  for (const auto& [k, t] : c.extras.tensors)
    if (k.rfind(prefix, 0) == 0) state.emplace_back(k.substr(prefix.size()), t);
  if (state.empty())
    throw std::invalid_argument("read_standardizer: the checkpoint holds no " + prefix + "mean / " + prefix +
                                "std tensors (no input preprocessing was saved)");
  try {
    return data::Standardizer::from_state_dict(state);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("read_standardizer: " + std::string(e.what()));
  }
}

optim::CheckpointExtras merge_extras(optim::CheckpointExtras a, const optim::CheckpointExtras& b) {
  a.tensors.insert(a.tensors.end(), b.tensors.begin(), b.tensors.end());
  for (const auto& [k, v] : b.metadata) a.metadata[k] = v;
  return a;
}

}  // namespace tapegrad::train
