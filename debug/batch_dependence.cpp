#include <tapegrad/debug/batch_dependence.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/random.h>
#include <tapegrad/debug/buffers.h>
#include <tapegrad/debug/mode_audit.h>
#include <tapegrad/debug/row_selection.h>

namespace tapegrad::debug {

BatchDependenceResult batch_dependence(layers::Module& model, const Tensor& x, BatchDependenceOptions opt) {
  if (!x.defined() || x.dim() < 1 || x.size(0) < 1)
    throw std::invalid_argument("batch_dependence: expected a batch (N, ...) with N >= 1, got " +
                                (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor")));
  const std::int64_t N = x.size(0);
  const bool own_pool = !opt.pool.defined();
  const Tensor pool = own_pool ? x : opt.pool;
  if (!own_pool) {
    Shape a = x.shape(), b = pool.shape();
    a.erase(a.begin());
    b.erase(b.begin());
    if (a != b || pool.dtype() != x.dtype())
      throw std::invalid_argument("batch_dependence: the pool's rows must match x's: x is " + shape_str(x.shape()) +
                                  " " + dtype_name(x.dtype()) + ", the pool is " + shape_str(pool.shape()) + " " +
                                  dtype_name(pool.dtype()));
  }
  const std::int64_t available = own_pool ? N - 1 : pool.size(0);
  std::int64_t k = opt.companions >= 0 ? opt.companions : own_pool ? std::max<std::int64_t>(1, N / 2) : N - 1;
  k = std::min(k, available);
  if (opt.trials > 0 && k < 1)
    throw std::invalid_argument("batch_dependence: other batches need at least 1 companion, got " +
                                std::to_string(k) + " (x has " + std::to_string(N) + " rows)");

  NoGradGuard ng;
  AuditPause pause;
  BufferRestore restore(model);
  BatchDependenceResult r;
  const Tensor full = model(x);
  const std::int64_t S = std::min(N, std::max<std::int64_t>(opt.max_samples, 0));
  r.samples = S;
  Generator gen(opt.seed);
  std::vector<std::int64_t> candidates;
  for (std::int64_t i = 0; i < S; ++i) {
    const Tensor ref = take_rows(full, {i});
    if (opt.try_alone && !r.alone_refused) {
      try {
        const Tensor alone = model(take_rows(x, {i}));
        const double d = max_abs_diff(alone, ref);
        r.alone_max_abs_diff = std::max(r.alone_max_abs_diff, d);
      } catch (const std::invalid_argument& e) {
        r.alone_refused = true;
        r.alone_error = e.what();
        r.alone_max_abs_diff = std::numeric_limits<double>::quiet_NaN();
      }
    }
    for (std::int64_t t = 0; t < opt.trials; ++t) {
      candidates.clear();
      for (std::int64_t j = 0; j < pool.size(0); ++j)
        if (!own_pool || j != i) candidates.push_back(j);
      for (std::int64_t j = 0; j < k; ++j)  // partial Fisher-Yates: k companions without replacement
        std::swap(candidates[j], candidates[j + gen.randint(static_cast<std::int64_t>(candidates.size()) - j)]);
      const std::int64_t pos = gen.randint(k + 1);
      Tensor companions = take_rows(pool, std::vector<std::int64_t>(candidates.begin(), candidates.begin() + k));
      std::vector<std::int64_t> order;
      for (std::int64_t j = 0; j < k + 1; ++j) order.push_back(j < pos ? j : (j == pos ? k : j - 1));
      // stack companions and sample i: rows of [companions; x_i], reordered so x_i sits at pos
      Shape s = x.shape();
      s[0] = k + 1;
      Tensor stacked = Tensor::empty(s, x.dtype());
      const std::size_t row = x.nbytes() / static_cast<std::size_t>(N);
      char* dst = static_cast<char*>(stacked.raw_data());
      for (std::int64_t j = 0; j <= k; ++j) {
        const char* src = order[j] == k ? static_cast<const char*>(x.raw_data()) + static_cast<std::size_t>(i) * row
                                        : static_cast<const char*>(companions.raw_data()) + order[j] * row;
        std::copy(src, src + row, dst + static_cast<std::size_t>(j) * row);
      }
      const Tensor out = model(stacked);
      const double d = max_abs_diff(take_rows(out, {pos}), ref);
      r.companions_max_abs_diff = std::max(r.companions_max_abs_diff, d);
      ++r.trials;
    }
  }
  r.max_abs_diff = r.companions_max_abs_diff;
  if (!r.alone_refused) r.max_abs_diff = std::max(r.max_abs_diff, r.alone_max_abs_diff);
  return r;
}

}  // namespace tapegrad::debug
