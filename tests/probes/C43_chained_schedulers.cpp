// C43: two schedulers stepping the same optimizer (PyTorch's chainable form, before
// ChainedScheduler existed): each scheduler multiplies the CURRENT lr by its own factor, so
// StepLR(2, 0.5) + ExponentialLR(0.9) gives 0.9^e * 0.5^(e//2); LinearLR warm-up combined with
// a MultiStepLR decay; constructing the second scheduler applies its epoch-0 factor on top of
// the first. A closed-form scheduler (lr = base_lr * f(epoch)) overwrites the other's effect.
// Sources: pytorch/pytorch#26423 (schedulers changed to the chainable form);
// pytorch/pytorch#41307 (compose schedulers); tracel-ai/burn#5127 (chaining vs composing).
// Expected values: PyTorch 1.13 float64.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>
#include <functional>
#include <memory>

#include <tapegrad/core/core.h>
#include <tapegrad/optim/lr_scheduler.h>
#include <tapegrad/optim/sgd.h>

#include "probe_harness.h"

using namespace tapegrad;
using probe::check;
using probe::verdict;

using Make = std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)>;

// lr after constructing the schedulers in order, then after each (optimizer.step(); s1.step(); s2.step()).
static std::vector<double> chain(const Make& a, const Make& b, int n, double lr) {
  Tensor q = Tensor::zeros({1}, Dtype::Float64);
  q.requires_grad_();
  optim::SGDOptions o;
  o.lr = lr;
  optim::SGD opt({q}, o);
  auto s1 = a(opt);
  auto s2 = b(opt);
  std::vector<double> out = {opt.lr(0)};
  for (int i = 0; i < n; ++i) {
    opt.step();
    s1->step();
    s2->step();
    out.push_back(opt.lr(0));
  }
  return out;
}

int main() {
  const double tol = 1e-12;
  auto run = [&](const std::string& what, const Make& a, const Make& b, int n, double lr, const std::vector<double>& want) {
    try {
      check(what, chain(a, b, n, lr), want, tol);
    } catch (const std::exception& e) {
      probe::threw(what, e);
    }
  };
  run("StepLR(2, 0.5) + ExponentialLR(0.9), lr 1, epochs 0..6",
      [](optim::Optimizer& o) { return std::make_unique<optim::StepLR>(o, 2, 0.5); },
      [](optim::Optimizer& o) { return std::make_unique<optim::ExponentialLR>(o, 0.9); }, 6, 1.0,
      {1.0, 0.9, 0.405, 0.36450000000000005, 0.16402500000000003, 0.14762250000000005, 0.06643012500000002});
  run("MultiStepLR([3], 0.1) + LinearLR(0.5 -> 1 over 4), lr 0.8, epochs 0..6",
      [](optim::Optimizer& o) { return std::make_unique<optim::MultiStepLR>(o, std::vector<std::int64_t>{3}, 0.1); },
      [](optim::Optimizer& o) { return std::make_unique<optim::LinearLR>(o, 0.5, 1.0, 4); }, 6, 0.8,
      {0.4, 0.5, 0.6, 0.07, 0.08, 0.08, 0.08});
  run("LinearLR(0.25 -> 1 over 3) + StepLR(1, 0.5), lr 1, epochs 0..5",
      [](optim::Optimizer& o) { return std::make_unique<optim::LinearLR>(o, 0.25, 1.0, 3); },
      [](optim::Optimizer& o) { return std::make_unique<optim::StepLR>(o, 1, 0.5); }, 5, 1.0,
      {0.25, 0.25, 0.1875, 0.125, 0.0625, 0.03125});
  return probe::finish("C43");
}
