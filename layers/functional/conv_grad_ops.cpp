// conv2d's input and weight gradients as recorded ops, each with its backward beside it.
//   <ddx, conv2d_input_grad(g, w)> = <conv2d(ddx, w), g>   (dx is the adjoint of x ↦ conv2d(x, w))
//   <ddw, conv2d_weight_grad(x, g)> = <conv2d(x, ddw), g>  (dw is the adjoint of w ↦ conv2d(x, w))
// so each backward is conv2d or the other gradient op, with the roles of the tensors swapped.
#include <tapegrad/layers/functional/conv_grad_ops.h>

#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/kernels.h>
#include <tapegrad/layers/functional/conv.h>
#include <tapegrad/layers/functional/kernels/conv_plan.h>

namespace tapegrad::layers::functional {

namespace {

void check_grad(const char* who, const Tensor& g, const Tensor& other, const detail::ConvPlan& pl) {
  if (!g.defined()) throw std::invalid_argument(std::string(who) + ": expected a gradient g, got an undefined tensor");
  tapegrad::kernels::check_floating(g, who);
  tapegrad::kernels::check_same_dtype(g, other, who);
  if (g.shape() != pl.output_shape())
    throw std::invalid_argument(std::string(who) + ": expected g of conv2d's output shape " +
                                shape_str(pl.output_shape()) + ", got " + shape_str(g.shape()));
}

void check_tensor(const char* who, const char* what, const Tensor& t) {
  if (!t.defined()) throw std::invalid_argument(std::string(who) + ": expected a 4-D " + what + ", got undefined");
}

}  // namespace

Tensor conv2d_input_grad(const Tensor& g, const Tensor& weight, const Shape& input_shape, const Conv2dParams& params) {
  const char* who = "conv2d_input_grad";
  check_tensor(who, "weight", weight);
  const detail::ConvPlan pl =
      detail::conv_plan(who, input_shape, weight.shape(), params.stride, params.padding, params.dilation, params.groups);
  check_grad(who, g, weight, pl);
  const bool dnnl = detail::conv_uses_dnnl(g.dtype(), pl, false);
  Tensor dx = detail::conv_backward_values(g, Tensor(), weight, pl, dnnl, false, true, false, false).dx;
  if (autograd::needs_grad({&g, &weight}))
    autograd::record(
        who, dx, {g, weight},
        [g, weight, input_shape, params](const Tensor& ddx, GradSink& gs) {
          if (gs.needs(0))
            gs.add(0, conv2d(ddx, weight, Tensor(), params.stride, params.padding, params.dilation, params.groups));
          if (gs.needs(1)) gs.add(1, conv2d_weight_grad(ddx, g, weight.shape(), params));
        },
        autograd::kSavesInputs | autograd::kSecondOrder);
  return dx;
}

Tensor conv2d_weight_grad(const Tensor& x, const Tensor& g, const Shape& weight_shape, const Conv2dParams& params) {
  const char* who = "conv2d_weight_grad";
  check_tensor(who, "input", x);
  tapegrad::kernels::check_floating(x, who);
  const detail::ConvPlan pl =
      detail::conv_plan(who, x.shape(), weight_shape, params.stride, params.padding, params.dilation, params.groups);
  check_grad(who, g, x, pl);
  const bool dnnl = detail::conv_uses_dnnl(g.dtype(), pl, false);
  Tensor dw = detail::conv_backward_values(g, x, Tensor(), pl, dnnl, false, false, true, false).dw;
  if (autograd::needs_grad({&x, &g}))
    autograd::record(
        who, dw, {x, g},
        [x, g, params](const Tensor& ddw, GradSink& gs) {
          if (gs.needs(0)) gs.add(0, conv2d_input_grad(g, ddw, x.shape(), params));
          if (gs.needs(1))
            gs.add(1, conv2d(x, ddw, Tensor(), params.stride, params.padding, params.dilation, params.groups));
        },
        autograd::kSavesInputs | autograd::kSecondOrder);
  return dw;
}

}  // namespace tapegrad::layers::functional
