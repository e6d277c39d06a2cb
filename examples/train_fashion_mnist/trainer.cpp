#include "trainer.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>

#include "checkpoint_io.h"
#include <tapegrad/core/autograd.h>
#include <tapegrad/core/file_io.h>
#include <tapegrad/core/ops/view_ops.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/dropout.h>
#include <tapegrad/layers/fuse_modules.h>
#include <tapegrad/layers/layer_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/adam.h>
#include <tapegrad/optim/lr_scheduler.h>
#include <tapegrad/optim/sgd.h>
#include <tapegrad/optim/training_checkpoint.h>
#include <tapegrad/core/safetensors.h>
#include <tapegrad/train/early_stopping.h>
#include <tapegrad/train/fit.h>
#include <tapegrad/train/metrics.h>
#include <tapegrad/train/model_checkpoint.h>
#include <tapegrad/train/progress_bar.h>

namespace fmnist {

using namespace tapegrad;

std::vector<std::int64_t> parse_hidden(const std::string& text, const std::string& flag) {
  std::vector<std::int64_t> out;
  std::stringstream ss(text);
  std::string item;
  const auto bad = [&](const std::string& it) {
    return std::invalid_argument(flag + ": expected positive integers separated by commas (e.g. 256,128), got '" + it +
                                 "' in '" + text + "'");
  };
  if (!text.empty() && text.back() == ',') throw bad("");  // getline drops a trailing empty item
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 1) throw bad(item);
    out.push_back(v);
  }
  return out;
}

std::shared_ptr<layers::Sequential> build_model(const Config& c, std::int64_t in_features, std::int64_t classes,
                                                Generator& init, Generator* drop) {
  if (c.model == "cnn") return build_cnn(c.cnn, c.norm, in_features, classes, init);
  if (c.model != "mlp") throw std::invalid_argument("--model: expected mlp or cnn, got '" + c.model + "'");
  if (c.norm != "none" && c.norm != "batch" && c.norm != "layer")
    throw std::invalid_argument("--norm: expected none, batch or layer, got '" + c.norm + "'");
  models::MLPOptions mo;
  mo.norm = models::parse_norm(c.norm);
  mo.dropout = c.dropout;
  mo.dropout_gen = drop;
  std::vector<std::int64_t> sizes{in_features};
  sizes.insert(sizes.end(), c.hidden.begin(), c.hidden.end());
  sizes.push_back(classes);
  try {
    return std::make_shared<models::MLP>(sizes, mo, init);
  } catch (const std::bad_alloc&) {  // a huge --hidden: name it, not "std::bad_alloc"
    std::string widths;
    for (auto h : c.hidden) { if (!widths.empty()) widths += ","; widths += std::to_string(h); }
    throw std::runtime_error("--model mlp: out of memory allocating the parameters of --hidden " + widths +
                             "; use smaller widths");
  }
}

double learning_rate(const Config& c) { return c.lr.value_or(c.optimizer == "sgd" ? 0.1 : 1e-3); }

namespace {

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, std::vector<Tensor> params) {
  if (c.optimizer == "sgd") {
    optim::SGDOptions o;
    o.lr = learning_rate(c);
    o.momentum = 0.9;
    return std::make_unique<optim::SGD>(std::move(params), o);
  }
  if (c.optimizer == "adam") {
    optim::AdamOptions o;
    o.lr = learning_rate(c);
    return std::make_unique<optim::Adam>(std::move(params), o);
  }
  if (c.optimizer == "adamw") {
    optim::AdamWOptions o;
    o.lr = learning_rate(c);
    return std::make_unique<optim::AdamW>(std::move(params), o);
  }
  throw std::invalid_argument("--optimizer: expected sgd, adam or adamw, got '" + c.optimizer + "'");
}

