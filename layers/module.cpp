#include <tapegrad/layers/module.h>

#include <algorithm>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/layers/hooks.h>
#include <tapegrad/layers/state_dict_keys.h>

namespace tapegrad::layers {

Tensor Module::operator()(const Tensor& input) {
  Tensor out;
  if (anomaly_mode_enabled()) {
    RecordSiteGuard site(type_name());
    out = forward(input);
  } else {
    out = forward(input);
  }
  if (hooks::any_forward_hooks()) hooks::run_forward_hooks(*this, input, out);
  return out;
}

void Module::train(bool mode) {
  const bool changed = training_ != mode;
  training_ = mode;
  if (changed) on_mode_change();
  for (auto& [name, child] : children_) child->train(mode);
}

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  if (!value.defined()) throw std::invalid_argument("register_parameter: '" + name + "' is undefined");
  if (!value.requires_grad()) value.requires_grad_(true);
  params_.emplace_back(name, value);
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value, bool persistent) {
  if (!value.defined()) throw std::invalid_argument("register_buffer: '" + name + "' is undefined");
  buffers_.emplace_back(name, value);
  if (!persistent) non_persistent_.push_back(name);
  return value;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  if (!child) throw std::invalid_argument("register_module: '" + name + "' is null");
  for (auto& c : children_)
    if (c.first == name) throw std::invalid_argument("register_module: a child named '" + name + "' exists");
  children_.emplace_back(name, std::move(child));
}

void Module::replace_child(const std::string& name, std::shared_ptr<Module> child) {
  if (!child) throw std::invalid_argument("replace_child: the new module for '" + name + "' is null");
  for (auto& c : children_)
    if (c.first == name) {
      c.second = std::move(child);
      return;
    }
  throw std::invalid_argument("replace_child: no child named '" + name + "' in " + type_name());
}

void Module::collect(const std::string& prefix, bool recurse, bool params,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  for (auto& [n, t] : params ? params_ : buffers_) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (auto& [n, c] : children_) c->collect(prefix + n + ".", true, params, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", recurse, true, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", recurse, false, out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (auto& [n, c] : children_)
    for (auto& [sub, m] : c->named_modules()) out.emplace_back(sub.empty() ? n : n + "." + sub, m);
  return out;
}

void Module::zero_grad(bool set_to_none) {
  for (auto& p : parameters()) p.zero_grad(set_to_none);
}

void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (auto& [n, t] : params_) out.insert(prefix + n, t);
  for (auto& [n, t] : buffers_)
    if (std::find(non_persistent_.begin(), non_persistent_.end(), n) == non_persistent_.end())
      out.insert(prefix + n, t);
  for (auto& [n, c] : children_) c->collect_state(prefix + n + ".", out);
}

StateDict Module::state_dict() const {
  StateDict d;
  collect_state("", d);
  return d;
}

