// C40: SGD corners: maximize together with weight decay (the decay must still shrink the
// weights: d = -g + wd*p, p -= lr*d; negating the whole update makes them grow), Nesterov with
// weight decay and maximize, dampening (not applied on the first step, where buf = d), and
// plain Nesterov; 4 steps each from p = [1, -2, 0.5] with fixed gradients.
// Sources: pytorch/pytorch#149476 (SGD maximize: documented loop vs code, order of weight
// decay, momentum and the sign); kozistr/pytorch_optimizer#517 (weight_decay accepted but not
// applied); andersbll/deeppy#17 (weight-decay penalty with the wrong sign).
// Expected values: PyTorch 1.13 float64.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>
#include <memory>

#include <tapegrad/core/core.h>
#include <tapegrad/optim/sgd.h>

#include "probe_harness.h"

using namespace tapegrad;
using probe::check;
using probe::verdict;

// Parameter [1, -2, 0.5]; each step sets the gradient from `grads` and calls step(); returns the
// parameter after every step, concatenated.
template <class Make>
static std::vector<double> run_steps(Make make, const std::vector<std::vector<double>>& grads, Dtype dt) {
  Tensor p = Tensor::from_vector({1.0, -2.0, 0.5}, {3}, dt);
  p.requires_grad_();
  auto opt = make(std::vector<Tensor>{p});
  std::vector<double> out;
  for (const auto& g : grads) {
    p.set_grad(Tensor::from_vector(g, {3}, dt));
    opt->step();
    for (double v : p.to_vector()) out.push_back(v);
  }
  return out;
}

template <class Make>
static void run(const std::string& what, Make make, const std::vector<std::vector<double>>& grads,
                const std::vector<double>& want) {
  for (Dtype dt : {Dtype::Float64, Dtype::Float32}) {
    const std::string dn = dt == Dtype::Float64 ? "float64 " : "float32 ";
    try {
      check(dn + what, run_steps(make, grads, dt), want, dt == Dtype::Float64 ? 1e-10 : 2e-5);
    } catch (const std::exception& e) {
      probe::threw(dn + what, e);
    }
  }
}

static auto sgd(double lr, double momentum, double dampening, double wd, bool nesterov, bool maximize) {
  return [=](std::vector<Tensor> ps) {
    optim::SGDOptions o;
    o.lr = lr, o.momentum = momentum, o.dampening = dampening, o.weight_decay = wd, o.nesterov = nesterov,
    o.maximize = maximize;
    return std::make_unique<optim::SGD>(ps, o);
  };
}

int main() {
  const std::vector<std::vector<double>> grads = {{0.5, 1.0, -1.0}, {-0.25, 0.5, 2.0}, {1.0, -1.0, 0.0}, {0.0, 0.25, -0.5}};
  run("SGD lr 0.1, weight_decay 0.5, maximize (ascent on g, decay still shrinks)", sgd(0.1, 0, 0, 0.5, false, true), grads,
      {1.0, -1.8, 0.375, 0.925, -1.6600000000000001, 0.55625, 0.97875, -1.677, 0.5284375, 0.9298125, -1.56815,
       0.45201562500000003});
  run("SGD lr 0.1, momentum 0.9, nesterov, weight_decay 0.1, maximize", sgd(0.1, 0.9, 0, 0.1, true, true), grads,
      {1.076, -1.772, 0.3005, 1.040456, -1.546132, 0.5897405, 1.2108817360000002, -1.564422292, 0.6615563805,
       1.2606222494160002, -1.4275747192519999, 0.6239287662205});
  run("SGD lr 0.05, momentum 0.5, dampening 0.3, weight_decay 0.2", sgd(0.05, 0.5, 0.3, 0.2, false, false), grads,
      {0.965, -2.03, 0.545, 0.949495, -2.0482899999999997, 0.49368500000000004, 0.900096035, -2.0080969699999995,
       0.46457170500000006, 0.8690958802550001, -1.9826937762099994, 0.4642630555650001});
  run("SGD lr 0.2, momentum 0.9, nesterov", sgd(0.2, 0.9, 0, 0, true, false), grads,
      {0.81, -2.38, 0.88, 0.8240000000000001, -2.7319999999999998, 0.2819999999999999, 0.4116000000000001,
       -2.5787999999999998, 0.10379999999999988, 0.22044000000000005, -2.7159199999999997, 0.13341999999999984});
  return probe::finish("C40");
}