void check_config(const Config& c) {
  if (c.epochs < 1) throw std::invalid_argument("--epochs: expected >= 1, got " + std::to_string(c.epochs));
  if (c.batch_size < 2)
    throw std::invalid_argument("--batch-size: expected >= 2, got " + std::to_string(c.batch_size));
  if (!(c.dropout >= 0 && c.dropout < 1))
    throw std::invalid_argument("--dropout: expected 0 <= p < 1, got " + std::to_string(c.dropout));
  if (c.schedule != "none" && c.schedule != "cosine")
    throw std::invalid_argument("--schedule: expected none or cosine, got '" + c.schedule + "'");
  if (c.hidden.empty()) throw std::invalid_argument("--hidden: expected at least one hidden width");
  if (c.limit < 0) throw std::invalid_argument("--limit: expected >= 0, got " + std::to_string(c.limit));
  if (c.val_size < 0 && c.limit > 0 && c.limit < 10)  // a tenth is held out for validation
    throw std::invalid_argument("--limit " + std::to_string(c.limit) +
                                ": a tenth of the images is held out for validation, which leaves none; the best "
                                "epoch could not be chosen. Use --limit 0 (all) or >= 10");
  if (c.val_size == 0)
    throw std::invalid_argument("val_size 0: the best epoch is chosen on the validation split, which would be empty");
  if (c.stop_after && *c.stop_after < 1)
    throw std::invalid_argument("--stop-after: expected >= 1 epoch, got " + std::to_string(*c.stop_after));
  if (c.threads < 0) throw std::invalid_argument("--threads: expected >= 0, got " + std::to_string(c.threads));
  if (c.lr && !(*c.lr > 0 && std::isfinite(*c.lr)))
    throw std::invalid_argument("--lr: expected a finite number > 0, got " + train::format_double(*c.lr));
  if (c.cnn.head < 0) throw std::invalid_argument("--head: expected >= 0 (0: none), got " + std::to_string(c.cnn.head));
  if (c.cnn.groups < 1) throw std::invalid_argument("--groups: expected >= 1, got " + std::to_string(c.cnn.groups));
}

std::vector<std::pair<std::string, Tensor>> copy_state(const layers::Module& m) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [k, v] : m.state_dict()) out.emplace_back(k, v.clone());
  return out;
}

// The model part ("model.<key>") and the epoch of a training checkpoint file.
std::pair<layers::StateDict, int> read_model_state(const std::string& path) {
  const layers::StateDict all = layers::load_state_dict_file(path);
  layers::StateDict model;
  for (const auto& [k, v] : all)
    if (k.rfind("model.", 0) == 0) model.insert(k.substr(6), v);
  const Tensor* epoch = all.find("epoch");
  const double e = epoch && epoch->numel() == 1 ? epoch->item() : 0.0;
  if (!(e >= 0 && e <= 1e9 && e == std::floor(e)))
    throw std::invalid_argument("'" + path + "': expected an epoch in [0, 1000000000], got " + train::format_double(e));
  return {model, static_cast<int>(e)};
}

// A cosine schedule runs over the epochs the run was planned for (T_max): resuming with
// another --epochs would not continue it (past T_max the lr is 0 and nothing trains).
void check_resume_schedule(const Config& cfg, const CheckpointInfo& info) {
  if (cfg.schedule != "cosine" || !info.architecture || info.architecture->epochs == cfg.epochs) return;
  throw std::invalid_argument("--resume " + cfg.resume + ": that run's cosine schedule spans " +
                              std::to_string(info.architecture->epochs) + " epochs (T_max), got --epochs " +
                              std::to_string(cfg.epochs) + ". Resume with --epochs " +
                              std::to_string(info.architecture->epochs) +
                              " (an exact continuation), or start a new run for a longer schedule");
}

