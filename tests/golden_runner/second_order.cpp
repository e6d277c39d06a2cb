#include "golden_runner/second_order.h"

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/layers/losses.h>

namespace golden {
namespace {

using namespace tapegrad;

void check(Outcome& o, const std::string& where, const std::string& msg) {
  if (!msg.empty()) o.failures.push_back(where + ": " + msg);
}

layers::StateDict state_from_json(const json& j, Dtype dtype) {
  layers::StateDict sd;
  for (auto& [k, v] : j.items()) sd.insert(k, tensor_from_json(v, dtype));
  return sd;
}

// Every key of `expect` against the module's state_dict (a key the module lacks fails).
void compare_state(Outcome& o, const std::string& w, const layers::Module& m, const json& expect, Dtype dtype,
                   const Tolerance& tol) {
  const auto sd = m.state_dict();
  for (auto& [k, v] : expect.items()) {
    const Tensor* t = sd.find(k);
    check(o, w, compare("state_after " + k, t ? *t : Tensor(), tensor_from_json(v, dtype), tol));
  }
}

// Every key of `expect` against `got` (a key with no computed tensor fails, naming it).
void compare_map(Outcome& o, const std::string& w, const std::string& what, const std::map<std::string, Tensor>& got,
                 const json& expect, Dtype dtype, const Tolerance& tol) {
  for (auto& [k, v] : expect.items()) {
    auto it = got.find(k);
    if (it == got.end()) {
      check(o, w, what + " " + k + ": no such input or parameter");
      continue;
    }
    check(o, w, compare(what + " " + k, it->second, tensor_from_json(v, dtype), tol));
  }
}

// The gradient `g` of an input the differentiated value does not reach is undefined
// (allow_unused): zeros of the input's shape, as the README states PyTorch's None.
Tensor or_zeros(const Tensor& g, const Tensor& input) {
  return g.defined() ? g : Tensor::zeros(input.shape(), input.dtype());
}

// Σ_k sum(a[k]·v[k]) over the keys of v; throws naming a key of v that `a` lacks.
Tensor weighted_sum(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& v,
                    const std::string& what) {
  Tensor s;
  for (auto& [k, vk] : v) {
    auto it = a.find(k);
    if (it == a.end()) throw std::invalid_argument("v names '" + k + "', which is not one of the " + what);
    Tensor term = sum(mul(it->second, vk));
    s = s.defined() ? add(s, term) : term;
  }
  if (!s.defined()) throw std::invalid_argument("v is empty");
  return s;
}

std::map<std::string, Tensor> tensors_from_json(const json& j, Dtype dtype) {
  std::map<std::string, Tensor> r;
  for (auto& [k, v] : j.items()) r[k] = tensor_from_json(v, dtype);
  return r;
}

// The Sequential of a "model" list; an unknown layer type fails the case, naming it.
// A module's parameters and their names, in named_parameters()'s order.
std::pair<std::vector<std::string>, std::vector<Tensor>> parameters_by_name(const layers::Module& m) {
  std::pair<std::vector<std::string>, std::vector<Tensor>> out;
  for (auto& [k, p] : m.named_parameters()) {
    out.first.push_back(k);
    out.second.push_back(p);
  }
  return out;
}

layers::ModulePtr build_model(Outcome& o, const std::string& where, const json& c, Dtype dtype) {
  std::string missing;
  auto model = build_sequential(c.at("model"), dtype, &missing);
  if (!model) o.failures.push_back(where + ": no factory for module type '" + missing + "'");
  return model;
}

void run_double_backward(Outcome& o, const std::string& where, const json& c, Dtype dtype, const Tolerance& tol) {
  const std::string type = c.at("module").at("type");
  const json& args = c.at("module").at("args");
  // A loss is a module of (input, target); any other type is a layer of its input.
  LossFn loss;
  layers::ModulePtr m;
  if (auto lit = loss_factories().find(type); lit != loss_factories().end()) {
    loss = lit->second(args);
  } else if (auto mit = module_factories().find(type); mit != module_factories().end()) {
    m = mit->second(args, dtype);
  } else {
    o.failures.push_back(where + ": no factory for module type '" + type + "'");
    return;
  }
  const json& state = c.value("initial_state", json::object());
  if (!state.empty()) {
    if (!m) throw std::invalid_argument("initial_state given for the loss '" + type + "'");
    m->load_state_dict(state_from_json(state, dtype), true);
  }
  if (m) m->train(c.at("mode") == "train");

  Tensor x = tensor_from_json(c.at("input"), dtype);
  x.requires_grad_();
  Tensor y;
  if (loss) {
    if (!c.contains("target")) throw std::invalid_argument("the loss '" + type + "' needs a target");
    y = loss(x, tensor_from_json(c.at("target"), dtype));
  } else {
    y = m->forward(x);
  }

  // Differentiable inputs in one order: the input, the parameters, then (second pass only)
  // the grad_output.
  std::vector<std::string> names{"input"};
  std::vector<Tensor> inputs{x};
  if (m)
    for (auto& [k, p] : m->named_parameters()) {
      names.push_back(k);
      inputs.push_back(p);
    }
  Tensor go = tensor_from_json(c.at("grad_output"), dtype);
  go.requires_grad_();

  // first = dL/d(input, params) with L = sum(y·grad_output), kept differentiable
  const auto first_v = autograd::grad({y}, inputs, {go}, {.create_graph = true});
  std::map<std::string, Tensor> first;
  for (std::size_t i = 0; i < names.size(); ++i) first[names[i]] = first_v[i];
  const json& expected = c.at("expected");
  compare_map(o, where, "first", first, expected.at("first"), dtype, tol);

  // second = dS/d(input, params, grad_output) with S = Σ_k sum(first[k]·v[k])
  const Tensor s = weighted_sum(first, tensors_from_json(c.at("v"), dtype), "first-order gradients");
  names.push_back("grad_output");
  inputs.push_back(go);
  const auto second_v = autograd::grad({s}, inputs, {}, {.allow_unused = true});
  std::map<std::string, Tensor> second;
  for (std::size_t i = 0; i < names.size(); ++i) second[names[i]] = or_zeros(second_v[i], inputs[i]);
  compare_map(o, where, "second", second, expected.at("second"), dtype, tol);

  if (expected.contains("state_after")) {
    if (m) compare_state(o, where, *m, expected.at("state_after"), dtype, tol);
    else if (!expected.at("state_after").empty()) check(o, where, "state_after given for the loss '" + type + "'");
  }
}

void run_hvp(Outcome& o, const std::string& where, const json& c, Dtype dtype, const Tolerance& tol) {
  auto model = build_model(o, where, c, dtype);
  if (!model) return;
  model->load_state_dict(state_from_json(c.at("initial_state"), dtype), true);
  model->train(c.at("mode") == "train");
  const std::string kind = c.at("loss");
  const Tensor out = model->forward(tensor_from_json(c.at("input"), dtype));
  const Tensor target = tensor_from_json(c.at("target"), dtype);
  Tensor loss;
  if (kind == "cross_entropy") loss = layers::cross_entropy(out, target, layers::Reduction::Mean);
  else if (kind == "mse") loss = layers::mse_loss(out, target, layers::Reduction::Mean);
  else {
    o.failures.push_back(where + ": unknown loss '" + kind + "' (expected cross_entropy or mse)");
    return;
  }
  const json& expected = c.at("expected");
  check(o, where, compare("loss", loss, tensor_from_json(expected.at("loss"), dtype), tol));

  const auto [names, params] = parameters_by_name(*model);
  // v in the parameters' order; a parameter v leaves out, or a key of v that is no
  // parameter, is an error in the case rather than a silent zero
  const auto v_in = tensors_from_json(c.at("v"), dtype);
  std::vector<Tensor> v;
  for (auto& k : names) {
    auto it = v_in.find(k);
    if (it == v_in.end()) throw std::invalid_argument("v has no entry for the parameter '" + k + "'");
    v.push_back(it->second);
  }
  if (v_in.size() != names.size()) throw std::invalid_argument("v names a key that is not a parameter");

  const autograd::HessianOperator h(loss, params);
  const std::vector<Tensor> hv = h(v);
  std::map<std::string, Tensor> grad, hvp;
  for (std::size_t i = 0; i < names.size(); ++i) {
    grad[names[i]] = h.gradient()[i];
    hvp[names[i]] = hv[i];
  }
  compare_map(o, where, "grad", grad, expected.at("grad"), dtype, tol);
  compare_map(o, where, "hvp", hvp, expected.at("hvp"), dtype, tol);
  // the one-off form agrees with the operator (same graph, same arithmetic)
  const std::vector<Tensor> hv1 = autograd::hessian_vector_product(loss, params, v);
  for (std::size_t i = 0; i < names.size(); ++i)
    check(o, where, compare("hessian_vector_product " + names[i], hv1[i], hv[i], tol));
  if (expected.contains("state_after")) compare_state(o, where, *model, expected.at("state_after"), dtype, tol);
}

void run_gradient_penalty(Outcome& o, const std::string& where, const json& c, Dtype dtype, const Tolerance& tol) {
  auto model = build_model(o, where, c, dtype);
  if (!model) return;
  model->load_state_dict(state_from_json(c.at("initial_state"), dtype), true);
  model->train(c.at("mode") == "train");
  Tensor x = tensor_from_json(c.at("input"), dtype);
  x.requires_grad_();
  if (x.dim() != 2) throw std::invalid_argument("gradient_penalty: expected an input (N, D), got " + shape_str(x.shape()));
  const Tensor out = model->forward(x);
  // g = d sum(model(x)) / dx, kept differentiable; penalty = mean_n (||g_n||_2 - 1)²
  const Tensor g = autograd::grad({sum(out)}, {x}, {}, {.create_graph = true})[0];
  const Tensor norms = tapegrad::sqrt(sum(square(g), {1}));
  const Tensor penalty = mean(square(add(norms, -1.0)));
  const json& expected = c.at("expected");
  check(o, where, compare("penalty", penalty, tensor_from_json(expected.at("penalty"), dtype), tol));

  const auto [names, params] = parameters_by_name(*model);
  const auto gp = autograd::grad({penalty}, params, {}, {.allow_unused = true});
  std::map<std::string, Tensor> grad;
  for (std::size_t i = 0; i < names.size(); ++i) grad[names[i]] = or_zeros(gp[i], params[i]);
  compare_map(o, where, "grad", grad, expected.at("grad"), dtype, tol);
  if (expected.contains("state_after")) compare_state(o, where, *model, expected.at("state_after"), dtype, tol);
}

}  // namespace

bool is_second_order_kind(const std::string& kind) {
  return kind == "double_backward" || kind == "hvp" || kind == "gradient_penalty";
}

void run_second_order_case(Outcome& o, const std::string& where, const json& c, Dtype dtype, const Tolerance& tol) {
  const std::string kind = c.at("kind");
  if (kind == "double_backward") run_double_backward(o, where, c, dtype, tol);
  else if (kind == "hvp") run_hvp(o, where, c, dtype, tol);
  else if (kind == "gradient_penalty") run_gradient_penalty(o, where, c, dtype, tol);
  else throw std::invalid_argument("not a second-order kind: '" + kind + "'");
}

}  // namespace golden