namespace {
std::string join(const std::vector<std::string>& v) {
  std::string r;
  for (std::size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + v[i];
  return r;
}
}  // namespace

namespace {
// At most `limit` names, then "... (N in all)".
std::string join_cut(const std::vector<std::string>& v, std::size_t limit) {
  if (v.size() <= limit) return join(v);
  return join(std::vector<std::string>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(limit))) + ", ... (" +
         std::to_string(v.size()) + " in all)";
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::string LoadResult::report() const {
  std::string out = "loaded " + std::to_string(loaded) + " tensor" + (loaded == 1 ? "" : "s");
  for (auto& c : converted) out += "\n  converted " + c;
  for (auto& f : filled) out += "\n  filled " + f;
  for (auto& k : missing_keys) out += "\n  missing " + k;
  for (auto& k : unexpected_keys) out += "\n  unexpected " + k;
  for (auto& m : mismatched) out += "\n  mismatched " + m;
  if (!structure.empty()) out += "\n  key structure: " + structure;
  return out;
}

LoadResult Module::load_state_dict(const StateDict& dict, bool strict) {
  LoadResult res;
  StateDict own = state_dict();
  std::vector<std::pair<Tensor, Tensor>> writes;  // (destination, source)
  for (auto& [key, dst] : own) {
    const Tensor* src = dict.find(key);
    if (!src) {
      // PyTorch's _NormBase._load_from_state_dict: a checkpoint from before num_batches_tracked
      // existed holds running_mean and running_var only; the counter starts again at 0.
      static const std::string kCounter = "num_batches_tracked";
      if (key == kCounter || ends_with(key, "." + kCounter)) {
        const std::string prefix = key.substr(0, key.size() - kCounter.size());
        if (dict.contains(prefix + "running_mean") && dict.contains(prefix + "running_var")) {
          writes.emplace_back(dst, Tensor::zeros(dst.shape(), dst.dtype()));
          res.filled.push_back(key + " = 0 (absent from the state dict, which has " + prefix + "running_mean and " +
                               prefix + "running_var: a checkpoint from before PyTorch 0.4.1)");
          continue;
        }
      }
      res.missing_keys.push_back(key);
      continue;
    }
    const bool shape_ok = src->defined() && src->shape() == dst.shape();
    if (!shape_ok || src->dtype() != dst.dtype()) {
      const bool kinds_ok = src->defined() && is_floating(src->dtype()) == is_floating(dst.dtype());
      if (!shape_ok || !kinds_ok) {
        res.mismatched.push_back(key + ": expected " + shape_str(dst.shape()) + " " + dtype_name(dst.dtype()) +
                                 ", got " +
                                 (src->defined() ? shape_str(src->shape()) + " " + dtype_name(src->dtype())
                                                 : std::string("an undefined tensor")));
        continue;
      }
      res.converted.push_back(key + ": " + dtype_name(src->dtype()) + " -> " + dtype_name(dst.dtype()));
    }
    writes.emplace_back(dst, *src);
  }
  for (auto& [key, t] : dict)
    if (!own.contains(key)) res.unexpected_keys.push_back(key);
  if (!res.missing_keys.empty() || !res.unexpected_keys.empty())
    res.structure = describe_key_structure(dict.keys(), own.keys());
  if (strict && !res.ok()) {
    // With a structural summary the lists are cut: the summary says what the keys look like.
    const std::size_t limit = res.structure.empty() ? res.missing_keys.size() + res.unexpected_keys.size() : 8;
    std::string msg = "load_state_dict (strict): nothing was loaded.";
    if (!res.structure.empty()) msg += " Key structure: " + res.structure + ".";
    if (!res.missing_keys.empty()) msg += " Missing keys: " + join_cut(res.missing_keys, limit) + ".";
    if (!res.unexpected_keys.empty()) msg += " Unexpected keys: " + join_cut(res.unexpected_keys, limit) + ".";
    if (!res.mismatched.empty()) msg += " Mismatched: " + join(res.mismatched) + ".";
    throw std::invalid_argument(msg);
  }
  NoGradGuard ng;
  for (auto& [dst, src] : writes) Tensor(dst).copy_(src);
  res.loaded = writes.size();
  return res;
}

void Module::to(Dtype dtype) {
  NoGradGuard ng;
  if (!is_floating(dtype)) throw std::invalid_argument("Module::to: expected float32 or float64");
  for (auto& [n, t] : params_) t.set_data(t.to(dtype).detach());
  for (auto& [n, t] : buffers_)
    if (is_floating(t.dtype())) t.set_data(t.to(dtype));
  for (auto& [n, c] : children_) c->to(dtype);
}

void Module::repr_into(std::string& out, int indent) const {
  out += type_name() + "(" + extra_repr();
  if (children_.empty()) {
    out += ")";
    return;
  }
  out += "\n";
  for (auto& [n, c] : children_) {
    out += std::string(static_cast<std::size_t>(indent + 2), ' ') + "(" + n + "): ";
    c->repr_into(out, indent + 2);
    out += "\n";
  }
  out += std::string(static_cast<std::size_t>(indent), ' ') + ")";
}

std::string Module::repr() const {
  std::string s;
  repr_into(s, 0);
  return s;
}

}  // namespace tapegrad::layers
