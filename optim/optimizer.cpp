#include <tapegrad/optim/optimizer.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <set>

#include <tapegrad/optim/step_hooks.h>

namespace tapegrad::optim {

namespace {

std::string join(const std::vector<std::string>& v, const char* sep = "; ") {
  std::string r;
  for (std::size_t i = 0; i < v.size(); ++i) r += (i ? sep : "") + v[i];
  return r;
}

// "12.rest" -> (12, "rest"); nullopt unless it starts with digits and a dot.
std::optional<std::pair<std::size_t, std::string>> split_index(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size() && i < 12 && s[i] >= '0' && s[i] <= '9') ++i;
  if (i == 0 || i >= s.size() || s[i] != '.') return std::nullopt;
  return std::make_pair(static_cast<std::size_t>(std::stoull(s.substr(0, i))), s.substr(i + 1));
}

std::string describe(const Tensor& t) {
  return t.defined() ? shape_str(t.shape()) + " " + dtype_name(t.dtype()) : std::string("an undefined tensor");
}

}  // namespace

std::string detail::num(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

void Optimizer::zero_grad(bool set_to_none) {
  for (std::size_t g = 0; g < num_param_groups(); ++g)
    for (auto& p : group_params(g)) p.zero_grad(set_to_none);
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (std::size_t g = 0; g < num_param_groups(); ++g)
    for (auto& p : group_params(g)) out.push_back(p);
  return out;
}

void Optimizer::check_params(const std::vector<Tensor>& params) const {
  std::set<const void*> seen;
  for (auto& p : parameters()) seen.insert(p.impl().get());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    const std::string which = type_name() + ": parameter " + std::to_string(i) + " of the new group";
    if (!p.defined()) throw std::invalid_argument(which + " is undefined");
    if (!is_floating(p.dtype()))
      throw std::invalid_argument(which + " has dtype " + dtype_name(p.dtype()) +
                                  "; expected float32 or float64 (int64 tensors are buffers, not parameters)");
    if (!p.is_leaf()) throw std::invalid_argument(which + " is not a leaf tensor (it was produced by an op)");
    if (!seen.insert(p.impl().get()).second)
      throw std::invalid_argument(which + " appears in more than one parameter group (or twice in one)");
  }
}

void Optimizer::run_step_hooks() const {
  if (hooks::any_step_hooks()) hooks::run_step_hooks(parameters());
}

void Optimizer::check_grad(const Tensor& p, const Tensor& g, std::size_t i) const {
  if (g.shape() != p.shape() || g.dtype() != p.dtype())
    throw std::invalid_argument(type_name() + "::step: parameter " + std::to_string(i) + " is " + describe(p) +
                                " but its grad is " + describe(g));
}

std::map<std::string, Tensor>& Optimizer::state(std::size_t i) { return state_.at(i); }

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  for (std::size_t i = 0; i < state_.size(); ++i)
    for (auto& [name, t] : state_[i]) out.insert("state." + std::to_string(i) + "." + name, t.clone());
  std::int64_t index = 0;
  for (std::size_t g = 0; g < num_param_groups(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    for (auto& [name, v] : group_options(g)) out.insert(prefix + name, Tensor::scalar(v, Dtype::Float64));
    std::vector<std::int64_t> ids;
    for (std::size_t k = 0; k < group_params(g).size(); ++k) ids.push_back(index++);
    out.insert(prefix + "params", Tensor::from_int64(ids, {static_cast<std::int64_t>(ids.size())}));
  }
  return out;
}

namespace {
// What is wrong with a state tensor's values ("" if nothing): a step count below 0 (the
// bias corrections would divide by 1 - β^t <= 0), a non-finite moment, a negative second
// moment (its square root is NaN); a step count above 2^53, which a double (the bias
// corrections' exponent) no longer counts exactly and whose next ++ may overflow.
std::string check_state_values(const Tensor& t, bool is_step, bool nonnegative) {
  if (is_step) {
    const std::int64_t v = t.data<std::int64_t>()[0];
    constexpr std::int64_t kMaxStep = std::int64_t{1} << 53;
    return v >= 0 && v <= kMaxStep ? ""
                                   : "expected a step count >= 0 and <= " + std::to_string(kMaxStep) + ", got " +
                                         std::to_string(v);
  }
  const std::vector<double> v = t.to_vector();
  for (std::size_t k = 0; k < v.size(); ++k) {
    if (!std::isfinite(v[k]))
      return "expected finite values, got " + detail::num(v[k]) + " at index " + std::to_string(k);
    if (nonnegative && v[k] < 0)
      return "expected values >= 0 (a second moment), got " + detail::num(v[k]) + " at index " + std::to_string(k);
  }
  return "";
}
}  // namespace