// The resumed run must build the model the checkpoint holds: say which setting differs
// instead of a list of missing or mis-shaped tensors.
void check_resume_architecture(const Config& cfg, const CheckpointInfo& info) {
  if (!info.architecture) return;
  const Config& a = *info.architecture;
  auto differs = [&](const std::string& flag, const std::string& theirs, const std::string& ours) {
    if (theirs != ours)
      throw std::invalid_argument("--resume " + cfg.resume + ": the checkpoint holds a model with " + flag + " " +
                                  theirs + ", this run asks for " + flag + " " + ours + " (resume with " + flag +
                                  " " + theirs + ")");
  };
  auto list = [](const std::vector<std::int64_t>& v) {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      out += std::to_string(v[i]);  // appended: g++ 12's -Wrestrict misreads "," + std::string
    }
    return out;
  };
  differs("--model", a.model, cfg.model);
  differs("--norm", a.norm, cfg.norm);
  if (cfg.model == "cnn") {
    differs("--channels", list(a.cnn.channels), list(cfg.cnn.channels));
    differs("--head", std::to_string(a.cnn.head), std::to_string(cfg.cnn.head));
    if (cfg.norm == "group") differs("--groups", std::to_string(a.cnn.groups), std::to_string(cfg.cnn.groups));
  } else {
    differs("--hidden", list(a.hidden), list(cfg.hidden));
  }
}

// The resumed run must train as the checkpoint's run did: the optimizer state would restore the
// stored learning rate whatever --lr says, and another batch size or dropout is another run.
void check_resume_options(const Config& cfg, const CheckpointInfo& info) {
  auto differs = [&](const std::string& flag, const std::string& stored, const std::string& given) {
    if (stored != given)
      throw std::invalid_argument("--resume " + cfg.resume + ": the checkpoint's run used " + flag + " " + stored +
                                  ", this run gives " + flag + " " + given + " (resume with " + flag + " " + stored +
                                  ", or start a new run)");
  };
  if (info.optimizer && *info.optimizer != cfg.optimizer) {
    auto type = [](const std::string& o) { return o == "sgd" ? "SGD" : o == "adam" ? "Adam" : "AdamW"; };
    throw std::invalid_argument("--resume " + cfg.resume + ": the checkpoint's run used --optimizer " + *info.optimizer +
                                " (" + type(*info.optimizer) + " state), this run gives --optimizer " + cfg.optimizer +
                                " (" + type(cfg.optimizer) + "); resume with --optimizer " + *info.optimizer);
  }
  if (info.learning_rate)
    differs("--lr", train::format_double(*info.learning_rate), train::format_double(learning_rate(cfg)));
  if (info.batch_size) differs("--batch-size", std::to_string(*info.batch_size), std::to_string(cfg.batch_size));
  if (info.architecture && cfg.model == "mlp")
    differs("--dropout", train::format_double(info.architecture->dropout), train::format_double(cfg.dropout));
}

// The resumed run must see the inputs the checkpoint was trained on.
void check_resume_preprocessing(const Config& cfg, const CheckpointInfo& info, const data::Standardizer& s) {
  if (!info.standardizer) return;
  if (info.standardizer->mean() != s.mean() || info.standardizer->stddev() != s.stddev())
    throw std::invalid_argument("--resume " + cfg.resume + ": the checkpoint was trained on inputs standardised with mean " +
                                std::to_string(info.standardizer->mean()[0]) + ", std " +
                                std::to_string(info.standardizer->stddev()[0]) + "; this run's data gives mean " +
                                std::to_string(s.mean()[0]) + ", std " + std::to_string(s.stddev()[0]) +
                                " (use the same --data, --limit and --seed)");
}

// Whether a training checkpoint was written by the training room (it then carries the
// best-so-far of its callbacks).
bool holds_room_state(const std::string& path) {
  const SafetensorsContent c = load_safetensors(path);
  return c.metadata.count(train::kHistoryKey) > 0;
}

// The trainer's log: the resume line and the model line before the first epoch, one line per
// epoch (losses, accuracy, times, every rank's CPU seconds), and the best validation accuracy
// (kept in checkpoints, so a resumed run marks the same epochs "(best)").
class EpochLog : public train::Callback {
 public:
  EpochLog(const Config& cfg, const layers::Module& model, const optim::Optimizer& opt,
           const optim::LRScheduler* sched, std::int64_t batches)
      : cfg_(cfg), model_(model), opt_(opt), sched_(sched), batches_(batches) {}
  std::string name() const override { return "EpochLog"; }

