// train/fit.h: the loop against a hand-written one, validation in eval mode without the tape,
// exact resume (bit for bit, callbacks included), clipping, and the errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/safetensors.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/adam.h>
#include <tapegrad/optim/clip_grad.h>
#include <tapegrad/optim/lr_scheduler.h>
#include <tapegrad/optim/sgd.h>
#include <tapegrad/train/early_stopping.h>
#include <tapegrad/train/fit.h>
#include <tapegrad/train/metrics_log.h>
#include <tapegrad/train/model_checkpoint.h>
#include "train/train_test_support.h"
#if __has_include(<tapegrad/distributed/distributed_sampler.h>)
#include <tapegrad/distributed/distributed_sampler.h>
#define TAPEGRAD_TEST_DISTRIBUTED_SAMPLER 1
#endif

using namespace tapegrad;
using namespace tapegrad::train;
using train_test::TempDir;

namespace {

// One complete training setup, rebuilt identically from the same seeds.
struct Run : train_test::BlobsSetup {
  Run() : BlobsSetup(300, 90) {}
  optim::StepLR sched{opt, 2, 0.5};
  FitOptions options() {
    FitOptions o;
    o.epochs = 6;
    o.validation = &val_ds;
    o.generator = &gen;
    o.clip_grad_norm = 1.0;
    return o;
  }
  FitResult fit(const FitOptions& o, std::vector<CallbackPtr> cbs = {}) {
    return train::fit(*model, loader, layers::CrossEntropyLoss{}, opt, &sched, o, std::move(cbs));
  }
};

bool timing_key(const std::string& k) {
  return k == "seconds" || k == "samples_per_second" || k == "cpu_seconds" || k == "val_seconds";
}

// The history without its wall/CPU times (which differ between runs).
std::vector<std::pair<int, std::vector<std::pair<std::string, double>>>> values(const std::vector<EpochLogs>& h) {
  std::vector<std::pair<int, std::vector<std::pair<std::string, double>>>> out;
  for (const auto& e : h) {
    std::vector<std::pair<std::string, double>> v;
    for (const auto& kv : e.values)
      if (!timing_key(kv.first)) v.push_back(kv);
    out.emplace_back(e.epoch, v);
  }
  return out;
}

std::vector<std::vector<double>> state_of(const layers::Module& m) {
  std::vector<std::vector<double>> out;
  for (const auto& [k, v] : m.state_dict()) out.push_back(v.to_vector());
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Records the module's mode and the grad mode at every forward, by batch rows.
class Probe : public layers::Module {
 public:
  explicit Probe(std::shared_ptr<layers::Module> inner) : inner_(register_module("inner", std::move(inner))) {}
  Tensor forward(const Tensor& x) override {
    calls.push_back({x.size(0), is_training(), grad_mode_enabled()});
    return (*inner_)(x);
  }
  std::string type_name() const override { return "Probe"; }
  struct Call {
    std::int64_t rows;
    bool training, grad;
  };
  std::vector<Call> calls;

 private:
  std::shared_ptr<layers::Module> inner_;
};

}  // namespace

TEST_CASE("fit is the hand-written loop: same parameters bit for bit, with clipping and a scheduler", "[train][fit]") {
  Run a;
  FitOptions o = a.options();
  o.epochs = 2;
  o.validation = nullptr;
  o.clip_grad_norm = 0.5;
  o.clip_grad_value = 0.05;
  const FitResult r = a.fit(o);
  REQUIRE(r.epochs_run == 2);

  Run b;  // the same epochs by hand
  std::vector<double> losses;
  for (int epoch = 0; epoch < 2; ++epoch) {
    b.model->train();
    double sum = 0;
    std::int64_t rows = 0;
    for (const data::Batch& batch : b.loader) {
      Tensor loss = layers::cross_entropy((*b.model)(batch.X), batch.y);
      b.opt.zero_grad();
      loss.backward();
      optim::clip_grad_norm_(b.opt.parameters(), 0.5);
      optim::clip_grad_value_(b.opt.parameters(), 0.05);
      b.opt.step();
      sum += loss.item() * static_cast<double>(batch.size());
      rows += batch.size();
    }
    losses.push_back(sum / static_cast<double>(rows));
    b.sched.step();
  }
  CHECK(state_of(*a.model) == state_of(*b.model));
  CHECK(r.history[0].get("loss") == losses[0]);
  CHECK(r.history[1].get("loss") == losses[1]);
  CHECK(r.history[0].get("lr") == 0.01);
  CHECK(r.history[1].get("lr") == 0.01);
  CHECK(a.opt.lr(0) == 0.005);  // StepLR(2, 0.5) stepped once per epoch
  CHECK_FALSE(r.history[0].find("val_loss").has_value());
}

TEST_CASE("fit learns, and validates in eval mode without the tape, restoring train mode", "[train][fit]") {
  Run a;
  auto probe = std::make_shared<Probe>(a.model);
  optim::Adam opt(probe->parameters(), optim::AdamOptions{0.01});
  FitOptions o = a.options();
  o.epochs = 4;
  o.eval_batch_size = 45;  // 2 validation batches of 45 rows; training batches have 32
  const FitResult r = fit(*probe, a.loader, layers::CrossEntropyLoss{}, opt, nullptr, o);
  REQUIRE(r.history.size() == 4);
  INFO("loss " << r.history[0].get("loss") << " -> " << r.history[3].get("loss") << ", val accuracy "
               << r.history[3].get("val_accuracy"));
  CHECK(r.history[3].get("loss") < r.history[0].get("loss"));
  CHECK(r.history[0].get("loss") < std::log(3.0));  // below chance
  CHECK(r.history[3].get("val_accuracy") > 0.85);
  CHECK(r.last_validation->count == 90);
  std::int64_t total = 0;
  for (const auto& row : r.last_validation->confusion)
    for (auto v : row) total += v;
  CHECK(total == 90);
  // The validation loss is the mean cross-entropy over the 90 rows, from the final model.
  CHECK(r.history[3].get("val_loss") == Approx(r.last_validation->mean_loss()));
  int train_calls = 0, eval_calls = 0;
  for (const auto& c : probe->calls) {
    if (c.rows == 32) {
      ++train_calls;
      CHECK(c.training);
      CHECK(c.grad);
    } else {
      ++eval_calls;
      CHECK(c.rows == 45);
      CHECK_FALSE(c.training);
      CHECK_FALSE(c.grad);
    }
  }
  CHECK(train_calls == 4 * 9);  // 300 rows, batches of 32, drop_last
  CHECK(eval_calls == 4 * 2);
  CHECK(probe->is_training());  // restored after the last validation
  CHECK(autograd::tape_size() == 0);
}

TEST_CASE("an interrupted and resumed fit matches the uninterrupted one bit for bit", "[train][fit][resume]") {
  TempDir dir;
  auto callbacks = [&](const std::string& name) {
    EarlyStoppingOptions es;
    es.monitor = "val_loss";
    es.patience = 10;
    ModelCheckpointOptions mc;
    mc.path = dir.file(name + ".safetensors");
    mc.monitor = "val_accuracy";
    mc.mode = Mode::Max;
    return std::vector<CallbackPtr>{std::make_shared<EarlyStopping>(es), std::make_shared<ModelCheckpoint>(mc),
                                    std::make_shared<MetricsLog>(MetricsLogOptions{dir.file(name + ".csv")})};
  };
  Run full;
  auto full_cbs = callbacks("full");
  const FitResult f = full.fit(full.options(), full_cbs);
  REQUIRE(f.history.size() == 6);

  Run part;
  FitOptions o = part.options();
  o.max_epochs = 2;
  const FitResult p = part.fit(o, callbacks("part"));
  REQUIRE(p.epochs_run == 2);
  REQUIRE(p.last_epoch == 2);

  Run resumed;  // fresh objects, the same seeds: everything comes from the checkpoint
  auto resumed_cbs = callbacks("part");
  o = resumed.options();
  o.resume = dir.file("part.safetensors.last");
  const FitResult r = resumed.fit(o, resumed_cbs);
  REQUIRE(r.epochs_run == 4);
  REQUIRE(r.history.size() == 6);  // the restored epochs too
  CHECK(values(r.history) == values(f.history));
  CHECK(state_of(*resumed.model) == state_of(*full.model));
  CHECK(resumed.opt.lr(0) == full.opt.lr(0));
  CHECK(resumed.gen.get_state() == full.gen.get_state());
  // The callbacks' state continued: the same best epoch, the same early-stopping counter.
  auto es_full = std::static_pointer_cast<EarlyStopping>(full_cbs[0]);
  auto es_res = std::static_pointer_cast<EarlyStopping>(resumed_cbs[0]);
  CHECK(es_res->best() == es_full->best());
  CHECK(es_res->best_epoch() == es_full->best_epoch());
  CHECK(es_res->wait() == es_full->wait());
  auto mc_full = std::static_pointer_cast<ModelCheckpoint>(full_cbs[1]);
  auto mc_res = std::static_pointer_cast<ModelCheckpoint>(resumed_cbs[1]);
  CHECK(mc_res->best_epoch() == mc_full->best_epoch());
  // The best checkpoints hold the same weights; the CSV logs the same six epochs.
  Generator g1(0), g2(0);
  auto m1 = train_test::mlp(g1, &g2), m2 = train_test::mlp(g1, &g2);
  CHECK(load_model(mc_full->best_path(), *m1).epoch == mc_full->best_epoch());
  load_model(mc_res->best_path(), *m2);
  CHECK(state_of(*m1) == state_of(*m2));
  const std::string csv_full = read_text(dir.file("full.csv")), csv_part = read_text(dir.file("part.csv"));
  CHECK(std::count(csv_part.begin(), csv_part.end(), '\n') == 7);  // header + 6 epochs
  CHECK(csv_full.substr(0, csv_full.find('\n')) == csv_part.substr(0, csv_part.find('\n')));

  // A checkpoint of another network is refused and leaves the model as it was.
  Generator gi(1), gd(2);
  models::MLPOptions wide;
  wide.norm = models::Norm::Batch;
  auto other = std::make_shared<models::MLP>(std::vector<std::int64_t>{8, 32, 3}, wide, gi);
  optim::Adam other_opt(other->parameters(), optim::AdamOptions{0.01});
  optim::StepLR other_sched(other_opt, 2, 0.5);
  const auto before = state_of(*other);
  FitOptions ro = resumed.options();
  ro.resume = dir.file("part.safetensors.last");
  CHECK_THROWS_WITH(fit(*other, resumed.loader, layers::CrossEntropyLoss{}, other_opt, &other_sched, ro,
                        callbacks("other")),
                    Catch::Contains("0.weight"));
  CHECK(state_of(*other) == before);
  ro.resume = dir.file("missing.safetensors");
  CHECK_THROWS_WITH(resumed.fit(ro), Catch::Contains("missing.safetensors"));
}

TEST_CASE("early stopping ends fit, and a resume from the stopped run trains no further", "[train][fit][early_stopping]") {
  TempDir dir;
  Run a;
  FitOptions o = a.options();
  o.epochs = 30;
  EarlyStoppingOptions es;
  es.monitor = "val_accuracy";
  es.mode = Mode::Max;
  es.patience = 2;
  es.min_delta = 0.5;  // accuracy cannot rise by 0.5 after the first epoch: stops at epoch 3
  ModelCheckpointOptions mc;
  mc.path = dir.file("ck.safetensors");
  mc.monitor = "";  // last only
  const FitResult r = a.fit(o, {std::make_shared<EarlyStopping>(es), std::make_shared<ModelCheckpoint>(mc)});
  CHECK(r.stopped_early);
  CHECK(r.history.size() == 3);
  CHECK_THAT(r.stop_reason, Catch::Contains("val_accuracy did not improve for 2 epochs") &&
                                Catch::Contains("at epoch 1"));
  CHECK_FALSE(std::filesystem::exists(dir.file("ck.safetensors")));
  Run b;
  FitOptions ro = b.options();
  ro.epochs = 30;
  ro.resume = dir.file("ck.safetensors.last");
  const FitResult rr = b.fit(ro, {std::make_shared<EarlyStopping>(es), std::make_shared<ModelCheckpoint>(mc)});
  CHECK(rr.epochs_run == 0);
  CHECK(rr.stopped_early);
  CHECK(state_of(*b.model) == state_of(*a.model));
}

TEST_CASE("fit refuses bad options and a diverging loss, naming the values", "[train][fit][errors]") {
  Run a;
  FitOptions o = a.options();
  o.epochs = 0;
  CHECK_THROWS_WITH(a.fit(o), Catch::Contains("epochs >= 1, got 0"));
  o = a.options();
  o.clip_grad_norm = 0.0;
  CHECK_THROWS_WITH(a.fit(o), Catch::Contains("clip_grad_norm > 0, got 0"));
  o = a.options();
  o.clip_grad_value = std::nan("");
  CHECK_THROWS_WITH(a.fit(o), Catch::Contains("clip_grad_value >= 0"));
  data::DataLoader tiny(a.train_ds.slice(0, 10), {32, false, true}, a.gen);
  CHECK_THROWS_WITH(fit(*a.model, tiny, layers::CrossEntropyLoss{}, a.opt, nullptr, a.options()),
                    Catch::Contains("no batches (10 rows, batch_size 32, drop_last)"));
  // A NaN loss stops at once, naming where.
  const LossFn nan_loss = [](const Tensor& out, const Tensor& y) {
    return layers::cross_entropy(out, y) * std::numeric_limits<double>::quiet_NaN();
  };
  CHECK_THROWS_WITH(fit(*a.model, a.loader, nan_loss, a.opt, nullptr, a.options()),
                    Catch::Contains("diverged: loss nan at epoch 1, batch 0"));
  // A monitor that was not logged names the keys that were.
  Run b;
  o = b.options();
  o.validation = nullptr;
  CHECK_THROWS_WITH(b.fit(o, {std::make_shared<EarlyStopping>()}),
                    Catch::Contains("monitor 'val_loss' was not logged by epoch 1") && Catch::Contains("loss, lr"));
}

namespace {
// A DataParallel that was never prepared (fit must refuse it before any step).
class Unprepared : public DataParallel {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  void prepare(std::shared_ptr<layers::Module>) override {}
  bool prepared() const override { return false; }
  Tensor forward(const Tensor& x) override { return x; }
  void after_backward() override {}
  double mean(double v) override { return v; }
  void sum(double*, std::int64_t) override {}
  void sum(std::int64_t*, std::int64_t) override {}
  void barrier() override {}
};
}  // namespace

TEST_CASE("fit with a data-parallel runtime checks the batch split and prepare()", "[train][fit][errors]") {
  Run a;
  FitOptions o = a.options();
  o.parallel = std::make_shared<Unprepared>();
  CHECK_THROWS_AS(a.fit(o), std::logic_error);
  CHECK_THROWS_WITH(a.fit(o), Catch::Contains("prepare(model)"));
  data::DataLoader odd(a.train_ds, {33, true, true}, a.gen);
  CHECK_THROWS_WITH(fit(*a.model, odd, layers::CrossEntropyLoss{}, a.opt, nullptr, o),
                    Catch::Contains("batch_size 33 is not divisible by the 2 ranks"));
  if (!mpi_available())
    CHECK_THROWS_WITH(make_mpi_data_parallel(false), Catch::Contains("no MPI"));
}

TEST_CASE("fit with a data-parallel runtime and a sampler: a rank's share needs the run's ranks",
          "[train][fit][errors][sampler]") {
  Run a;
  FitOptions o = a.options();
  const auto par = std::make_shared<Unprepared>();  // rank 0 of 2
  o.parallel = par;
  // a sampler of the whole dataset: global batches split by rows, so the batch size must divide
  data::DataLoader whole(a.train_ds, {.batch_size = 33, .sampler = std::make_shared<data::SequentialSampler>(300)});
  CHECK_FALSE(loader_gives_rank_share(*par, whole));
  CHECK_THROWS_WITH(fit(*a.model, whole, layers::CrossEntropyLoss{}, a.opt, nullptr, o),
                    Catch::Contains("batch_size 33 is not divisible by the 2 ranks"));
#ifdef TAPEGRAD_TEST_DISTRIBUTED_SAMPLER
  namespace dist = tapegrad::distributed;
  // this rank's share: the batch size is per rank, nothing to divide; prepare() is checked next
  data::DataLoader share(a.train_ds, {.batch_size = 33, .sampler = std::make_shared<dist::DistributedSampler>(300, 2, 0)});
  CHECK(loader_gives_rank_share(*par, share));
  CHECK_THROWS_WITH(fit(*a.model, share, layers::CrossEntropyLoss{}, a.opt, nullptr, o), Catch::Contains("prepare(model)"));
  data::DataLoader three(a.train_ds, {.batch_size = 8, .sampler = std::make_shared<dist::DistributedSampler>(300, 3, 0)});
  const char* msg = "fit: the loader's sampler splits the data over 3 replicas (rank 0), the run has 2 ranks (this is rank 0)";
  CHECK_THROWS_MATCHES(loader_gives_rank_share(*par, three), std::invalid_argument, Catch::Matchers::Message(msg));
  CHECK_THROWS_MATCHES(fit(*a.model, three, layers::CrossEntropyLoss{}, a.opt, nullptr, o), std::invalid_argument,
                       Catch::Matchers::Message(msg));
  data::DataLoader other(a.train_ds, {.batch_size = 8, .sampler = std::make_shared<dist::DistributedSampler>(300, 2, 1)});
  CHECK_THROWS_WITH(loader_gives_rank_share(*par, other),
                    Catch::Contains("splits the data over 2 replicas (rank 1), the run has 2 ranks (this is rank 0)"));
#endif
}
