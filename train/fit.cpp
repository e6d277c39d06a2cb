#include <tapegrad/train/fit.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <stdexcept>

#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/safetensors.h>
#include <tapegrad/optim/clip_grad.h>

namespace tapegrad::train {

namespace {

using Clock = std::chrono::steady_clock;

// CPU time (user + sys, all threads) of this process, in seconds.
double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void check_options(const FitOptions& o, const data::DataLoader& loader, int world) {
  if (o.epochs < 1) throw std::invalid_argument("fit: expected epochs >= 1, got " + std::to_string(o.epochs));
  if (o.max_epochs && *o.max_epochs < 0)
    throw std::invalid_argument("fit: expected max_epochs >= 0, got " + std::to_string(*o.max_epochs));
  if (o.eval_batch_size < 1)
    throw std::invalid_argument("fit: expected eval_batch_size >= 1, got " + std::to_string(o.eval_batch_size));
  if (o.clip_grad_norm && !(*o.clip_grad_norm > 0))
    throw std::invalid_argument("fit: expected clip_grad_norm > 0, got " + std::to_string(*o.clip_grad_norm));
  if (o.clip_grad_value && !(*o.clip_grad_value >= 0))
    throw std::invalid_argument("fit: expected clip_grad_value >= 0, got " + std::to_string(*o.clip_grad_value));
  if (loader.num_batches() == 0)
    throw std::invalid_argument("fit: the loader has no batches (" + std::to_string(loader.dataset().size()) +
                                " rows, batch_size " + std::to_string(loader.options().batch_size) +
                                (loader.options().drop_last ? ", drop_last" : "") + ")");
  if (loader.options().batch_size % world != 0)
    throw std::invalid_argument("fit: batch_size " + std::to_string(loader.options().batch_size) +
                                " is not divisible by the " + std::to_string(world) + " ranks");
  if (o.parallel && !o.parallel->prepared())
    throw std::logic_error("fit: call parallel->prepare(model) before building the optimizer and calling fit");
}

// The epoch count, history and callback states of a training checkpoint (the model,
// optimizer, scheduler and generator are restored by load_training_checkpoint).
int resume_from(const std::string& path, layers::Module& model, optim::Optimizer& opt, optim::LRScheduler* sched,
                Generator* gen, TrainState& st, const std::vector<CallbackPtr>& callbacks) {
  const SafetensorsContent file = load_safetensors(path);  // runtime_error naming the path
  std::vector<EpochLogs> history;
  if (auto it = file.metadata.find(kHistoryKey); it != file.metadata.end()) {
    try {
      history = history_from_json(it->second);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("fit: resume '" + path + "': " + e.what());
    }
  }
  std::vector<std::map<std::string, std::string>> states(callbacks.size());
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    const std::string prefix = "callback." + std::to_string(i) + "." + callbacks[i]->name() + ".";
    for (const auto& [k, v] : file.metadata)
      if (k.rfind(prefix, 0) == 0) states[i][k.substr(prefix.size())] = v;
  }
  // The callbacks' states are parsed before the training state is loaded (all or nothing),
  // so a malformed state leaves the model and optimizer untouched.
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    try {
      callbacks[i]->load_state_dict(states[i]);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("fit: resume '" + path + "': " + callbacks[i]->name() + ": " + e.what());
    }
  }
  const auto epoch = optim::load_training_checkpoint(path, model, opt, sched, gen);
  st.history = std::move(history);
  if (auto it = file.metadata.find(kStoppedKey); it != file.metadata.end()) {  // the run had ended early
    st.stop_training = true;
    st.stop_reason = it->second;
  }
  while (!st.history.empty() && st.history.back().epoch > epoch) st.history.pop_back();
  return static_cast<int>(epoch);
}

}  // namespace