  void on_fit_begin(train::TrainState& s) override {
    if (!cfg_.resume.empty()) {
      if (sched_ && s.epoch < cfg_.epochs && opt_.lr(0) == 0.0)
        throw std::invalid_argument("--resume " + cfg_.resume + ": the cosine schedule of that run already reached lr 0 "
                                    "at epoch " + std::to_string(s.epoch) + "; the remaining epochs would not train. "
                                    "Start a new run, or resume with --schedule none");
      spdlog::info("resumed from {} after epoch {} (best validation accuracy so far {:.2f}% at epoch {})", cfg_.resume,
                   s.epoch, 100 * std::max(0.0, best_), best_epoch_);
    }
    spdlog::info("model: {} | optimizer {} lr {}{} | {} batches of {} per epoch", model_.repr(), opt_.type_name(),
                 opt_.lr(0), sched_ ? " (cosine schedule over " + std::to_string(cfg_.epochs) + " epochs)" : "",
                 batches_, cfg_.batch_size);
  }

  void on_epoch_end(train::TrainState& s) override {
    const train::EpochLogs& e = s.history.back();
    const double acc = e.get("val_accuracy");
    const bool improved = acc > best_;
    if (improved) {
      best_ = acc;
      best_epoch_ = e.epoch;
    }
    std::string rank_cpu;  // every rank's CPU seconds, for the log (a collective: every rank)
    if (s.parallel) {
      const int world = s.parallel->world_size();
      std::vector<double> all(static_cast<std::size_t>(world), 0.0);
      all[static_cast<std::size_t>(s.parallel->rank())] = e.get("cpu_seconds");
      s.parallel->sum(all.data(), world);
      for (double c : all) rank_cpu += fmt::format("{}{:.2f}", rank_cpu.empty() ? "" : ", ", c);
      rank_cpu = " (ranks: " + rank_cpu + ")";
    }
    spdlog::info("epoch {:2d}/{}: train loss {:.4f}, validation loss {:.4f} accuracy {:.2f}%{}, {:.1f} s "
                 "({:.0f} samples/s, CPU {:.2f} s{}; validation {:.2f} s)",
                 e.epoch, cfg_.epochs, e.get("loss"), e.get("val_loss"), 100 * acc, improved ? " (best)" : "",
                 e.get("seconds"), e.get("samples_per_second"), e.get("cpu_seconds"), rank_cpu, e.get("val_seconds"));
  }

  std::map<std::string, std::string> state_dict() const override {
    return {{"best", train::format_double(best_)}, {"best_epoch", std::to_string(best_epoch_)}};
  }
  void load_state_dict(const std::map<std::string, std::string>& s) override {
    double best = best_;
    int best_epoch = best_epoch_;
    if (auto it = s.find("best"); it != s.end()) {
      best = train::parse_double(it->second, "best");
      if (!(best == -1.0 || (best >= 0 && best <= 1)))
        throw std::invalid_argument("best: expected a validation accuracy in [0, 1] (or -1: none), got '" +
                                    it->second + "'");
    }
    if (auto it = s.find("best_epoch"); it != s.end()) best_epoch = train::parse_count(it->second, "best_epoch");
    if ((best == -1.0) != (best_epoch == 0))  // -1 exactly when no epoch was recorded
      throw std::invalid_argument("best: expected -1 with best_epoch 0 and an accuracy in [0, 1] with best_epoch >= 1, got best " +
                                  train::format_double(best) + " with best_epoch " + std::to_string(best_epoch));
    best_ = best;
    best_epoch_ = best_epoch;
  }

  double best() const { return best_; }
  int best_epoch() const { return best_epoch_; }

 private:
  const Config& cfg_;
  const layers::Module& model_;
  const optim::Optimizer& opt_;
  const optim::LRScheduler* sched_;
  std::int64_t batches_;
  double best_ = -1.0;  ///< -1: none yet
  int best_epoch_ = 0;
};

}  // namespace

std::string format_confusion(const std::vector<std::vector<std::int64_t>>& confusion) {
  const auto& names = data::fashion_mnist_classes();
  return train::format_confusion(confusion, std::vector<std::string>(names.begin(), names.end()));
}

