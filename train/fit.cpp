#include <tapegrad/train/fit.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/archive.h>
#include <tapegrad/optim/clip_grad.h>
#include <tapegrad/train/early_stopping.h>
#include <tapegrad/train/model_checkpoint.h>

namespace tapegrad::train {

namespace {

using Clock = std::chrono::steady_clock;

// CPU time (user + sys, all threads) of this process, in seconds.
double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The number of NaN or infinite values of a float tensor (0 for other dtypes).
std::int64_t non_finite_count(const Tensor& t) {
  std::int64_t bad = 0;
  if (t.dtype() == Dtype::Float32) {
    const float* p = t.data<float>();
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i) bad += !std::isfinite(p[i]);
  } else if (t.dtype() == Dtype::Float64) {
    const double* p = t.data<double>();
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i) bad += !std::isfinite(p[i]);
  }
  return bad;
}

// The first parameter (by model name) whose gradient (grad = true) or value holds a NaN or
// infinity, as "'<name>' (<k> of <n> values)"; "" when all are finite.
std::string first_non_finite(const layers::Module& model, bool grad) {
  for (const auto& [name, p] : model.named_parameters()) {
    const Tensor t = grad ? p.grad() : p;
    if (!t.defined()) continue;
    if (const std::int64_t bad = non_finite_count(t))
      return "'" + name + "' (" + std::to_string(bad) + " of " + std::to_string(t.numel()) + " values)";
  }
  return "";
}

// What one batch may change before its update is accepted: the buffers (BatchNorm's running
// statistics move in the forward) and the generator (dropout masks). Restored when a batch is
// rejected, so the model, optimizer and generator are as after the last accepted batch.
class BatchGuard {
 public:
  BatchGuard(const layers::Module& model, Generator* gen) : live_(model.buffers()), gen_(gen) {
    for (const Tensor& b : live_) saved_.push_back(b.clone());
  }
  void save() {
    NoGradGuard ng;
    for (std::size_t k = 0; k < live_.size(); ++k) saved_[k].copy_(live_[k]);
    if (gen_) gen_saved_ = *gen_;
  }
  void restore(optim::Optimizer& opt) {
    NoGradGuard ng;
    for (std::size_t k = 0; k < live_.size(); ++k) live_[k].copy_(saved_[k]);
    if (gen_) *gen_ = gen_saved_;
    opt.zero_grad();
  }

 private:
  std::vector<Tensor> live_, saved_;
  Generator* gen_;
  Generator gen_saved_;
};

// world: the ranks splitting each global batch by rows (1 when the loader gives this rank's share).
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
    throw std::invalid_argument("fit: the loader has no batches (" + std::to_string(loader.size()) +
                                " rows, batch_size " + std::to_string(loader.options().batch_size) +
                                (loader.options().drop_last ? ", drop_last" : "") + ")");
  if (loader.options().batch_size % world != 0)
    throw std::invalid_argument("fit: batch_size " + std::to_string(loader.options().batch_size) +
                                " is not divisible by the " + std::to_string(world) + " ranks");
  if (o.parallel && !o.parallel->prepared())
    throw std::logic_error("fit: call parallel->prepare(model) before building the optimizer and calling fit");
  // fit writes its own state into every checkpoint under train.* and callback.*: a user key
  // there would be overwritten (train.history), or read back as fit's own on a resume
  // (train.stopped: a resumed run that trains 0 epochs).
  for (const auto& [k, v] : o.checkpoint_extras.metadata)
    if (k.rfind("train.", 0) == 0 || k.rfind("callback.", 0) == 0)
      throw std::invalid_argument("fit: checkpoint_extras metadata '" + k +
                                  "' uses a key fit writes itself (train.*, callback.*); expected another name");
}

