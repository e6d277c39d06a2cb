// train/fit.h: divergence is an error, never a result. A NaN loss or gradient is rejected
// before the update (parameters, optimizer state, buffers and generator as before the batch),
// a step that makes a parameter non-finite and a NaN validation loss throw, and EarlyStopping
// and ModelCheckpoint refuse a NaN monitored value.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/reduce.h>
#include <tapegrad/core/ops/unary.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/adam.h>
#include <tapegrad/train/early_stopping.h>
#include <tapegrad/train/fit.h>
#include <tapegrad/train/model_checkpoint.h>
#include "train/train_test_support.h"

using namespace tapegrad;
using namespace tapegrad::train;
using train_test::TempDir;

namespace {

struct Net : train_test::BlobsSetup {
  Net() : BlobsSetup(300, 90) {}
  FitOptions options(int epochs) {
    FitOptions o;
    o.epochs = epochs;
    o.validation = &val_ds;
    o.generator = &gen;
    return o;
  }
};

// Every tensor of the model's state_dict (parameters and buffers) and the optimizer's.
std::vector<std::vector<double>> everything(const Net& n) {
  std::vector<std::vector<double>> out;
  for (const auto& [k, v] : n.model->state_dict()) out.push_back(v.to_vector());
  for (const auto& [k, v] : n.opt.state_dict()) out.push_back(v.to_vector());
  return out;
}

// Cross-entropy, NaN from the call `bad` on (counting from 0).
LossFn nan_from(int bad, bool nan_gradient_only) {
  auto calls = std::make_shared<int>(0);
  return [calls, bad, nan_gradient_only](const Tensor& out, const Tensor& y) {
    Tensor l = layers::cross_entropy(out, y);
    if ((*calls)++ < bad) return l;
    if (!nan_gradient_only) return l * std::numeric_limits<double>::quiet_NaN();
    // value 0 * sqrt(0) = 0, gradient 0.5 / sqrt(0) = inf through the 0: NaN
    return l + sqrt(sum(out * 0.0)) * 1.0;
  };
}

// Throws from on_batch_end once `batches` batches of an epoch are done.
class StopAfterBatch : public Callback {
 public:
  explicit StopAfterBatch(std::int64_t batches) : batches_(batches) {}
  std::string name() const override { return "StopAfterBatch"; }
  void on_batch_end(TrainState& s) override {
    if (s.batch == batches_) throw std::runtime_error("stop");
  }

 private:
  std::int64_t batches_;
};

}  // namespace

TEST_CASE("fit rejects a NaN loss before the update and leaves the model as after the last good batch",
          "[train][fit][errors]") {
  Net n;
  fit(*n.model, n.loader, layers::CrossEntropyLoss{}, n.opt, nullptr, n.options(1));
  CHECK_THROWS_WITH(fit(*n.model, n.loader, nan_from(3, false), n.opt, nullptr, n.options(1)),
                    Catch::Contains("diverged: loss nan at epoch 1, batch 3") && Catch::Contains("rejected"));
  // The same run stopped right after the third good batch of epoch 2.
  Net ref;
  fit(*ref.model, ref.loader, layers::CrossEntropyLoss{}, ref.opt, nullptr, ref.options(1));
  CHECK_THROWS_WITH(fit(*ref.model, ref.loader, layers::CrossEntropyLoss{}, ref.opt, nullptr, ref.options(1),
                        {std::make_shared<StopAfterBatch>(3)}),
                    "stop");
  CHECK(everything(n) == everything(ref));  // parameters, buffers, optimizer state
  CHECK(n.gen.get_state() == ref.gen.get_state());
  for (const auto& [k, v] : n.model->named_parameters())
    for (double x : v.to_vector()) REQUIRE(std::isfinite(x));
}

TEST_CASE("a NaN loss at the first batch changes no parameter, buffer, optimizer state or generator",
          "[train][fit][errors]") {
  Net n;
  fit(*n.model, n.loader, layers::CrossEntropyLoss{}, n.opt, nullptr, n.options(1));
  const auto before = everything(n);
  const std::string gen_before = n.gen.get_state();
  CHECK_THROWS_AS(fit(*n.model, n.loader, nan_from(0, false), n.opt, nullptr, n.options(1)), std::runtime_error);
  CHECK(everything(n) == before);  // BatchNorm's running statistics of that forward put back
  // the loader's reset drew the epoch's order from the generator: that draw stays, the
  // dropout masks of the rejected batch do not
  Net ref;
  fit(*ref.model, ref.loader, layers::CrossEntropyLoss{}, ref.opt, nullptr, ref.options(1));
  ref.loader.reset();
  CHECK(ref.gen.get_state() == n.gen.get_state());
  CHECK(gen_before != n.gen.get_state());
}

TEST_CASE("a NaN gradient with a finite loss is rejected before the step, naming the parameter",
          "[train][fit][errors]") {
  Net n;
  fit(*n.model, n.loader, layers::CrossEntropyLoss{}, n.opt, nullptr, n.options(1));
  const auto before = everything(n);
  CHECK_THROWS_WITH(fit(*n.model, n.loader, nan_from(0, true), n.opt, nullptr, n.options(1)),
                    Catch::Contains("the gradient of '") && Catch::Contains("is NaN or infinite at epoch 1, batch 0") &&
                        Catch::Contains("rejected"));
  CHECK(everything(n) == before);
}