Result train(const Config& cfg) {
  check_config(cfg);
  // Paths first: an unusable output or resume file is reported before any work.
  if (!cfg.checkpoint.empty()) {
    check_output_file(cfg.checkpoint);
    check_output_file(cfg.checkpoint + ".last");
  }
  const CheckpointInfo resumed = cfg.resume.empty() ? CheckpointInfo{} : read_checkpoint_info(cfg.resume);
  check_resume_architecture(cfg, resumed);
  check_resume_schedule(cfg, resumed);
  check_resume_options(cfg, resumed);
  if (cfg.threads > 0) set_num_threads(cfg.threads);

  // ---- data --------------------------------------------------------------------------
  const data::Dataset full = data::load_fashion_mnist(cfg.data_dir, true, cfg.limit);
  const data::Dataset test_raw = data::load_fashion_mnist(cfg.data_dir, false);
  const std::int64_t val_size = cfg.val_size >= 0 ? cfg.val_size : (cfg.limit > 0 ? full.size() / 10 : 5000);
  if (val_size < 1)  // e.g. --limit 50 on a folder holding 5 images
    throw std::invalid_argument("the validation split would be empty (" + std::to_string(full.size()) +
                                " training images in " + cfg.data_dir +
                                ", a tenth held out); the best epoch could not be chosen");
  if (val_size >= full.size())  // e.g. --data naming a folder of 3,000 images, with the default split of 5,000
    throw std::invalid_argument(
        "--data " + cfg.data_dir + ": " + std::to_string(full.size()) + " training images leave none to train on after the " +
        std::to_string(val_size) + " held out for validation" +
        (cfg.val_size >= 0 ? std::string(" (val_size)")
                           : std::string(" (the default; pass --limit N to hold out a tenth of N instead)")) +
        ": expected more than " + std::to_string(val_size) + " training images");
  // One generator draws the split, each epoch's shuffle and the dropout masks, in that
  // order; its state goes into every checkpoint, so a resumed run draws what the
  // uninterrupted run would have. The weights come from a second one, used once.
  Generator gen(cfg.seed);
  Generator init_gen(cfg.seed + 0x5EED);
  const data::TrainValSplit split = data::train_val_split(full, val_size, gen);
  const data::Standardizer standardizer = data::Standardizer::fit(split.train.X, data::Standardizer::Scope::Global);
  check_resume_preprocessing(cfg, resumed, standardizer);
  const optim::CheckpointExtras extras = checkpoint_extras(cfg, standardizer);
  const data::Dataset train_ds = standardizer.transform(split.train);
  const data::Dataset val_ds = standardizer.transform(split.val);
  const data::Dataset test_ds = standardizer.transform(test_raw);
  spdlog::info("data: {} train, {} validation, {} test images; standardised with training mean {:.4f}, std {:.4f}",
               train_ds.size(), val_ds.size(), test_ds.size(), standardizer.mean()[0], standardizer.stddev()[0]);

  // ---- model and optimizer -------------------------------------------------------------
  auto model = build_model(cfg, data::kFashionMnistPixels, data::kFashionMnistClasses, init_gen, &gen);
  DataParallel* par = cfg.parallel.get();  // data parallel: this rank's rows of each batch
  const int world = par ? par->world_size() : 1;
  if (cfg.batch_size % world != 0)
    throw std::invalid_argument("--batch-size " + std::to_string(cfg.batch_size) + " is not divisible by the " +
                                std::to_string(world) + " ranks");
  if (par) par->prepare(model);  // before the optimizer: may swap BatchNorm for SyncBatchNorm
  layers::fuse_modules(*model);  // after the swap, before the optimizer: BatchNorm1d -> ReLU as one op, the same bits
  auto opt = par ? par->make_optimizer(model->parameters(),
                                       [&](std::vector<Tensor> params) { return make_optimizer(cfg, std::move(params)); })
                 : make_optimizer(cfg, model->parameters());
  std::unique_ptr<optim::LRScheduler> sched;
  if (cfg.schedule == "cosine") sched = std::make_unique<optim::CosineAnnealingLR>(*opt, cfg.epochs);
  data::DataLoader loader(train_ds, {cfg.batch_size, true, /*drop_last=*/true}, gen);
  if (loader.num_batches() == 0)
    throw std::invalid_argument("--batch-size " + std::to_string(cfg.batch_size) + " exceeds the " +
                                std::to_string(train_ds.size()) + " training images");

  // ---- the training room: fit with a progress bar, this trainer's log line, checkpoints ----
  train::FitOptions fo;
  fo.epochs = cfg.epochs;
  fo.validation = &val_ds;
  fo.generator = &gen;
  fo.resume = cfg.resume;
  fo.max_epochs = cfg.stop_after;
  fo.checkpoint_extras = extras;
  fo.parallel = cfg.parallel;
  train::ProgressBarOptions po;
  po.bar = cfg.progress;
  po.epoch_lines = false;  // the log line below says more
  auto log = std::make_shared<EpochLog>(cfg, *model, *opt, sched.get(), loader.num_batches());
  std::vector<train::CallbackPtr> callbacks{std::make_shared<train::ProgressBar>(po), log};
  std::shared_ptr<train::ModelCheckpoint> best_ck;
  if (!cfg.checkpoint.empty()) {
    train::ModelCheckpointOptions mo;
    mo.path = cfg.checkpoint;  // the best epoch by validation accuracy; the latest to <checkpoint>.last
    mo.monitor = "val_accuracy";
    mo.mode = train::Mode::Max;
    best_ck = std::make_shared<train::ModelCheckpoint>(mo);
    callbacks.push_back(best_ck);
  }
  if (!cfg.resume.empty() && !cfg.checkpoint.empty() && std::filesystem::exists(cfg.checkpoint) &&
      !holds_room_state(cfg.resume)) {
    // A checkpoint written before the training room kept no best-so-far: measure the best
    // checkpoint of this run again on the same split.
    Generator unused_init(0), unused_drop(0);
    auto best = build_model(cfg, data::kFashionMnistPixels, data::kFashionMnistClasses, unused_init, &unused_drop);
    auto [state, epoch] = read_model_state(cfg.checkpoint);
    best->load_state_dict(state, true);
    const double acc = evaluate_model(*best, val_ds, par).accuracy();
    const std::map<std::string, std::string> seeded{
        {"monitor", "val_accuracy"}, {"best", train::format_double(acc)}, {"best_epoch", std::to_string(epoch)}};
    log->load_state_dict(seeded);
    best_ck->load_state_dict(seeded);
  }
  const train::FitResult fit = train::fit(*model, loader, layers::CrossEntropyLoss{}, *opt, sched.get(), fo, callbacks);

  Result result;
  for (std::size_t i = fit.history.size() - static_cast<std::size_t>(fit.epochs_run); i < fit.history.size(); ++i) {
    const train::EpochLogs& e = fit.history[i];
    EpochStats es;
    es.epoch = e.epoch;
    es.train_loss = e.get("loss");
    es.val_accuracy = e.get("val_accuracy");
    es.val_loss = e.get("val_loss");
    es.seconds = e.get("seconds");
    es.samples_per_second = e.get("samples_per_second");
    es.cpu_seconds = e.get("cpu_seconds");
    es.val_seconds = e.get("val_seconds");
    result.history.push_back(es);
  }
  result.epochs_done = fit.last_epoch;
  result.best_epoch = log->best_epoch();
  result.best_val_accuracy = log->best();
  result.final_state = copy_state(*model);

  // ---- test ------------------------------------------------------------------------------
  if (!cfg.checkpoint.empty() && result.best_epoch > 0) {
    // The checkpoint alone: its architecture, weights, buffers and input preprocessing.
    spdlog::info("test evaluation with the best checkpoint (epoch {}, validation accuracy {:.2f}%)", result.best_epoch,
                 100 * result.best_val_accuracy);
    result.test_accuracy = evaluate_checkpoint(cfg.checkpoint, test_raw, &result.confusion, par);
  } else {
    Evaluation test = evaluate_model(*model, test_ds, par);  // split across ranks
    result.test_accuracy = test.accuracy();
    result.confusion = std::move(test.confusion);
  }
  spdlog::info("test accuracy {:.2f}% ({} images)", 100 * result.test_accuracy, test_ds.size());
  return result;
}

}  // namespace fmnist
