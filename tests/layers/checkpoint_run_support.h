#pragma once
// A small training run for checkpoint tests: an MLP 5-16-16-3 with BatchNorm, SGD (Nesterov
// momentum) + StepLR or Adam + CosineAnnealingLR, and the generator its batches come from.
// Shared by the resume tests and by tests/fixtures/checkpoints/make_v1.cpp, which wrote the
// format-1 files those tests keep.
#include <cstdint>
#include <memory>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/optim.h>

namespace checkpoint_run {

using namespace tapegrad;

struct Run {
  std::shared_ptr<models::MLP> model;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<optim::LRScheduler> sched;
  Generator data{0};
};

inline Run make_run(bool adam, std::uint64_t init_seed) {
  Run r;
  Generator init(init_seed);
  models::MLPOptions mo;
  mo.norm = models::Norm::Batch;
  r.model = std::make_shared<models::MLP>(std::vector<std::int64_t>{5, 16, 16, 3}, mo, init);
  if (adam) {
    optim::AdamOptions o;
    o.lr = 0.01, o.weight_decay = 1e-3;
    r.opt = std::make_unique<optim::Adam>(r.model->parameters(), o);
    r.sched = std::make_unique<optim::CosineAnnealingLR>(*r.opt, 7, 1e-4);
  } else {
    optim::SGDOptions o;
    o.lr = 0.1, o.momentum = 0.9, o.nesterov = true;
    r.opt = std::make_unique<optim::SGD>(r.model->parameters(), o);
    r.sched = std::make_unique<optim::StepLR>(*r.opt, 3, 0.5);
  }
  r.data.manual_seed(1234);
  return r;
}

// One step: a batch drawn from the run's generator, MSE, backward, step, scheduler step.
inline void train_steps(Run& r, int n) {
  for (int i = 0; i < n; ++i) {
    r.model->train();
    r.opt->zero_grad();
    const Tensor x = randn({8, 5}, Dtype::Float32, r.data);
    const Tensor y = randn({8, 3}, Dtype::Float32, r.data);
    layers::mse_loss((*r.model)(x), y).backward();
    r.opt->step();
    r.sched->step();
  }
}


}  // namespace checkpoint_run