TEST_CASE("a learning rate that makes the parameters infinite fails the run, naming the parameter",
          "[train][fit][errors]") {
  Net n;
  optim::Adam huge(n.model->parameters(), optim::AdamOptions{1e300});
  CHECK_THROWS_WITH(fit(*n.model, n.loader, layers::CrossEntropyLoss{}, huge, nullptr, n.options(3)),
                    Catch::Contains("the optimizer step at epoch 1, batch 0 made parameter '") &&
                        Catch::Contains("NaN or infinite (lr 1.0000000000000001e+300"));
}

TEST_CASE("a NaN validation loss fails the run before the callbacks see the epoch", "[train][fit][errors]") {
  TempDir dir;
  Net n;
  Tensor x = n.val_ds.X.clone();
  x.data<float>()[5] = std::numeric_limits<float>::infinity();
  const data::Dataset bad_val = data::Dataset::make(x, n.val_ds.y);
  FitOptions o = n.options(2);
  o.validation = &bad_val;
  ModelCheckpointOptions mc;
  mc.path = dir.file("ck.safetensors");
  CHECK_THROWS_WITH(fit(*n.model, n.loader, layers::CrossEntropyLoss{}, n.opt, nullptr, o,
                        {std::make_shared<ModelCheckpoint>(mc)}),
                    Catch::Contains("fit: validation at epoch 1: evaluate: the model's output for row 0 is nan, not finite"));
  CHECK_FALSE(std::filesystem::exists(dir.file("ck.safetensors.last")));
}

TEST_CASE("a NaN validation loss of a regression fails the run", "[train][fit][errors]") {
  Generator gen(3), init(4);
  const Tensor x = randn({64, 8}, Dtype::Float32, gen);
  const data::Dataset tr = data::Dataset::make(x, sum(x, {1}, true));
  Tensor vx = x.clone();
  vx.data<float>()[9] = std::numeric_limits<float>::quiet_NaN();
  const data::Dataset va = data::Dataset::make(vx, sum(x, {1}, true));
  models::MLP model({8, 4, 1}, {}, init);
  optim::Adam opt(model.parameters(), optim::AdamOptions{0.01});
  data::DataLoader loader(tr, {16, true, false}, gen);
  FitOptions o;
  o.validation = &va;
  CHECK_THROWS_WITH(fit(model, loader, layers::MSELoss{}, opt, nullptr, o),
                    Catch::Contains("fit: validation at epoch 1: loss nan, not finite"));
}

TEST_CASE("EarlyStopping and ModelCheckpoint refuse a NaN monitored value", "[train][early_stopping][errors]") {
  TrainState s;
  s.epochs = 3;
  EpochLogs e;
  e.epoch = 1;
  e.set("score", 0.5);
  s.history.push_back(e);
  EarlyStopping es({"score", Mode::Max, 0.0, 5});
  es.on_epoch_end(s);
  e.epoch = 2;
  e.set("score", std::nan(""));
  s.history.push_back(e);
  CHECK_THROWS_AS(es.on_epoch_end(s), std::runtime_error);
  CHECK_THROWS_WITH(es.on_epoch_end(s), Catch::Contains("monitor 'score' is nan at epoch 2") &&
                                            Catch::Contains("best 0.5 at epoch 1"));
  CHECK_FALSE(s.stop_training);
  CHECK(es.best() == 0.5);
  CHECK(es.wait() == 0);

  TempDir dir;
  ModelCheckpointOptions mo;
  mo.path = dir.file("ck.safetensors");
  mo.monitor = "score";
  mo.mode = Mode::Max;
  ModelCheckpoint mc(mo);
  CHECK_THROWS_WITH(mc.after_epoch_end(s), Catch::Contains("ModelCheckpoint: monitor 'score' is nan at epoch 2"));
  CHECK(std::isnan(mc.best()));
}

TEST_CASE("a last batch of one row that BatchNorm refuses names the epoch, the batch and drop_last",
          "[train][fit][errors]") {
  // 17 rows in batches of 16: the epoch's last batch holds one row, which BatchNorm refuses in
  // training mode; its own advice ("call eval()") is not the fix inside fit.
  Generator gen{7}, init{8};
  const data::Dataset ds = train_test::blobs(17, 1);
  auto model = train_test::mlp(init, &gen);
  optim::Adam opt{model->parameters(), optim::AdamOptions{0.01}};
  data::DataLoader loader{ds, {16, true, false}, gen};
  FitOptions o;
  o.epochs = 2;
  o.generator = &gen;
  CHECK_THROWS_WITH(fit(*model, loader, layers::CrossEntropyLoss{}, opt, nullptr, o),
                    Catch::StartsWith("fit: the training forward at epoch 1, batch 1 (1 rows) failed: ") &&
                        Catch::Contains("expected more than 1 value per channel when training") &&
                        Catch::EndsWith("; the epoch's last batch holds 1 row (17 rows, batch_size 16): set "
                                        "drop_last = true on the loader"));
  data::DataLoader dropped{ds, {16, true, true}, gen};  // the fix it names
  CHECK(fit(*model, dropped, layers::CrossEntropyLoss{}, opt, nullptr, o).epochs_run == 2);
}