// The callbacks' states in a checkpoint, one map per callback, matched by name
// (callback_state_names). Checkpoints written before kCallbacksKey keep them under
// "callback.<index>.<name>.<key>": matched by name and occurrence as well. A state the file
// holds for a callback this run does not pass throws (resuming without it would not continue
// the run: e.g. a ModelCheckpoint that forgot its best would overwrite the best file).
std::vector<std::map<std::string, std::string>> callback_states(const std::string& path, const Archive& file,
                                                                const std::vector<CallbackPtr>& callbacks) {
  const std::vector<std::string> names = callback_state_names(callbacks);
  std::map<std::string, std::map<std::string, std::string>> stored;  // by state name
  const std::string head = "callback.";
  if (file.has_metadata(kCallbacksKey)) {
    for (const auto& [k, v] : file.metadata()) {
      if (k.rfind(head, 0) != 0) continue;
      const std::string rest = k.substr(head.size());
      const std::size_t dot = rest.find('.');
      if (dot != std::string::npos) stored[rest.substr(0, dot)][rest.substr(dot + 1)] = v;
    }
  } else {
    std::map<long, std::pair<std::string, std::map<std::string, std::string>>> by_index;
    for (const auto& [k, v] : file.metadata()) {
      if (k.rfind(head, 0) != 0) continue;
      const std::string rest = k.substr(head.size());
      const std::size_t dot = rest.find('.');
      if (dot == 0 || dot == std::string::npos || dot > 9 ||
          rest.find_first_not_of("0123456789") != dot)
        continue;
      const std::string tail = rest.substr(dot + 1);
      const std::size_t dot2 = tail.find('.');
      if (dot2 == std::string::npos) continue;
      auto& slot = by_index[std::stol(rest.substr(0, dot))];
      slot.first = tail.substr(0, dot2);
      slot.second[tail.substr(dot2 + 1)] = v;
    }
    std::map<std::string, int> seen;
    for (auto& [i, named] : by_index) {
      const int k = ++seen[named.first];
      stored[k == 1 ? named.first : named.first + "#" + std::to_string(k)] = std::move(named.second);
    }
  }
  std::vector<std::map<std::string, std::string>> states(callbacks.size());
  for (std::size_t i = 0; i < names.size(); ++i)
    if (auto it = stored.find(names[i]); it != stored.end()) {
      states[i] = std::move(it->second);
      stored.erase(it);
    }
  if (!stored.empty()) {
    std::string lost, have;
    for (const auto& [n, st] : stored) { if (!lost.empty()) lost += ", "; lost += n; }
    for (const auto& n : names) { if (!have.empty()) have += ", "; have += n; }
    throw std::invalid_argument("fit: resume '" + path + "': the checkpoint holds the state of " + lost +
                                ", which this run does not pass (its callbacks: " + (have.empty() ? "none" : have) +
                                "); pass the same callbacks to continue the run");
  }
  return states;
}

// A best epoch the checkpoint's training had not reached yet (its "epoch" tensor; -1: not
// read here, load_training_checkpoint refuses the file).
void check_best_epoch(const Callback& cb, std::int64_t epoch) {
  int best_epoch = 0;
  if (const auto* mc = dynamic_cast<const ModelCheckpoint*>(&cb)) best_epoch = mc->best_epoch();
  if (const auto* es = dynamic_cast<const EarlyStopping*>(&cb)) best_epoch = es->best_epoch();
  if (epoch >= 0 && best_epoch > epoch)
    throw std::invalid_argument("best_epoch: expected at most the checkpoint's epoch " + std::to_string(epoch) +
                                ", got " + std::to_string(best_epoch));
}

