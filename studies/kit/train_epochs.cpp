#include "kit/train_epochs.h"

#include <cmath>

#include "kit/norm_net.h"

namespace studies::kit {

double train_epochs(tapegrad::layers::Module& net, tapegrad::optim::Optimizer& opt, tapegrad::data::DataLoader& loader,
                    int epochs, const StopRule& stop, const BeforeStep& before_step) {
  net.train();
  double last_epoch_loss = NAN;
  std::int64_t step = 0;
  bool stopped = false;
  for (int e = 1; e <= epochs && !stopped; ++e) {
    double sum = 0;
    std::int64_t n = 0;
    for (auto b : loader) {
      if (before_step) before_step(step, b.X, b.y);
      const double loss = train_step(net, opt, b.X, b.y);
      if (stop(++step, loss)) {
        stopped = true;
        break;
      }
      sum += loss;
      ++n;
    }
    last_epoch_loss = n ? sum / static_cast<double>(n) : NAN;
  }
  return last_epoch_loss;
}

}  // namespace studies::kit
