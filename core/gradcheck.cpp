#include <tapegrad/core/gradcheck.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/index_ops.h>
#include <tapegrad/core/ops/shape_ops.h>
#include <tapegrad/core/random.h>

namespace tapegrad {

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opts) {
  for (const Tensor& t : inputs)
    if (t.requires_grad() && t.dtype() != Dtype::Float64)
      throw std::invalid_argument(std::string("gradcheck: inputs that require grad must be float64, got ") +
                                  dtype_name(t.dtype()));
  Tensor out0;
  {
    NoGradGuard ng;
    out0 = fn(inputs);
  }
  const std::int64_t n_out = out0.numel();
  // Numeric Jacobian, column by column: J[:, k] = (f(x + h e_k) - f(x - h e_k)) / 2h.
  std::vector<std::vector<std::vector<double>>> numeric(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    double* p = inputs[i].data<double>();
    numeric[i].resize(static_cast<std::size_t>(inputs[i].numel()));
    for (std::int64_t k = 0; k < inputs[i].numel(); ++k) {
      const double orig = p[k];
      NoGradGuard ng;
      p[k] = orig + opts.eps;
      auto plus = fn(inputs).to_vector();
      p[k] = orig - opts.eps;
      auto minus = fn(inputs).to_vector();
      p[k] = orig;
      auto& col = numeric[i][k];
      col.resize(plus.size());
      for (std::size_t j = 0; j < plus.size(); ++j) col[j] = (plus[j] - minus[j]) / (2 * opts.eps);
    }
  }
  // Analytic vector-Jacobian products.
  Generator gen(12345);
  const bool full = n_out <= 32;
  const std::int64_t n_vec = full ? n_out : 4;
  GradcheckResult res;
  for (std::int64_t v = 0; v < n_vec; ++v) {
    std::vector<double> w(static_cast<std::size_t>(n_out), 0.0);
    if (full)
      w[v] = 1.0;
    else
      for (auto& e : w) e = gen.normal();
    for (const Tensor& t : inputs)
      if (t.requires_grad()) t.zero_grad();
    Tensor out = fn(inputs);
    if (!out.requires_grad()) {
      res.ok = false;
      res.message = "gradcheck: the output does not require grad";
      return res;
    }
    out.backward(Tensor::from_vector(w, out.shape(), out.dtype()));
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].requires_grad()) continue;
      Tensor g = inputs[i].grad();
      for (std::int64_t k = 0; k < inputs[i].numel(); ++k) {
        double num = 0;
        for (std::int64_t j = 0; j < n_out; ++j) num += w[j] * numeric[i][k][j];
        const double ana = g.defined() ? g.at(k) : 0.0;
        const double err = std::abs(ana - num);
        if (!std::isfinite(ana)) {
          res.ok = false;
          res.max_abs_error = INFINITY;
        }
        res.max_abs_error = std::max(res.max_abs_error, err);
        if (!(err <= opts.atol + opts.rtol * std::abs(num)) && res.ok) {
          res.ok = false;
          std::ostringstream os;
          os << "gradcheck: input " << i << " element " << k << (full ? " output " : " projection ") << v
             << ": analytic " << ana << " vs numeric " << num;
          res.message = os.str();
        }
      }
    }
  }
  for (const Tensor& t : inputs)
    if (t.requires_grad()) t.zero_grad();
  return res;
}

GradcheckResult gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                              const std::vector<Tensor>& inputs, const GradcheckOptions& opts) {
  std::vector<std::size_t> diff;  // the inputs that require grad
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    if (inputs[i].dtype() != Dtype::Float64)
      throw std::invalid_argument(std::string("gradgradcheck: inputs that require grad must be float64, got ") +
                                  dtype_name(inputs[i].dtype()));
    diff.push_back(i);
  }
  if (diff.empty()) throw std::invalid_argument("gradgradcheck: no input requires grad");
  Tensor out0;
  {
    NoGradGuard ng;
    out0 = fn(inputs);
  }
  Generator gen(12345);
  std::vector<double> u(static_cast<std::size_t>(out0.numel()));
  for (auto& e : u) e = gen.normal();
  Tensor grad_output = Tensor::from_vector(u, out0.shape(), Dtype::Float64);
  grad_output.requires_grad_();
  std::vector<Tensor> all = inputs;
  all.push_back(grad_output);
  // (x, u) ↦ the first-order gradients, flattened and concatenated (zeros where unused).
  auto vjp = [&](const std::vector<Tensor>& xs) {
    const EnableGradGuard eg;  // gradcheck evaluates under NoGradGuard: the first order still needs its graph
    const std::vector<Tensor> x(xs.begin(), xs.end() - 1);
    Tensor y = fn(x);
    if (!y.requires_grad()) throw std::invalid_argument("gradgradcheck: the output does not require grad");
    std::vector<Tensor> wrt;
    for (std::size_t i : diff) wrt.push_back(x[i]);
    autograd::GradOptions o;
    o.create_graph = true;
    o.allow_unused = true;
    auto gs = autograd::grad({y}, wrt, {xs.back()}, o);
    std::vector<Tensor> flat;
    for (std::size_t k = 0; k < gs.size(); ++k)
      flat.push_back(reshape(gs[k].defined() ? gs[k] : Tensor::zeros(wrt[k].shape(), Dtype::Float64), {-1}));
    return cat(flat, 0);
  };
  GradcheckResult r = gradcheck(vjp, all, opts);
  if (!r.ok) r.message = "gradgradcheck: " + r.message;
  return r;
}

}  // namespace tapegrad
