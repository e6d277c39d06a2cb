// Inverted dropout: forward draws the mask, backward reuses it.
#include <tapegrad/layers/functional/dropout.h>

#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/ops/kernels.h>

namespace tapegrad::layers::functional {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  if (!(p >= 0.0 && p <= 1.0))
    throw std::invalid_argument("dropout: expected a probability p in [0, 1], got " + std::to_string(p));
  kernels::check_floating(x, "dropout");
  if (!training || p == 0.0) return x;
  // mask[i] = 1/(1-p) where kept, 0 where dropped; p = 1 drops everything.
  Tensor mask = Tensor::empty(x.shape(), x.dtype());
  TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "dropout", [&] {
    scalar_t* m = mask.data<scalar_t>();
    const std::int64_t n = x.numel();
    if (p == 1.0) {
      for (std::int64_t i = 0; i < n; ++i) m[i] = scalar_t(0);
      return;
    }
    const double keep = 1.0 - p;
    const scalar_t scale = static_cast<scalar_t>(1.0 / keep);
    for (std::int64_t i = 0; i < n; ++i) m[i] = gen.uniform() < keep ? scale : scalar_t(0);
  });
  Tensor out = TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "dropout", [&] {
    return kernels::map_binary_same<scalar_t>(x, mask, [](scalar_t v, scalar_t k) { return v * k; });
  });
  if (autograd::needs_grad({&x}))
    autograd::record("dropout", out, {x}, [mask](const Tensor& g, GradSink& gs) {
      // dx = dy·mask: the forward's mask, 0 where dropped and 1/(1-p) where kept; the mask is a
      // constant, so a create_graph pass records the product (linear in dy, no path to x)
      if (autograd::creating_graph()) {
        gs.add(0, mul(g, mask));
        return;
      }
      gs.add(0, TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "dropout_backward", [&] {
               return kernels::map_binary_same<scalar_t>(g, mask, [](scalar_t gv, scalar_t k) { return gv * k; });
             }));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return out;
}

}  // namespace tapegrad::layers::functional