// The epoch count, history and callback states of a training checkpoint, and through
// load_training_checkpoint the model, optimizer, scheduler and generator: one archive, the
// file read once.
int resume_from(const std::string& path, layers::Module& model, optim::Optimizer& opt, optim::LRScheduler* sched,
                Generator* gen, TrainState& st, const std::vector<CallbackPtr>& callbacks) {
  const Archive file = Archive::load(path);  // read once (runtime_error naming the path)
  std::vector<EpochLogs> history;
  if (auto it = file.metadata().find(kHistoryKey); it != file.metadata().end()) {
    try {
      history = history_from_json(it->second);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("fit: resume '" + path + "': " + e.what());
    }
  }
  // The run's planned epoch count: written for the reader, not restored, but a file holding
  // another value there is not one this library wrote.
  if (auto it = file.metadata().find("train.epochs"); it != file.metadata().end()) {
    try {
      if (parse_count(it->second, "train.epochs") < 1) throw std::invalid_argument("train.epochs: expected >= 1, got '0'");
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("fit: resume '" + path + "': " + e.what());
    }
  }
  std::int64_t file_epoch = -1;
  if (const Tensor* e = file.find("epoch"); e && e->dtype() == Dtype::Int64 && e->numel() == 1) {
    const std::int64_t v = e->data<std::int64_t>()[0];
    file_epoch = v;
    if (v < 0 || v > 1000000000)
      throw std::invalid_argument("fit: resume '" + path + "': expected an epoch in [0, 1000000000], got " +
                                  std::to_string(v));
  }
  optim::check_training_checkpoint(file, "fit: resume");  // format, version and epoch, before any change
  std::vector<std::map<std::string, std::string>> states = callback_states(path, file, callbacks);
  // All or nothing: the callbacks' states are parsed and loaded before the training state, so a
  // malformed state leaves the model and optimizer untouched; a training state that fails to
  // load puts the callbacks' states back.
  std::vector<std::map<std::string, std::string>> before;
  for (const auto& cb : callbacks) before.push_back(cb->state_dict());
  auto put_back = [&] {
    for (std::size_t i = 0; i < callbacks.size(); ++i) callbacks[i]->load_state_dict(before[i]);
  };
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    try {
      callbacks[i]->load_state_dict(states[i]);
      check_best_epoch(*callbacks[i], file_epoch);
    } catch (const std::invalid_argument& e) {
      put_back();
      throw std::invalid_argument("fit: resume '" + path + "': " + callback_state_names(callbacks)[i] + ": " + e.what());
    } catch (...) {  // a user callback's own exception type: the states go back all the same
      put_back();
      throw;
    }
  }
  std::int64_t epoch = 0;
  try {
    epoch = optim::load_training_checkpoint(file, model, opt, sched, gen);
  } catch (...) {
    put_back();
    throw;
  }
  st.history = std::move(history);
  if (auto it = file.metadata().find(kStoppedKey); it != file.metadata().end()) {  // the run had ended early
    st.stop_training = true;
    st.stop_reason = it->second;
  }
  while (!st.history.empty() && st.history.back().epoch > epoch) st.history.pop_back();
  return static_cast<int>(epoch);
}

}  // namespace