FitResult fit(layers::Module& model, data::DataLoader& loader, const LossFn& loss_fn, optim::Optimizer& opt,
              optim::LRScheduler* sched, const FitOptions& o, std::vector<CallbackPtr> callbacks) {
  DataParallel* par = o.parallel.get();
  const int world = par ? par->world_size() : 1, rank = par ? par->rank() : 0;
  check_options(o, loader, world);
  if (!loss_fn) throw std::invalid_argument("fit: expected a loss function, got an empty one");
  for (const auto& cb : callbacks)
    if (!cb) throw std::invalid_argument("fit: a callback is null");

  const ModeChecksOption checks(o.mode_checks);
  const auto issues_before = mode_issue_counts();
  TrainState st;
  st.model = &model;
  st.optimizer = &opt;
  st.scheduler = sched;
  st.generator = o.generator;
  st.parallel = par;
  st.epochs = o.epochs;
  st.batches = loader.num_batches();
  st.user_extras = &o.checkpoint_extras;
  st.callbacks = &callbacks;
  if (!o.resume.empty()) st.epoch = resume_from(o.resume, model, opt, sched, o.generator, st, callbacks);

  for (auto& cb : callbacks) cb->on_fit_begin(st);

  FitResult result;
  const std::int64_t per = loader.options().batch_size / world;  // this rank's rows of each global batch
  EvalOptions eval;
  eval.batch_size = o.eval_batch_size;
  eval.loss = loss_fn;
  eval.parallel = par;
  for (int epoch = st.epoch + 1; epoch <= o.epochs && !st.stop_training; ++epoch) {
    if (o.max_epochs && result.epochs_run >= *o.max_epochs) break;
    st.epoch = epoch;
    st.batch = 0;
    st.running_loss = 0;
    st.samples_seen = 0;
    const double lr = opt.lr(0);
    for (auto& cb : callbacks) cb->on_epoch_begin(st);
    model.train();
    const auto t0 = Clock::now();
    const double cpu0 = process_cpu_seconds();
    double loss_sum = 0;
    std::int64_t rows = 0;
    loader.reset();  // the epoch's order, the same on every rank (shared generator)
    for (std::int64_t i = 0; i < st.batches; ++i) {
      const data::Batch b = par ? loader.batch(i, rank * per, per) : loader.batch(i);
      Tensor out = par ? par->forward(b.X) : model(b.X);
      Tensor loss = loss_fn(out, b.y);
      opt.zero_grad();
      loss.backward();
      if (par) par->after_backward();  // gradients averaged over ranks
      if (o.clip_grad_norm) optim::clip_grad_norm_(opt.parameters(), *o.clip_grad_norm);
      if (o.clip_grad_value) optim::clip_grad_value_(opt.parameters(), *o.clip_grad_value);
      opt.step();
      const double l = loss.item();
      if (!std::isfinite(l))
        throw std::runtime_error("fit: training diverged: loss " + std::to_string(l) + " at epoch " +
                                 std::to_string(epoch) + ", batch " + std::to_string(i));
      loss_sum += l * static_cast<double>(b.size());
      rows += b.size();
      st.batch = i + 1;
      st.running_loss = loss_sum / static_cast<double>(rows);
      st.samples_seen = rows * world;
      for (auto& cb : callbacks) cb->on_batch_end(st);
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const double cpu = process_cpu_seconds() - cpu0;
    EpochLogs logs;
    logs.epoch = epoch;
    double train_loss = loss_sum / static_cast<double>(rows);  // this rank's rows
    if (par) train_loss = par->mean(train_loss);              // equal rows per rank: the global mean
    logs.set("loss", train_loss);
    if (o.validation) {
      const auto v0 = Clock::now();
      Evaluation v = evaluate(model, *o.validation, eval);  // split across ranks
      logs.set("val_loss", v.mean_loss());
      if (!v.confusion.empty()) logs.set("val_accuracy", v.accuracy());
      logs.set("val_seconds", std::chrono::duration<double>(Clock::now() - v0).count());
      st.last_validation = std::move(v);
    }
    logs.set("lr", lr);
    logs.set("seconds", secs);
    logs.set("samples_per_second", static_cast<double>(rows * world) / secs);
    logs.set("cpu_seconds", cpu);
    st.history.push_back(std::move(logs));
    ++result.epochs_run;
    if (sched) sched->step();
    for (auto& cb : callbacks) cb->on_epoch_end(st);
    for (auto& cb : callbacks) cb->after_epoch_end(st);
  }
  for (auto& cb : callbacks) cb->on_fit_end(st);
  result.history = st.history;
  result.last_epoch = st.epoch;
  result.stopped_early = st.stop_training;
  result.stop_reason = st.stop_reason;
  result.last_validation = st.last_validation;
  result.mode_issues = mode_issue_counts_since(issues_before);
  return result;
}

}  // namespace tapegrad::train
