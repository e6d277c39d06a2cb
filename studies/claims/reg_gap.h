#pragma once
// `claims reg-gap`: "BN regularises: a smaller train–test gap" (the chapter), and Luo, Wang,
// Shao & Peng 2019 (ICLR): BN's regularization fades as the batch grows. The Fashion-MNIST
// MLP 784-256-128-10, BN vs plain, batch sizes {16, 32, 128, 512}, SGD momentum 0.9 over an
// lr grid, a fixed number of epochs on a training subset. Per (net, batch): the generalization
// gap train − test accuracy (both eval mode) at the matched lr and at each net's best lr (best
// mean test accuracy over seeds — selected on the test set, so optimistic for both nets alike),
// paired BN − plain by seed; and for BN the mean |γ| of every BN layer after training.
#include <cstdint>
#include <string>
#include <vector>

#include "mlp.h"
#include "kit/training_options.h"

namespace claims {

struct GapOptions : studies::kit::FashionGridOptions {
  GapOptions() { train_size = 5000; }  ///< 5,000 training images, not the usual 10,000
  std::vector<std::int64_t> batches = {16, 32, 128, 512};
  std::vector<double> lrs = {0.01, 0.03, 0.1};
  double matched_lr = 0.03;  ///< must be one of lrs
  int epochs = 10;
  std::vector<std::int64_t> hidden = {256, 128};
};
/// --quick: 1 seed, batches {32, 128}, lrs {0.03}, 2 epochs on 1,024 / 1,000 images.
GapOptions quick_gap_options(GapOptions o);
/// Throws std::invalid_argument naming the option.
void check_gap_options(const GapOptions& o);

struct GapRun : studies::kit::BnVsPlainRun {
  std::int64_t batch = 0;
  double lr = 0;
  TrainOutcome out;
  std::vector<double> gamma_abs;  ///< BN: mean |γ| per BN layer after training
  double gap() const { return out.train_acc - out.test_acc; }
};
using GapResult = studies::kit::GridResult<GapOptions, GapRun>;

GapResult run_reg_gap(const GapOptions& o, const studies::kit::StudyData& d);
std::string gap_csv(const GapResult& r);
std::string gap_summary(const GapResult& r);
std::vector<std::string> write_gap(const GapResult& r, const std::string& dir);

}  // namespace claims
