#include "kit/sgd_epoch.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kit/run.h"
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/clip_grad.h>

namespace studies::kit {

using tapegrad::Tensor;

void shuffle_order(std::vector<std::int64_t>& order, tapegrad::Generator& gen) {
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  for (std::int64_t i = static_cast<std::int64_t>(order.size()) - 1; i > 0; --i)
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(gen.randint(i + 1))]);
}

namespace {
// The rows of src in `order`, as one contiguous tensor: every batch is then a view.
Tensor gather_rows(const Tensor& src, const std::vector<std::int64_t>& order) {
  const std::int64_t n = static_cast<std::int64_t>(order.size());
  Tensor dst = Tensor::empty({n, src.size(1)}, src.dtype());
  const std::size_t row = src.nbytes() / static_cast<std::size_t>(src.size(0));
  const auto* s = static_cast<const char*>(src.raw_data());
  auto* d = static_cast<char*>(dst.raw_data());
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(d + static_cast<std::size_t>(i) * row, s + static_cast<std::size_t>(order[i]) * row, row);
  return dst;
}
}  // namespace

EpochStats sgd_epoch(tapegrad::layers::Module& net, tapegrad::optim::SGD& sgd, const Tensor& x, const Tensor& y,
                     const std::vector<std::int64_t>& order, const EpochOptions& o) {
  if (o.batch < 1) throw std::invalid_argument("sgd_epoch: batch must be >= 1, got " + std::to_string(o.batch));
  if (x.dim() != 2 || y.dim() != 2 || x.size(0) != y.size(0))
    throw std::invalid_argument("sgd_epoch: expected x (n, F) and y (n, K) with the same n, got " +
                                tapegrad::shape_str(x.shape()) + " and " + tapegrad::shape_str(y.shape()));
  for (auto i : order)
    if (i < 0 || i >= x.size(0))
      throw std::invalid_argument("sgd_epoch: row " + std::to_string(i) + " out of range for " +
                                  std::to_string(x.size(0)) + " rows");
  const std::vector<Tensor> params = o.grad_clip ? sgd.parameters() : std::vector<Tensor>{};
  const Tensor xs = gather_rows(x, order), ys = gather_rows(y, order);
  const std::int64_t n = static_cast<std::int64_t>(order.size()), f = x.size(1), k = y.size(1);
  const std::size_t xrow = xs.nbytes() / std::max<std::size_t>(1, order.size()),
                    yrow = ys.nbytes() / std::max<std::size_t>(1, order.size());
  EpochStats st;
  for (std::int64_t s = 0, b = 0; s < n; s += o.batch, ++b) {
    const std::int64_t rows = std::min(o.batch, n - s);
    if (rows < o.batch && o.drop_last) break;
    if (rows < o.min_batch) continue;
    const auto off = static_cast<std::size_t>(s);
    const Tensor xb = tapegrad::alias_with_shape(xs, {rows, f}, off * xrow);
    const Tensor yb = tapegrad::alias_with_shape(ys, {rows, k}, off * yrow);
    Tensor loss = tapegrad::layers::mse_loss(net(xb), yb);
    const double lv = loss.item();
    if (o.stop_on_crash && is_crash_loss(lv)) {
      st.crashed = true;
      st.crash_step = b + 1;
      st.crash_loss = lv;
      tapegrad::ModeChecksPause pause;  // the diverged batch's graph is dropped unreached, on purpose
      loss = Tensor();
      return st;
    }
    sgd.zero_grad();
    loss.backward();
    if (o.grad_clip) tapegrad::optim::clip_grad_value_(params, *o.grad_clip);
    sgd.step();
    st.loss_sum += lv;
    ++st.steps;
  }
  return st;
}

}  // namespace studies::kit
