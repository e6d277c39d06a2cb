#include <tapegrad/layers/module.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>

#include <tapegrad/core/autograd.h>
#include <tapegrad/layers/hooks.h>
#include <tapegrad/layers/norm_load_check.h>
#include <tapegrad/layers/state_dict_keys.h>

namespace tapegrad::layers {

namespace {
thread_local int t_container_depth = 0;

// Throws `msg` as an exception of e's exact standard type; returns false for other types.
bool throw_same_type(const std::exception& e, const std::string& msg) {
  const std::type_info& t = typeid(e);
  if (t == typeid(std::invalid_argument)) throw std::invalid_argument(msg);
  if (t == typeid(std::out_of_range)) throw std::out_of_range(msg);
  if (t == typeid(std::length_error)) throw std::length_error(msg);
  if (t == typeid(std::domain_error)) throw std::domain_error(msg);
  if (t == typeid(std::logic_error)) throw std::logic_error(msg);
  if (t == typeid(std::range_error)) throw std::range_error(msg);
  if (t == typeid(std::overflow_error)) throw std::overflow_error(msg);
  if (t == typeid(std::underflow_error)) throw std::underflow_error(msg);
  if (t == typeid(std::runtime_error)) throw std::runtime_error(msg);
  return false;
}
constexpr const char* kInModule = "in module '";

// The tensors of (name, tensor) pairs, in order.
std::vector<Tensor> tensors_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<Tensor> out;
  for (auto& [n, t] : named) out.push_back(t);
  return out;
}
}  // namespace

Tensor call_child(Module& child, const std::string& name, const Tensor& input) {
  try {
    return child(input);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const std::string tag = kInModule;
    const std::string msg = what.rfind(tag, 0) == 0 ? tag + name + "." + what.substr(tag.size())
                                                    : tag + name + "' (" + child.type_name() + "): " + what;
    if (!throw_same_type(e, msg)) throw;
  }
  throw std::logic_error("call_child: unreachable");
}

ContainerForwardScope::ContainerForwardScope() : outermost_(t_container_depth == 0) { ++t_container_depth; }
ContainerForwardScope::~ContainerForwardScope() { --t_container_depth; }

void ContainerForwardScope::rethrow(const std::exception& e, const Tensor& input) const {
  const std::string what = e.what();
  if (outermost_ && input.defined() && what.rfind(kInModule, 0) == 0)
    throw_same_type(e, what + " (model input: " + shape_str(input.shape()) + ")");
  throw;
}

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

std::vector<Tensor> Module::parameters(bool recurse) const { return tensors_of(named_parameters(recurse)); }

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", recurse, false, out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const { return tensors_of(named_buffers(recurse)); }

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
}  // namespace

std::string LoadResult::report() const {
  std::string out = "loaded " + std::to_string(loaded) + " tensor" + (loaded == 1 ? "" : "s");
  for (auto& c : converted) out += "\n  converted " + c;
  for (auto& c : key_changes) out += "\n  " + c;
  for (auto& f : filled) out += "\n  filled " + f;
  for (auto& k : missing_keys) out += "\n  missing " + k;
  for (auto& k : unexpected_keys) out += "\n  unexpected " + k;
  for (auto& m : mismatched) out += "\n  mismatched " + m;
  if (!structure.empty()) out += "\n  key structure: " + structure;
  return out;
}

namespace {
std::string value_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

template <class T>
std::string first_non_finite(const T* p, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i]))
      return "expected finite values, got " + value_text(static_cast<double>(p[i])) + " at index " + std::to_string(i);
  return "";
}
}  // namespace

std::string Module::check_state_value(const std::string&, const Tensor& value) const {
  if (!value.defined()) return "";
  const Tensor& c = value;
  if (c.dtype() == Dtype::Float32) return first_non_finite(c.data<float>(), c.numel());
  if (c.dtype() == Dtype::Float64) return first_non_finite(c.data<double>(), c.numel());
  return "";
}

void Module::upgrade_state_dict(const std::string&, const StateDict&, StateDict&, std::vector<std::string>&) const {}

