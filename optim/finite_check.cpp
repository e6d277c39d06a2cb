#include <tapegrad/optim/finite_check.h>

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include <tapegrad/optim/step_hooks.h>
#include <tapegrad/layers/module.h>

namespace tapegrad::optim {
namespace {

struct Scan {
  std::int64_t bad = 0;
  std::int64_t first = -1;
  double first_value = 0;
};

template <class T>
Scan scan(const T* p, std::int64_t n) {
  Scan s;
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) {
      if (s.bad++ == 0) {
        s.first = i;
        s.first_value = static_cast<double>(p[i]);
      }
    }
  return s;
}

Scan scan(const Tensor& t) {
  if (t.dtype() == Dtype::Float32) return scan(t.data<float>(), t.numel());
  if (t.dtype() == Dtype::Float64) return scan(t.data<double>(), t.numel());
  return {};
}

void check_one(const std::string& name, const Tensor& t, const char* what) {
  const Scan s = scan(t);
  if (s.bad == 0) return;
  std::ostringstream os;
  os << "check_finite: " << name << " " << shape_str(t.shape()) << " " << dtype_name(t.dtype()) << " has a non-finite "
     << what << ": element " << s.first << " is " << s.first_value << " (" << s.bad << " of " << t.numel()
     << " elements are NaN or Inf); the step was not taken";
  throw std::runtime_error(os.str());
}

}  // namespace

void check_finite(const std::vector<std::pair<std::string, Tensor>>& named, bool check_grads) {
  for (const auto& [name, p] : named) {
    if (!p.defined()) continue;
    check_one(name, p, "value");
    if (!check_grads) continue;
    const Tensor g = p.grad();
    if (g.defined()) check_one(name, g, "gradient");
  }
}

void check_finite(const std::vector<Tensor>& params, bool check_grads) {
  std::vector<std::pair<std::string, Tensor>> named;
  named.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) named.emplace_back("parameter " + std::to_string(i), params[i]);
  check_finite(named, check_grads);
}

FiniteCheckGuard::FiniteCheckGuard(const layers::Module* names, bool check_grads) {
  hook_id_ = hooks::add_step_hook([names, check_grads](const std::vector<Tensor>& params) {
    std::unordered_map<const void*, std::string> by_impl;
    if (names)
      for (auto& [n, t] : names->named_parameters()) by_impl.emplace(t.impl().get(), "'" + n + "'");
    std::vector<std::pair<std::string, Tensor>> named;
    named.reserve(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      auto it = by_impl.find(params[i].defined() ? params[i].impl().get() : nullptr);
      named.emplace_back(it != by_impl.end() ? it->second : "parameter " + std::to_string(i), params[i]);
    }
    check_finite(named, check_grads);
  });
}

FiniteCheckGuard::~FiniteCheckGuard() { hooks::remove_step_hook(hook_id_); }

}  // namespace tapegrad::optim
