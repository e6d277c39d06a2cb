#include <tapegrad/optim/training_checkpoint.h>

#include <stdexcept>

namespace tapegrad::optim {

namespace {

layers::StateDict deep_copy(const layers::StateDict& s) {
  layers::StateDict d;
  for (const auto& [k, v] : s) d.insert(k, v.clone());
  return d;
}

}  // namespace

void write_training_checkpoint(Archive& a, const layers::Module& model, const Optimizer& optimizer,
                               std::int64_t epoch, const LRScheduler* scheduler, const Generator* generator,
                               const CheckpointExtras* extras, const std::string& path) {
  if (epoch < 0)
    throw std::invalid_argument("save_training_checkpoint('" + path + "'): expected 'epoch' >= 0, got " +
                                std::to_string(epoch));
  std::map<std::string, std::string> md{{"format", kTrainingCheckpointFormat},
                                        {"format_version", kTrainingCheckpointVersion},
                                        {"model", model.type_name()},
                                        {"optimizer", optimizer.type_name()},
                                        {"scheduler", scheduler ? scheduler->type_name() : "none"}};
  if (extras) {
    layers::check_extra_tensors(extras->tensors, "save_training_checkpoint('" + path + "')");
    for (const auto& [k, v] : extras->metadata)  // rng_state too, with or without a generator
      if (md.count(k) || k == "rng_state")
        throw std::invalid_argument("save_training_checkpoint('" + path + "'): extra metadata '" + k +
                                    "' uses a reserved key (format, format_version, model, optimizer, scheduler, "
                                    "rng_state)");
    md.insert(extras->metadata.begin(), extras->metadata.end());
  }
  if (generator) md["rng_state"] = generator->get_state();
  model.save_to(a, "model.");
  optimizer.save_to(a, "optimizer.");
  if (scheduler) scheduler->save_to(a, "scheduler.");
  a.write("epoch", Tensor::from_int64({epoch}, {}));
  if (extras) a.write_all(kArchiveExtraPrefix, extras->tensors);
  for (const auto& [k, v] : md) a.set_metadata(k, v);
}

void save_training_checkpoint(const std::string& path, const layers::Module& model, const Optimizer& optimizer,
                              std::int64_t epoch, const LRScheduler* scheduler, const Generator* generator,
                              const CheckpointExtras* extras) {
  Archive a;
  write_training_checkpoint(a, model, optimizer, epoch, scheduler, generator, extras, path);
  a.save(path);
}

namespace {

bool is_state_key(const std::string& k) {
  return k == "epoch" || k.rfind("model.", 0) == 0 || k.rfind("optimizer.", 0) == 0 || k.rfind("scheduler.", 0) == 0;
}

}  // namespace

std::int64_t check_training_checkpoint(const Archive& c, const std::string& who) {
  const std::string where = who + "('" + c.source() + "'): ";
  if (c.metadata("format") != kTrainingCheckpointFormat)
    throw std::invalid_argument(where + "expected format '" + kTrainingCheckpointFormat + "', got '" +
                                c.metadata("format") + "'");
  const std::string version = c.metadata("format_version");
  if (version != "1" && version != kTrainingCheckpointVersion)
    throw std::invalid_argument(where + "expected format_version 1 or " + kTrainingCheckpointVersion + ", got '" +
                                version + "'");
  if (version == kTrainingCheckpointVersion)  // format 2 keeps an application's tensors under extra/
    for (const auto& [k, v] : c.tensors()) {
      if (!is_state_key(k) && k.rfind(kArchiveExtraPrefix, 0) != 0)
        throw std::invalid_argument(where + "unexpected tensor '" + k + "' (format " + version +
                                    " holds model., optimizer., scheduler., epoch and extra/ keys only)");
      if (k == kArchiveExtraPrefix)  // the writers refuse an extra without a name
        throw std::invalid_argument(where + "expected an extra tensor's name after '" + k + "', got none");
    }
  const Tensor* epoch = c.find("epoch");
  if (!epoch) throw std::invalid_argument(where + "expected an int64 scalar 'epoch', got none");
  if (epoch->dtype() != Dtype::Int64 || epoch->dim() != 0)  // as written: shape [], not [1] nor [1, 1]
    throw std::invalid_argument(where + "expected 'epoch' to be an int64 scalar, got " + dtype_name(epoch->dtype()) +
                                " of shape " + shape_str(epoch->shape()));
  const std::int64_t e = epoch->data<std::int64_t>()[0];
  if (e < 0) throw std::invalid_argument(where + "expected 'epoch' >= 0 (epochs done), got " + std::to_string(e));
  return e;
}

std::vector<std::pair<std::string, Tensor>> training_checkpoint_extras(const Archive& archive) {
  const std::string version = archive.metadata("format_version");
  if (version == kTrainingCheckpointVersion) return archive.extras();
  if (!version.empty() && version != "1")
    throw std::invalid_argument("training_checkpoint_extras('" + archive.source() + "'): expected format_version 1 or " +
                                kTrainingCheckpointVersion + ", got '" + version + "'");
  std::vector<std::pair<std::string, Tensor>> out;  // format 1: beside the state, at the top level
  for (const auto& [k, v] : archive.tensors())
    if (!is_state_key(k)) out.emplace_back(k, v);
  return out;
}

std::int64_t load_training_checkpoint(const std::string& path, layers::Module& model, Optimizer& optimizer,
                                      LRScheduler* scheduler, Generator* generator) {
  return load_training_checkpoint(Archive::load(path), model, optimizer, scheduler, generator);
}

std::int64_t load_training_checkpoint(const Archive& c, layers::Module& model, Optimizer& optimizer,
                                      LRScheduler* scheduler, Generator* generator) {
  const std::string where = "load_training_checkpoint('" + c.source() + "'): ";
  const std::int64_t epoch = check_training_checkpoint(c);
  if (c.metadata("optimizer") != optimizer.type_name())
    throw std::invalid_argument(where + "the file holds " + c.metadata("optimizer") + " state, the optimizer is " +
                                optimizer.type_name());
  const std::string sched = c.metadata("scheduler");
  if (scheduler ? sched != scheduler->type_name() : (sched != "none" && !sched.empty()))
    throw std::invalid_argument(where + "the file holds scheduler '" + sched + "', the caller passed " +
                                (scheduler ? "'" + scheduler->type_name() + "'" : std::string("none")));
  const bool has_rng = c.has_metadata("rng_state");
  if (has_rng != (generator != nullptr))
    throw std::invalid_argument(where + (has_rng ? "the file holds a generator state but no generator was passed"
                                                 : "a generator was passed but the file holds no generator state"));
  // Each part's own refusal, prefixed with the file it came from.
  const auto named = [&where](const auto& part) {
    try {
      part();
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + e.what());
    }
  };
  Generator rng;
  if (generator) named([&] { rng.set_state(c.metadata("rng_state")); });  // malformed: before any change

  // Apply in order; if a later part fails, put the earlier ones back.
  const layers::StateDict model_before = deep_copy(model.state_dict());
  const OptimizerState optimizer_before = optimizer.state_dict();
  named([&] { model.load_from(c, layers::LoadOptions{.strict = true}, "model."); });
  try {
    named([&] {
      optimizer.load_from(c, "optimizer.");
      if (scheduler) scheduler->load_from(c, "scheduler.");
    });
  } catch (...) {
    model.load_state_dict(model_before, layers::LoadOptions{.strict = true, .check_values = false});  // back as it was
    optimizer.load_state_dict(optimizer_before);
    throw;
  }
  if (generator) *generator = rng;
  return epoch;
}

}  // namespace tapegrad::optim