StateDict apply_key_changes(StateDict dict, const LoadOptions& options, std::vector<std::string>* key_changes) {
  for (const auto& prefix : options.strip_prefixes) {
    std::size_t n = 0;
    for (auto& [k, t] : dict) n += k.size() > prefix.size() && k.compare(0, prefix.size(), prefix) == 0;
    dict = strip_prefix(dict, prefix);
    if (key_changes)
      key_changes->push_back("stripped '" + prefix + "' from " + std::to_string(n) + " key" + (n == 1 ? "" : "s"));
  }
  if (!options.renames.empty()) {
    dict = rename_keys(dict, options.renames);
    if (key_changes)
      for (const auto& rn : options.renames) key_changes->push_back("renamed " + rn.from + " -> " + rn.to);
  }
  return dict;
}

void Module::save_to(Archive& archive, const std::string& prefix, bool include_buffers) const {
  std::unordered_set<std::string> params;
  if (!include_buffers)
    for (auto& [k, p] : named_parameters()) params.insert(k);
  for (const auto& [k, t] : state_dict())
    if (include_buffers || params.count(k)) archive.write(prefix + k, t);
}

LoadResult Module::load_from(const Archive& archive, const LoadOptions& options, const std::string& prefix) {
  std::vector<std::string> changes;
  const StateDict dict = apply_key_changes(state_dict_under(archive, prefix), options, &changes);
  LoadResult res = load_state_dict(dict, options);
  res.key_changes = std::move(changes);
  return res;
}

LoadResult Module::load_state_dict(const StateDict& dict, bool strict) {
  return load_state_dict(dict, LoadOptions{strict, true});
}

LoadResult Module::load_state_dict(const StateDict& dict, const LoadOptions& options) {
  const bool strict = options.strict;
  LoadResult res;
  StateDict own = state_dict();
  struct Write {
    std::string key;
    Tensor dst, src;
  };
  std::vector<Write> writes;
  StateDict added;  // what the layers derive for keys older checkpoints lack
  for (auto& [path, m] : named_modules()) m->upgrade_state_dict(path.empty() ? "" : path + ".", dict, added, res.filled);
  for (auto& [key, dst] : own) {
    const Tensor* src = dict.find(key);
    if (!src) src = added.find(key);
    if (!src) {
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
    writes.push_back({key, dst, *src});
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
  if (options.check_values) {
    // Who owns each key: the module whose check_state_value judges it.
    std::unordered_map<std::string, std::pair<const Module*, std::string>> owner;
    for (auto& [path, m] : named_modules()) {
      const std::string prefix = path.empty() ? "" : path + ".";
      for (auto& [n, t] : m->params_) owner.emplace(prefix + n, std::make_pair(m, n));
      for (auto& [n, t] : m->buffers_) owner.emplace(prefix + n, std::make_pair(m, n));
    }
    std::vector<std::string> bad;
    for (auto& w : writes) {
      const auto it = owner.find(w.key);
      if (it == owner.end()) continue;
      const std::string why = it->second.first->check_state_value(it->second.second, w.src);
      const std::string& key = w.key;
      if (!why.empty()) bad.push_back(key + ": " + why);
    }
    if (!bad.empty())
      throw std::invalid_argument("load_state_dict: nothing was loaded. Impossible values: " + join(bad) +
                                  ". (LoadOptions::check_values = false loads them anyway, e.g. to study a broken "
                                  "checkpoint)");
  }
  if (!strict) check_norm_buffers_loaded(*this, res.missing_keys);  // before any write (it may throw)
  NoGradGuard ng;
  for (auto& w : writes) Tensor(w.dst).copy_(w.src);
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

void Module::check_input_dtype(const Tensor& x, const Tensor& state) const {
  if (state.defined() && x.dtype() != state.dtype())
    throw std::invalid_argument(type_name() + ": input dtype " + dtype_name(x.dtype()) + " does not match the module's " +
                                dtype_name(state.dtype()) + " (convert with .to() or Module::to())");
}

ModeRestore::ModeRestore(Module& model) {
  for (auto& [name, mod] : model.named_modules()) modes_.emplace_back(mod, mod->is_training());
}

}  // namespace tapegrad::layers
