#include "trainer.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
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
#include <tapegrad/layers/layer_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/adam.h>
#include <tapegrad/optim/lr_scheduler.h>
#include <tapegrad/optim/sgd.h>
#include <tapegrad/optim/training_checkpoint.h>

namespace fmnist {

using namespace tapegrad;
using Clock = std::chrono::steady_clock;

namespace {
// CPU time (user + sys, all threads) of this process, in seconds.
double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

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
  return std::make_shared<models::MLP>(sizes, mo, init);
}

namespace {

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, std::vector<Tensor> params) {
  if (c.optimizer == "sgd") {
    optim::SGDOptions o;
    o.lr = c.lr.value_or(0.1);
    o.momentum = 0.9;
    return std::make_unique<optim::SGD>(std::move(params), o);
  }
  if (c.optimizer == "adam") {
    optim::AdamOptions o;
    o.lr = c.lr.value_or(1e-3);
    return std::make_unique<optim::Adam>(std::move(params), o);
  }
  if (c.optimizer == "adamw") {
    optim::AdamWOptions o;
    o.lr = c.lr.value_or(1e-3);
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
}

// A one-line progress bar on a terminal: batches done, running loss, samples/s, ETA.
class Progress {
 public:
  Progress(bool enabled, int epoch, int epochs, std::int64_t total)
      : enabled_(enabled && ::isatty(::fileno(stderr))), epoch_(epoch), epochs_(epochs), total_(total),
        start_(Clock::now()) {}
  void update(std::int64_t done, double loss, std::int64_t samples) {
    if (!enabled_) return;
    const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    if (done != total_ && secs - last_ < 0.1) return;
    last_ = secs;
    const int width = 30;
    const int filled = static_cast<int>(width * done / std::max<std::int64_t>(total_, 1));
    const double rate = secs > 0 ? samples / secs : 0.0;
    const double eta = done > 0 ? secs * static_cast<double>(total_ - done) / static_cast<double>(done) : 0.0;
    std::fprintf(stderr, "\repoch %d/%d [%s%s] %lld/%lld loss %.4f %.0f samples/s ETA %.0fs   ", epoch_, epochs_,
                 std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(width - filled), '.').c_str(), static_cast<long long>(done),
                 static_cast<long long>(total_), loss, rate, eta);
    std::fflush(stderr);
  }
  void finish() {
    if (!enabled_) return;
    std::fprintf(stderr, "\r%*s\r", 110, "");
    std::fflush(stderr);
  }

 private:
  bool enabled_;
  int epoch_, epochs_;
  std::int64_t total_;
  Clock::time_point start_;
  double last_ = -1;
};

std::vector<std::pair<std::string, Tensor>> copy_state(const layers::Module& m) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [k, v] : m.state_dict()) out.emplace_back(k, v.clone());
  return out;
}

// Progress of a run; the checkpoints carry the epoch, the best is re-measured on resume.
struct TrainingState {
  int epoch = 0;                    ///< epochs completed
  int best_epoch = 0;               ///< 0: none yet
  double best_val_accuracy = -1.0;  ///< -1: none yet
};

// The model part ("model.<key>") and the epoch of a training checkpoint file.
std::pair<layers::StateDict, int> read_model_state(const std::string& path) {
  const layers::StateDict all = layers::load_state_dict_file(path);
  layers::StateDict model;
  for (const auto& [k, v] : all)
    if (k.rfind("model.", 0) == 0) model.insert(k.substr(6), v);
  const Tensor* epoch = all.find("epoch");
  return {model, epoch ? static_cast<int>(epoch->item()) : 0};
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
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
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

}  // namespace

