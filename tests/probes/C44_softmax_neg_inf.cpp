// C44: softmax, log_softmax and logsumexp on rows with -inf entries (attention / action masks)
// and an all -inf row. Masked entries: softmax exactly 0, log_softmax exactly -inf, and every
// finite output and every gradient of those rows finite (softmax grad 0 at masked entries,
// log_softmax grad = g there, as PyTorch's dx = g - exp(y)*sum(g)). An all -inf row: softmax
// and log_softmax NaN (PyTorch: 0/0), logsumexp -inf (PyTorch masks the infinite max), and a
// +inf entry: logsumexp +inf. A row of magnitude 1000 stays exact.
// Sources: pytorch/pytorch#31829 (NaN gradients of logsumexp/softmax/log_softmax at -inf);
// pytorch/pytorch#25110 (softmax of an all -inf row is NaN); tensorflow/tensorflow#11756
// (-inf mask gives NaN gradient); allenai/allennlp#890 (masked_log_softmax returned NaN).
// Expected values: PyTorch 1.13 float64.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>
#include <tapegrad/core/core.h>
#include <tapegrad/core/ops/softmax.h>

#include "probe_harness.h"

using namespace tapegrad;
using probe::check;
using probe::verdict;

static void check_special(const std::string& what, const std::vector<double>& got, const std::vector<double>& want,
                          double tol) {
  bool ok = got.size() == want.size();
  for (std::size_t i = 0; ok && i < got.size(); ++i) {
    if (std::isnan(want[i])) ok = std::isnan(got[i]);
    else if (std::isinf(want[i])) ok = got[i] == want[i];
    else ok = std::isfinite(got[i]) && std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i]));
  }
  probe::report(ok, what, got, want);
}

static std::vector<double> rows02(const std::vector<double>& v) {  // rows 0 and 2 of a (3, 4) result
  std::vector<double> out(v.begin(), v.begin() + 4);
  out.insert(out.end(), v.begin() + 8, v.begin() + 12);
  return out;
}

int main() {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> x = {0.0, -inf, 1.0, -inf, -inf, -inf, -inf, -inf, 1000.0, -inf, 999.0, -1000.0};
  const std::vector<double> g = {1.0, 2.0, -1.0, 0.5, 1.0, 1.0, 1.0, 1.0, 0.5, -1.0, 1.0, 2.0};
  for (Dtype dt : {Dtype::Float64, Dtype::Float32}) {
    const std::string dn = dt == Dtype::Float64 ? "float64 " : "float32 ";
    const double tol = dt == Dtype::Float64 ? 1e-12 : 1e-6;
    // op on x as (3, 4), dim 1: its output against want_y (NaN and ±inf exactly), then the gradient
    // of rows 0 and 2 after backward(dy) against want_dx
    auto run = [&](const std::string& name, const std::function<Tensor(const Tensor&)>& op, const std::string& y_what,
                   const std::vector<double>& want_y, const Tensor& dy, const std::string& dx_what,
                   const std::vector<double>& want_dx, double dx_tol) {
      try {
        Tensor t = Tensor::from_vector(x, {3, 4}, dt);
        t.requires_grad_();
        Tensor y = op(t);
        check_special(dn + y_what, y.to_vector(), want_y, tol);
        y.backward(dy);
        check(dn + dx_what, rows02(t.grad().to_vector()), want_dx, dx_tol);
      } catch (const std::exception& e) {
        probe::threw(dn + name, e);
      }
    };
    const Tensor dy = Tensor::from_vector(g, {3, 4}, dt);
    run("softmax", [](const Tensor& t) { return softmax(t, 1); }, "softmax: masked entries 0, all -inf row NaN",
        {0.26894142136999516, 0.0, 0.7310585786300049, 0.0, nan, nan, nan, nan, 0.7310585786300049, 0.0,
         0.26894142136999516, 0.0},
        dy, "softmax grad, rows with some -inf (finite, 0 at masked entries)",
        {0.39322386648296376, 0.0, -0.3932238664829637, 0.0, -0.09830596662074097, 0.0, 0.09830596662074093, 0.0}, tol);
    run("log_softmax", [](const Tensor& t) { return log_softmax(t, 1); }, "log_softmax: masked entries -inf, all -inf row NaN, |x| = 1000 exact",
        {-1.3132616875182228, -inf, -0.31326168751822286, -inf, nan, nan, nan, nan, -0.31326168751822286, -inf,
         -1.3132616875182228, -2000.3132616875182},
        dy, "log_softmax grad, rows with some -inf (g - softmax*sum g; = g at masked entries)",
        {0.32764644657501224, 2.0, -2.827646446575012, 0.5, -1.3276464465750122, -1.0, 0.32764644657501224, 2.0}, tol);
    run("logsumexp", [](const Tensor& t) { return logsumexp(t, 1); }, "logsumexp: [1.313262, -inf (all -inf row), 1000.313262]",
        {1.3132616875182228, -inf, 1000.3132616875182}, Tensor::ones({3}, dt),
        "logsumexp grad = softmax, rows with some -inf",
        {0.2689414213699951, 0.0, 0.7310585786300049, 0.0, 0.7310585786300168, 0.0, 0.2689414213699995, 0.0},
        // float32: exp(x - logsumexp) with logsumexp ~ 1000 rounded to float32 (ulp 6e-5); torch float32 gives
        // 0.73107994 here too
        dt == Dtype::Float64 ? tol : 5e-5);
    try {
      Tensor u = Tensor::from_vector({-inf, 2.0, inf}, {1, 3}, dt);
      check_special(dn + "logsumexp with a +inf entry = +inf", logsumexp(u, 1).to_vector(), {inf}, tol);
    } catch (const std::exception& e) {
      probe::threw(dn + "logsumexp", e);
    }
  }
  return probe::finish("C44");
}
