// autograd::grad (gradients returned instead of accumulated) and Hessian-vector products.
#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/autograd_tape.h>

namespace tapegrad::autograd {

bool creating_graph() {
  const detail::Pass* pass = detail::current_pass();
  return pass && pass->create_graph;
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& options) {
  if (outputs.empty()) throw std::invalid_argument("grad: expected at least one output, got none");
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    throw std::invalid_argument("grad: expected " + std::to_string(outputs.size()) +
                                " grad_outputs (one per output) or none, got " + std::to_string(grad_outputs.size()));
  std::vector<Tensor> seeds(outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& y = outputs[i];
    if (!y.defined()) throw std::invalid_argument("grad: output " + std::to_string(i) + " is undefined");
    if (!y.requires_grad())
      throw std::invalid_argument("grad: output " + std::to_string(i) +
                                  " does not require grad and has no grad_fn (computed under NoGradGuard, or a "
                                  "gradient taken without create_graph=true?)");
    const Tensor go = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!go.defined()) {
      if (y.numel() != 1)
        throw std::invalid_argument("grad: a grad_output can be implied only for a one-element output; output " +
                                    std::to_string(i) + " has shape " + shape_str(y.shape()));
      seeds[i] = Tensor::ones(y.shape(), y.dtype());
    } else if (go.shape() != y.shape() || go.dtype() != y.dtype()) {
      throw std::invalid_argument("grad: grad_output " + std::to_string(i) + " has shape " + shape_str(go.shape()) +
                                  " " + dtype_name(go.dtype()) + " but output " + std::to_string(i) + " has " +
                                  shape_str(y.shape()) + " " + dtype_name(y.dtype()));
    } else {
      seeds[i] = go;
    }
  }
  detail::Request request;
  request.allow_unused = options.allow_unused;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) throw std::invalid_argument("grad: input " + std::to_string(i) + " is undefined");
    if (!inputs[i].requires_grad())
      throw std::invalid_argument("grad: input " + std::to_string(i) + " does not require grad");
    request.inputs.push_back(inputs[i].impl()->autograd.get());
  }
  detail::execute(outputs.data(), seeds.data(), outputs.size(), options.retain_graph.value_or(options.create_graph), options.create_graph,
                  &request);
  // The same input asked twice gets the same gradient (collected once, under its first index).
  for (std::size_t i = 0; i < inputs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (request.inputs[j] == request.inputs[i]) {
        request.captured[i] = request.captured[j];
        break;
      }
  for (Tensor& g : request.captured)
    if (g.defined() && !options.create_graph && g.requires_grad()) g = g.detach();
  return std::move(request.captured);
}

HessianOperator::HessianOperator(const Tensor& loss, std::vector<Tensor> params) : params_(std::move(params)) {
  if (!loss.defined() || loss.numel() != 1 || !loss.requires_grad())
    throw std::invalid_argument("HessianOperator: expected a one-element loss that requires grad, got " +
                                std::string(loss.defined() ? shape_str(loss.shape()) : "an undefined tensor") +
                                (loss.defined() && !loss.requires_grad() ? " without a graph" : ""));
  if (params_.empty()) throw std::invalid_argument("HessianOperator: expected at least one parameter, got none");
  GradOptions opts;
  opts.create_graph = true;
  opts.retain_graph = true;
  opts.allow_unused = true;
  std::vector<Tensor> g = grad({loss}, params_, {}, opts);
  gradient_.resize(params_.size());
  for (std::size_t k = 0; k < params_.size(); ++k) {
    if (g[k].defined() && g[k].requires_grad()) {
      graph_grads_.push_back(g[k]);
      graph_index_.push_back(k);
    }
    gradient_[k] = g[k].defined() ? g[k].detach() : Tensor::zeros(params_[k].shape(), params_[k].dtype());
  }
}

std::vector<Tensor> HessianOperator::operator()(const std::vector<Tensor>& v) const {
  if (v.size() != params_.size())
    throw std::invalid_argument("HessianOperator: expected " + std::to_string(params_.size()) +
                                " vectors (one per parameter), got " + std::to_string(v.size()));
  for (std::size_t k = 0; k < v.size(); ++k)
    if (!v[k].defined() || v[k].shape() != params_[k].shape() || v[k].dtype() != params_[k].dtype())
      throw std::invalid_argument("HessianOperator: vector " + std::to_string(k) + " must have shape " +
                                  shape_str(params_[k].shape()) + " " + dtype_name(params_[k].dtype()) + ", got " +
                                  (v[k].defined() ? shape_str(v[k].shape()) + " " + dtype_name(v[k].dtype())
                                                  : std::string("an undefined tensor")));
  std::vector<Tensor> hv(params_.size());
  if (!graph_grads_.empty()) {
    std::vector<Tensor> seeds;
    for (std::size_t j : graph_index_) seeds.push_back(v[j].requires_grad() ? v[j].detach() : v[j]);
    GradOptions opts;
    opts.retain_graph = true;
    opts.allow_unused = true;
    hv = grad(graph_grads_, params_, seeds, opts);
  }
  for (std::size_t k = 0; k < hv.size(); ++k)
    if (!hv[k].defined()) hv[k] = Tensor::zeros(params_[k].shape(), params_[k].dtype());
  return hv;
}

std::vector<Tensor> hessian_vector_product(const Tensor& loss, const std::vector<Tensor>& params,
                                           const std::vector<Tensor>& v) {
  return HessianOperator(loss, params)(v);
}

}  // namespace tapegrad::autograd