std::string format_confusion(const std::vector<std::vector<std::int64_t>>& confusion) {
  const auto& names = data::fashion_mnist_classes();
  std::ostringstream os;
  char buf[64];
  os << "confusion matrix (rows: true class, columns: predicted)\n";
  std::snprintf(buf, sizeof buf, "%-12s", "");
  os << buf;
  for (std::size_t j = 0; j < confusion.size(); ++j) {
    std::snprintf(buf, sizeof buf, "%6zu", j);
    os << buf;
  }
  os << '\n';
  for (std::size_t i = 0; i < confusion.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%zu %-10s", i, i < names.size() ? names[i] : "?");
    os << buf;
    for (auto v : confusion[i]) {
      std::snprintf(buf, sizeof buf, "%6lld", static_cast<long long>(v));
      os << buf;
    }
    os << '\n';
  }
  return os.str();
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
  if (cfg.threads > 0) set_num_threads(cfg.threads);

  // ---- data --------------------------------------------------------------------------
  const data::Dataset full = data::load_fashion_mnist(cfg.data_dir, true, cfg.limit);
  const data::Dataset test_raw = data::load_fashion_mnist(cfg.data_dir, false);
  const std::int64_t val_size = cfg.val_size >= 0 ? cfg.val_size : (cfg.limit > 0 ? full.size() / 10 : 5000);
  if (val_size < 1)  // e.g. --limit 50 on a folder holding 5 images
    throw std::invalid_argument("the validation split would be empty (" + std::to_string(full.size()) +
                                " training images in " + cfg.data_dir +
                                ", a tenth held out); the best epoch could not be chosen");
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
  const int world = par ? par->world_size() : 1, rank = par ? par->rank() : 0;
  if (cfg.batch_size % world != 0)
    throw std::invalid_argument("--batch-size " + std::to_string(cfg.batch_size) + " is not divisible by the " +
                                std::to_string(world) + " ranks");
  if (par) par->prepare(model);  // before the optimizer: may swap BatchNorm for SyncBatchNorm
  auto opt = make_optimizer(cfg, model->parameters());
  std::unique_ptr<optim::LRScheduler> sched;
  if (cfg.schedule == "cosine") sched = std::make_unique<optim::CosineAnnealingLR>(*opt, cfg.epochs);
  data::DataLoader loader(train_ds, {cfg.batch_size, true, /*drop_last=*/true}, gen);
  if (loader.num_batches() == 0)
    throw std::invalid_argument("--batch-size " + std::to_string(cfg.batch_size) + " exceeds the " +
                                std::to_string(train_ds.size()) + " training images");

  Result result;
  TrainingState st;
  if (!cfg.resume.empty()) {
    st.epoch = static_cast<int>(optim::load_training_checkpoint(cfg.resume, *model, *opt, sched.get(), &gen));
    if (sched && st.epoch < cfg.epochs && opt->lr(0) == 0.0)
      throw std::invalid_argument("--resume " + cfg.resume + ": the cosine schedule of that run already reached lr 0 "
                                  "at epoch " + std::to_string(st.epoch) + "; the remaining epochs would not train. "
                                  "Start a new run, or resume with --schedule none");
    // The best so far: the best checkpoint of this run, measured again on the same split.
    if (!cfg.checkpoint.empty() && std::filesystem::exists(cfg.checkpoint)) {
      Generator unused_init(0), unused_drop(0);
      auto best = build_model(cfg, data::kFashionMnistPixels, data::kFashionMnistClasses, unused_init, &unused_drop);
      auto [state, epoch] = read_model_state(cfg.checkpoint);
      best->load_state_dict(state, true);
      st.best_epoch = epoch;
      st.best_val_accuracy = evaluate_model(*best, val_ds, cfg.parallel.get()).accuracy();
    }
    spdlog::info("resumed from {} after epoch {} (best validation accuracy so far {:.2f}% at epoch {})", cfg.resume,
                 st.epoch, 100 * std::max(0.0, st.best_val_accuracy), st.best_epoch);
  }
  spdlog::info("model: {} | optimizer {} lr {}{} | {} batches of {} per epoch", model->repr(), opt->type_name(),
               opt->lr(0), sched ? " (cosine schedule over " + std::to_string(cfg.epochs) + " epochs)" : "",
               loader.num_batches(), cfg.batch_size);

  int run_here = 0;
  for (int epoch = st.epoch + 1; epoch <= cfg.epochs; ++epoch) {
    if (cfg.stop_after && run_here >= *cfg.stop_after) break;
    model->train();
    const auto t0 = Clock::now();
    const double cpu0 = process_cpu_seconds();
    Progress bar(cfg.progress, epoch, cfg.epochs, loader.num_batches());
    double loss_sum = 0;
    std::int64_t seen = 0, done = 0;
    loader.reset();  // the epoch's order, the same on every rank (shared generator)
    const std::int64_t per = cfg.batch_size / world;  // this rank's rows of each global batch
    for (std::int64_t i = 0; i < loader.num_batches(); ++i) {
      const data::Batch b = par ? loader.batch(i, rank * per, per) : loader.batch(i);
      Tensor logits = par ? par->forward(b.X) : (*model)(b.X);
      Tensor loss = layers::cross_entropy(logits, b.y);
      opt->zero_grad();
      loss.backward();
      if (par) par->after_backward();  // gradients averaged over ranks
      opt->step();
      const double l = loss.item();
      if (!std::isfinite(l))
        throw std::runtime_error("training diverged: loss " + std::to_string(l) + " at epoch " +
                                 std::to_string(epoch) + ", batch " + std::to_string(done));
      loss_sum += l * static_cast<double>(b.size());
      seen += b.size() * world;  // global rows
      bar.update(++done, loss_sum * world / static_cast<double>(seen), seen);
    }
    bar.finish();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const double cpu = process_cpu_seconds() - cpu0;
    EpochStats es;
    es.epoch = epoch;
    es.train_loss = loss_sum * world / static_cast<double>(seen);  // over this rank's rows
    if (par) es.train_loss = par->mean(es.train_loss);  // equal rows per rank: the global mean
    es.seconds = secs;
    es.samples_per_second = static_cast<double>(seen) / secs;
    es.cpu_seconds = cpu;
    std::string rank_cpu;  // every rank's CPU seconds, for the log
    if (par) {
      std::vector<double> all(static_cast<std::size_t>(world), 0.0);
      all[static_cast<std::size_t>(rank)] = cpu;
      par->sum(all.data(), world);
      for (double c : all) rank_cpu += fmt::format("{}{:.2f}", rank_cpu.empty() ? "" : ", ", c);
      rank_cpu = " (ranks: " + rank_cpu + ")";
    }
    const auto v0 = Clock::now();
    const Evaluation val = evaluate_model(*model, val_ds, par);  // split across ranks
    es.val_accuracy = val.accuracy();
    es.val_loss = val.mean_loss();
    es.val_seconds = std::chrono::duration<double>(Clock::now() - v0).count();
    result.history.push_back(es);
    ++run_here;
    if (sched) sched->step();
    st.epoch = epoch;
    const bool improved = es.val_accuracy > st.best_val_accuracy;
    if (improved) {
      st.best_val_accuracy = es.val_accuracy;
      st.best_epoch = epoch;
    }
    spdlog::info("epoch {:2d}/{}: train loss {:.4f}, validation loss {:.4f} accuracy {:.2f}%{}, {:.1f} s "
                 "({:.0f} samples/s, CPU {:.2f} s{}; validation {:.2f} s)",
                 epoch, cfg.epochs, es.train_loss, es.val_loss, 100 * es.val_accuracy, improved ? " (best)" : "", secs,
                 es.samples_per_second, es.cpu_seconds, rank_cpu, es.val_seconds);
    if (!cfg.checkpoint.empty() && rank == 0) {  // ranks hold the same state: rank 0 writes
      if (improved) optim::save_training_checkpoint(cfg.checkpoint, *model, *opt, epoch, sched.get(), &gen, &extras);
      optim::save_training_checkpoint(cfg.checkpoint + ".last", *model, *opt, epoch, sched.get(), &gen, &extras);
    }
    if (par && !cfg.checkpoint.empty()) par->barrier();  // the files exist before any rank goes on
  }
  result.epochs_done = st.epoch;
  result.best_epoch = st.best_epoch;
  result.best_val_accuracy = st.best_val_accuracy;
  result.final_state = copy_state(*model);

  // ---- test ------------------------------------------------------------------------------
  if (!cfg.checkpoint.empty() && st.best_epoch > 0) {
    // The checkpoint alone: its architecture, weights, buffers and input preprocessing.
    spdlog::info("test evaluation with the best checkpoint (epoch {}, validation accuracy {:.2f}%)", st.best_epoch,
                 100 * st.best_val_accuracy);
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
