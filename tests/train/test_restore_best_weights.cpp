// EarlyStopping's restore_best_weights: the model ends with the best epoch's parameters and
// buffers, not the last epoch's; without the option (or when the last epoch is the best)
// the weights stay as they are.
#include <catch2/catch.hpp>

#include <tapegrad/core/autograd.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/train/early_stopping.h>

using namespace tapegrad;
using namespace tapegrad::train;

namespace {

// Epoch e sets every weight to e and every running_mean to 10·e, then logs val_loss[e-1].
int run_epochs(layers::Module& model, EarlyStopping& es, const std::vector<double>& val_loss) {
  TrainState s;
  s.model = &model;
  s.epochs = static_cast<int>(val_loss.size());
  es.on_fit_begin(s);
  for (std::size_t i = 0; i < val_loss.size(); ++i) {
    const int epoch = static_cast<int>(i) + 1;
    {
      NoGradGuard ng;
      for (auto& [name, t] : model.named_parameters()) {
        Tensor h = t;
        h.fill_(epoch);
      }
      for (auto& [name, t] : model.named_buffers())
        if (name.find("running_mean") != std::string::npos) {
          Tensor h = t;
          h.fill_(10.0 * epoch);
        }
    }
    EpochLogs e;
    e.epoch = epoch;
    e.set("val_loss", val_loss[i]);
    s.history.push_back(e);
    s.epoch = epoch;
    es.on_epoch_end(s);
    if (s.stop_training) break;
  }
  es.on_fit_end(s);
  return s.epoch;
}

std::shared_ptr<layers::Sequential> small_net() {
  Generator g(1);
  auto net = std::make_shared<layers::Sequential>();
  net->push_back(std::make_shared<layers::Linear>(3, 2, true, Dtype::Float32, g));
  net->push_back(std::make_shared<layers::BatchNorm1d>(2));
  return net;
}

double first(const Tensor& t) { return t.to_vector().front(); }

}  // namespace

TEST_CASE("EarlyStopping restore_best_weights copies the best epoch back", "[train][early_stopping]") {
  auto net = small_net();
  // best at epoch 2 (0.5); 3 and 4 do not improve; patience 2 stops after epoch 4
  EarlyStopping es({"val_loss", Mode::Min, 0.0, 2, true});
  CHECK(run_epochs(*net, es, {1.0, 0.5, 0.6, 0.7, 0.1}) == 4);
  CHECK(es.best_epoch() == 2);
  CHECK(es.restored_epoch() == 2);
  const auto sd = net->state_dict();
  CHECK(first(sd.at("0.weight")) == 2.0);
  CHECK(first(sd.at("0.bias")) == 2.0);
  CHECK(first(sd.at("1.running_mean")) == 20.0);
  // the restore writes into the live tensors (the parameters the optimizer holds)
  CHECK(first(net->parameters().front()) == 2.0);
}

TEST_CASE("EarlyStopping keeps the last weights without restore_best_weights or when the last is best",
          "[train][early_stopping]") {
  {
    auto net = small_net();
    EarlyStopping es({"val_loss", Mode::Min, 0.0, 2});
    CHECK(run_epochs(*net, es, {1.0, 0.5, 0.6, 0.7}) == 4);
    CHECK(es.restored_epoch() == 0);
    CHECK(first(net->state_dict().at("0.weight")) == 4.0);
  }
  {
    auto net = small_net();
    EarlyStopping es({"val_loss", Mode::Min, 0.0, 2, true});
    CHECK(run_epochs(*net, es, {1.0, 0.9, 0.8}) == 3);
    CHECK(es.restored_epoch() == 0);
    CHECK(first(net->state_dict().at("0.weight")) == 3.0);
    CHECK(first(net->state_dict().at("1.running_mean")) == 30.0);
  }
}