// fit() after its data-parallel checks (see fit() below).
static FitResult fit_epochs(layers::Module& model, data::DataLoader& loader, const LossFn& loss_fn,
                            optim::Optimizer& opt, optim::LRScheduler* sched, const FitOptions& o,
                            std::vector<CallbackPtr> callbacks) {
  DataParallel* par = o.parallel.get();
  const int world = par ? par->world_size() : 1, rank = par ? par->rank() : 0;
  // a DistributedSampler's loader batches this rank's share: whole batches, prefetched
  const bool share = par && loader_gives_rank_share(*par, loader);
  const bool split = par && !share;  // otherwise rows of each global batch
  check_options(o, loader, split ? world : 1);
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
    loader.set_epoch(epoch - 1);  // a DistributedSampler reshuffles per epoch (0 first)
    loader.reset();  // the epoch's order: the same on every rank (shared generator), or this rank's share
    BatchGuard guard(model, o.generator);
    for (std::int64_t i = 0; i < st.batches; ++i) {
      const std::string where = " at epoch " + std::to_string(epoch) + ", batch " + std::to_string(i);
      const std::string rejected =
          " (the batch was rejected: parameters, buffers, optimizer state and generator are as before it)";
      guard.save();
      const std::int64_t n = split ? rows_per_rank(loader, i, world) : 0;  // a partial last batch: fewer
      const data::Batch b = split ? loader.batch(i, rank * n, n) : loader.batch(i);
      Tensor out;
      try {
        out = par ? par->forward(b.X) : model(b.X);
      } catch (const std::invalid_argument& e) {  // e.g. BatchNorm refusing a batch of one row
        guard.restore(opt);
        const bool one_row_tail = b.size() == 1 && !loader.options().drop_last && i + 1 == st.batches;
        throw std::invalid_argument(
            "fit: the training forward" + where + " (" + std::to_string(b.size()) + " rows) failed: " + e.what() +
            (one_row_tail ? "; the epoch's last batch holds 1 row (" + std::to_string(loader.size()) + " rows, batch_size " +
                                std::to_string(loader.options().batch_size) + "): set drop_last = true on the loader"
                          : std::string()));
      }
      Tensor loss = loss_fn(out, b.y);
      const double l = loss.item();
      // One process: refuse a non-finite loss before backward. Data parallel: after the
      // gradient averaging, so no rank leaves a collective the others wait in.
      if (!par && !std::isfinite(l)) {
        guard.restore(opt);
        throw std::runtime_error("fit: training diverged: loss " + std::to_string(l) + where + rejected);
      }
      opt.zero_grad();
      loss.backward();
      if (par) par->after_backward();  // gradients averaged over ranks
      if (!std::isfinite(l)) {
        guard.restore(opt);
        throw std::runtime_error("fit: training diverged: loss " + std::to_string(l) + where + rejected);
      }
      if (const std::string bad = first_non_finite(model, /*grad=*/true); !bad.empty()) {
        guard.restore(opt);
        throw std::runtime_error("fit: training diverged: the gradient of " + bad + " is NaN or infinite" + where +
                                 " (loss " + std::to_string(l) + ")" + rejected);
      }
      if (o.clip_grad_norm) optim::clip_grad_norm_(opt.parameters(), *o.clip_grad_norm);
      if (o.clip_grad_value) optim::clip_grad_value_(opt.parameters(), *o.clip_grad_value);
      opt.step();
      if (const std::string bad = first_non_finite(model, /*grad=*/false); !bad.empty())
        throw std::runtime_error("fit: training diverged: the optimizer step" + where + " made parameter " + bad +
                                 " NaN or infinite (lr " + format_double(opt.lr(0)) +
                                 "; a smaller learning rate or gradient clipping may help). The model holds that "
                                 "step; the last checkpoint holds the last good epoch");
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
      const std::string at = "fit: validation at epoch " + std::to_string(epoch) + ": ";
      Evaluation v;
      try {
        v = evaluate(model, *o.validation, eval);  // split across ranks
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(at + e.what());
      }
      if (!std::isfinite(v.mean_loss()))
        throw std::runtime_error(at + "loss " + format_double(v.mean_loss()) +
                                 ", not finite (non-finite validation inputs, or a diverged model)");
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

// A data-parallel run first checks, on every rank, that the ranks have the same data (an
// exception on every rank otherwise), then trains under a guard: an exception on one rank (a
// callback, the loss, a diverged loss) ends the job with its message instead of leaving the
// other ranks waiting in a collective.
FitResult fit(layers::Module& model, data::DataLoader& loader, const LossFn& loss_fn, optim::Optimizer& opt,
              optim::LRScheduler* sched, const FitOptions& o, std::vector<CallbackPtr> callbacks) {
  DataParallel* par = o.parallel.get();
  if (par && par->world_size() > 1) {
    // a sampler for another rank may be wrong on one rank only: end the job rather than hang
    bool share = false;
    run_parallel_guarded(par, [&] { share = loader_gives_rank_share(*par, loader); });
    check_options(o, loader, share ? 1 : par->world_size());
    check_same_data(*par, loader, o.validation, o.eval_batch_size);
  }
  FitResult result;
  run_parallel_guarded(par, [&] { result = fit_epochs(model, loader, loss_fn, opt, sched, o, std::move(callbacks)); });
  return result;
}

}  // namespace tapegrad::train