void Optimizer::follow_dtype(const Tensor& p, ParamState& st) {
  for (auto& [name, t] : st)
    if (is_floating(t.dtype()) && t.dtype() != p.dtype()) t = t.to(p.dtype());
}

void Optimizer::load_state_dict(const OptimizerState& dict) {
  const std::vector<Tensor> params = parameters();
  const auto names = state_names();
  const std::size_t groups = num_param_groups();
  std::vector<std::string> problems;
  std::vector<std::map<std::string, Tensor>> new_state(params.size());
  std::vector<std::map<std::string, double>> new_options(groups);
  std::vector<bool> have_params(groups, false);
  const auto nonneg_names = nonnegative_state_names();
  const std::set<std::string> nonneg(nonneg_names.begin(), nonneg_names.end());

  for (auto& [key, t] : dict) {
    if (key.rfind("state.", 0) == 0) {
      auto idx = split_index(key.substr(6));
      if (!idx) {
        problems.push_back("unexpected key '" + key + "'");
        continue;
      }
      auto [i, name] = *idx;
      if (i >= params.size()) {
        problems.push_back("'" + key + "': parameter " + std::to_string(i) + " does not exist (the optimizer has " +
                           std::to_string(params.size()) + ")");
        continue;
      }
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        problems.push_back("'" + key + "': " + type_name() + " has no state named '" + name + "'");
        continue;
      }
      const bool is_step = name == "step";
      const bool ok = t.defined() && (is_step ? t.dtype() == Dtype::Int64 && t.numel() == 1
                                              : t.shape() == params[i].shape() && t.dtype() == params[i].dtype());
      if (!ok) {
        problems.push_back("'" + key + "': expected " +
                           (is_step ? std::string("an int64 scalar") : describe(params[i])) + ", got " + describe(t));
        continue;
      }
      if (const std::string bad = check_state_values(t, is_step, nonneg.count(name) > 0); !bad.empty()) {
        problems.push_back("'" + key + "': " + bad);
        continue;
      }
      new_state[i][name] = is_step ? Tensor::from_int64({t.data<std::int64_t>()[0]}, {}) : t.clone();
    } else if (key.rfind("param_groups.", 0) == 0) {
      auto idx = split_index(key.substr(13));
      if (!idx || idx->first >= groups) {
        problems.push_back("unexpected key '" + key + "' (the optimizer has " + std::to_string(groups) + " groups)");
        continue;
      }
      auto [g, name] = *idx;
      if (name == "params") {
        have_params[g] = true;
        std::int64_t first = 0;
        for (std::size_t k = 0; k < g; ++k) first += static_cast<std::int64_t>(group_params(k).size());
        std::vector<double> want;
        for (std::size_t k = 0; k < group_params(g).size(); ++k) want.push_back(static_cast<double>(first) + k);
        if (!t.defined() || t.dtype() != Dtype::Int64 || t.dim() != 1 || t.to_vector() != want)
          problems.push_back("'" + key + "': group " + std::to_string(g) + " holds " +
                             std::to_string(group_params(g).size()) + " parameters starting at index " +
                             std::to_string(first) + ", the state dict says " +
                             (t.defined() ? t.to_string() : std::string("nothing")));
        continue;
      }
      bool known = false;
      for (auto& [n, v] : group_options(g)) known = known || n == name;
      if (!known) {
        problems.push_back("'" + key + "': " + type_name() + " has no option named '" + name + "'");
        continue;
      }
      if (!t.defined() || !is_floating(t.dtype()) || t.numel() != 1) {
        problems.push_back("'" + key + "': expected a float scalar, got " + describe(t));
        continue;
      }
      new_options[g][name] = t.item();
    } else {
      problems.push_back("unexpected key '" + key + "'");
    }
  }
  for (std::size_t g = 0; g < groups; ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    if (!have_params[g]) problems.push_back("missing key '" + prefix + "params'");
    for (auto& [n, v] : group_options(g))
      if (!new_options[g].count(n)) problems.push_back("missing key '" + prefix + n + "'");
    const std::string bad = check_group_options(g, new_options[g]);
    if (!bad.empty()) problems.push_back("group " + std::to_string(g) + ": " + bad);
  }
  if (!problems.empty())
    throw std::invalid_argument(type_name() + "::load_state_dict: nothing was loaded. " + join(problems));

  state_ = std::move(new_state);
  for (std::size_t g = 0; g < groups; ++g) set_group_options(g, new_options[g]);
}

void Optimizer::save_to(Archive& archive, const std::string& prefix) const {
  for (const auto& [k, v] : state_dict()) archive.write(prefix + k, v);
}

void Optimizer::load_from(const Archive& archive, const std::string& prefix) {
  load_state_dict(layers::state_dict_under(archive, prefix));
}

}  // namespace tapegrad::optim
