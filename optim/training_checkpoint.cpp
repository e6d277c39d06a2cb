#include <tapegrad/optim/training_checkpoint.h>

#include <stdexcept>

#include <tapegrad/core/safetensors.h>

namespace tapegrad::optim {

namespace {

layers::StateDict with_prefix(const SafetensorsContent& c, const std::string& prefix) {
  layers::StateDict d;
  for (const auto& [k, v] : c.tensors)
    if (k.rfind(prefix, 0) == 0) d.insert(k.substr(prefix.size()), v);
  return d;
}

layers::StateDict deep_copy(const layers::StateDict& s) {
  layers::StateDict d;
  for (const auto& [k, v] : s) d.insert(k, v.clone());
  return d;
}

std::string meta(const SafetensorsContent& c, const std::string& key) {
  auto it = c.metadata.find(key);
  return it == c.metadata.end() ? std::string() : it->second;
}

}  // namespace

void save_training_checkpoint(const std::string& path, const layers::Module& model, const Optimizer& optimizer,
                              std::int64_t epoch, const LRScheduler* scheduler, const Generator* generator,
                              const CheckpointExtras* extras) {
  if (epoch < 0)
    throw std::invalid_argument("save_training_checkpoint('" + path + "'): expected 'epoch' >= 0, got " +
                                std::to_string(epoch));
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [k, v] : model.state_dict()) tensors.emplace_back("model." + k, v);
  for (const auto& [k, v] : optimizer.state_dict()) tensors.emplace_back("optimizer." + k, v);
  if (scheduler)
    for (const auto& [k, v] : scheduler->state_dict()) tensors.emplace_back("scheduler." + k, v);
  tensors.emplace_back("epoch", Tensor::from_int64({epoch}, {}));
  std::map<std::string, std::string> md{{"format", kTrainingCheckpointFormat},
                                        {"format_version", "1"},
                                        {"model", model.type_name()},
                                        {"optimizer", optimizer.type_name()},
                                        {"scheduler", scheduler ? scheduler->type_name() : "none"}};
  if (generator) md["rng_state"] = generator->get_state();
  if (extras) {
    for (const auto& [k, v] : extras->tensors) {
      if (k == "epoch" || k.rfind("model.", 0) == 0 || k.rfind("optimizer.", 0) == 0 || k.rfind("scheduler.", 0) == 0)
        throw std::invalid_argument("save_training_checkpoint: extra tensor '" + k + "' uses a reserved name");
      tensors.emplace_back(k, v);
    }
    for (const auto& [k, v] : extras->metadata)
      if (!md.emplace(k, v).second)
        throw std::invalid_argument("save_training_checkpoint: extra metadata '" + k + "' uses a reserved key");
  }
  save_safetensors(path, tensors, md);
}

std::int64_t load_training_checkpoint(const std::string& path, layers::Module& model, Optimizer& optimizer,
                                      LRScheduler* scheduler, Generator* generator) {
  const SafetensorsContent c = load_safetensors(path);
  const std::string where = "load_training_checkpoint('" + path + "'): ";
  if (meta(c, "format") != kTrainingCheckpointFormat)
    throw std::invalid_argument(where + "expected format '" + kTrainingCheckpointFormat + "', got '" +
                                meta(c, "format") + "'");
  if (meta(c, "format_version") != "1")
    throw std::invalid_argument(where + "unsupported format_version '" + meta(c, "format_version") + "'");
  if (meta(c, "optimizer") != optimizer.type_name())
    throw std::invalid_argument(where + "the file holds " + meta(c, "optimizer") + " state, the optimizer is " +
                                optimizer.type_name());
  const std::string sched = meta(c, "scheduler");
  if (scheduler ? sched != scheduler->type_name() : (sched != "none" && !sched.empty()))
    throw std::invalid_argument(where + "the file holds scheduler '" + sched + "', the caller passed " +
                                (scheduler ? "'" + scheduler->type_name() + "'" : std::string("none")));
  const bool has_rng = c.metadata.count("rng_state") > 0;
  if (has_rng != (generator != nullptr))
    throw std::invalid_argument(where + (has_rng ? "the file holds a generator state but no generator was passed"
                                                 : "a generator was passed but the file holds no generator state"));
  const Tensor* epoch = c.find("epoch");
  if (!epoch || epoch->dtype() != Dtype::Int64 || epoch->numel() != 1)
    throw std::invalid_argument(where + "'epoch' must be an int64 scalar");
  if (const std::int64_t e = epoch->data<std::int64_t>()[0]; e < 0)
    throw std::invalid_argument(where + "expected 'epoch' >= 0 (epochs done), got " + std::to_string(e));
  Generator rng;
  if (generator) rng.set_state(meta(c, "rng_state"));  // throws on malformed state, before any change

  // Apply in order; if a later part fails, put the earlier ones back.
  const layers::StateDict model_before = deep_copy(model.state_dict());
  const OptimizerState optimizer_before = optimizer.state_dict();
  model.load_state_dict(with_prefix(c, "model."), true);
  try {
    optimizer.load_state_dict(with_prefix(c, "optimizer."));
    if (scheduler) scheduler->load_state_dict(with_prefix(c, "scheduler."));
  } catch (...) {
    model.load_state_dict(model_before, layers::LoadOptions{true, false});  // back as it was, whatever it held
    optimizer.load_state_dict(optimizer_before);
    throw;
  }
  if (generator) *generator = rng;
  return epoch->data<std::int64_t>()[0];
}

}  // namespace tapegrad::optim
