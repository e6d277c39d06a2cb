// C42: optimizer checkpoint resume: 2 steps, state_dict(), then a FRESH optimizer (built with
// the original lr 0.1) on a copy of the parameter loads it (after the lr was set to 0.05 in the
// saved param group) and takes steps 3 and 4. The result must equal the uninterrupted run with
// lr 0.05 for steps 3-4: momentum buffers, Adam moments incl. max_exp_avg_sq and the step
// count (bias correction), RMSprop square_avg/grad_avg/momentum_buffer, and the group's lr all
// restored. Also: a state_dict must survive the round trip unchanged.
// Sources: pytorch/pytorch#35047 (divergence after resuming with Optimizer.load_state_dict);
// pytorch/pytorch#5627 (cannot restart Adam training to the same results); OpenNMT/OpenNMT-py#38
// (optimizer state wiped after loading).
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
#include <tapegrad/optim/adam.h>
#include <tapegrad/optim/rmsprop.h>
#include <tapegrad/optim/sgd.h>

#include "probe_harness.h"

using namespace tapegrad;
using probe::check;
using probe::verdict;

using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

static void resume(const std::string& what, const Make& make, const std::vector<double>& after2,
                   const std::vector<double>& want34, const std::vector<double>& wrong34) {
  const std::vector<std::vector<double>> grads = {{4.0, -3.0, 0.5}, {0.1, -0.2, 0.5}, {0.05, 0.1, -2.0}, {-0.5, 0.0, 0.25}};
  for (Dtype dt : {Dtype::Float64, Dtype::Float32}) {
    const std::string dn = (dt == Dtype::Float64 ? "float64 " : "float32 ") + what;
    const double tol = dt == Dtype::Float64 ? 1e-10 : 2e-5;
    try {
      Tensor p = Tensor::from_vector({1.0, -2.0, 0.5}, {3}, dt);
      p.requires_grad_();
      auto opt = make({p});
      for (int i = 0; i < 2; ++i) {
        p.set_grad(Tensor::from_vector(grads[i], {3}, dt));
        opt->step();
      }
      check(dn + ": parameter after 2 steps", p.to_vector(), after2, tol);
      opt->set_lr(0, 0.05);
      const optim::OptimizerState saved = opt->state_dict();
      // a fresh optimizer on a copy of the parameter, built with lr 0.1
      Tensor q = Tensor::from_vector(p.to_vector(), {3}, dt);
      q.requires_grad_();
      auto opt2 = make({q});
      opt2->load_state_dict(saved);
      verdict(opt2->lr(0) == 0.05, dn + ": lr 0.05 restored from the saved param group");
      // round trip: the loaded optimizer's state_dict has the same keys and values
      const optim::OptimizerState again = opt2->state_dict();
      bool same = again.keys() == saved.keys();
      for (const auto& k : saved.keys()) {
        const Tensor* a = again.find(k);
        const Tensor* b = saved.find(k);
        if (!a || a->to_vector() != b->to_vector()) same = false;
      }
      verdict(same, dn + ": state_dict() after load_state_dict() equals the saved one");
      std::vector<double> got;
      for (int i = 2; i < 4; ++i) {
        q.set_grad(Tensor::from_vector(grads[i], {3}, dt));
        opt2->step();
        for (double v : q.to_vector()) got.push_back(v);
      }
      check(dn + ": steps 3-4 after resume = uninterrupted run (a fresh state would give " +
                std::to_string(wrong34[0]) + ", ...)",
            got, want34, tol);
    } catch (const std::exception& e) {
      probe::threw(dn, e);
    }
  }
}

int main() {
  resume("SGD lr 0.1, momentum 0.9, dampening 0.1, weight_decay 0.01",
         [](std::vector<Tensor> ps) {
           optim::SGDOptions o;
           o.lr = 0.1, o.momentum = 0.9, o.dampening = 0.1, o.weight_decay = 0.01;
           return std::unique_ptr<optim::Optimizer>(new optim::SGD(ps, o));
         },
         {0.22856089999999998, -1.4066718, 0.35864545000000003},
         {0.05951045259499998, -1.27944110769, 0.40759951204750006, -0.07016172977316779, -1.1643577361125397,
          0.4402247481098287},
         {0.22594661954999998, -1.4109684641, 0.458466127275, 0.2459920911662025, -1.414200525981155, 0.5368484270652263});
  resume("Adam lr 0.1, amsgrad",
         [](std::vector<Tensor> ps) {
           optim::AdamOptions o;
           o.lr = 0.1, o.amsgrad = true;
           return std::unique_ptr<optim::Optimizer>(new optim::Adam(ps, o));
         },
         {0.8311673443133534, -1.8281903402734625, 0.30000000400000065},
         {0.8041774698555773, -1.8015139748937834, 0.31724168341734005, 0.7858346754499969, -1.7796732481609443,
          0.3278650827063506},
         {0.7811673543133514, -1.878190335273463, 0.3500000037500007, 0.8148577136892318, -1.9116764875995043,
          0.3786267323355229});
  resume("RMSprop lr 0.1, centered, momentum 0.5",
         [](std::vector<Tensor> ps) {
           optim::RMSpropOptions o;
           o.lr = 0.1, o.centered = true, o.momentum = 0.5;
           return std::unique_ptr<optim::Optimizer>(new optim::RMSprop(ps, o));
         },
         {-0.5328063405089131, -0.42521220790312036, -1.7235979385360107},
         {-0.6710926749138126, -0.2996506295268583, -1.5558996651085135, -0.677066134216863, -0.23686984033872724,
          -1.5309472873502197},
         {-1.035324238039539, -0.9277306104827288, -1.2210790561589289, -0.7870281896056766, -1.178989811772533,
          -1.0323777318721878});
  return probe::finish("C42");
}
