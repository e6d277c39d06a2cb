#pragma once
// Helpers for the [errors] tests: run a statement, require that it throws exactly the
// documented exception type, and return its message so the test can check that the
// message names the expected and the actual shape/value.
#include <exception>
#include <string>
#include <typeinfo>

#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/module.h>

namespace tapegrad::test {

/// The message of the E (exactly that type, not a subclass) thrown by f(); "NO EXCEPTION" or "WRONG TYPE <name>: <msg>" otherwise
/// (both fail every Contains() check, and Catch prints them).
template <class E, class F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    if (typeid(e) == typeid(E)) return e.what();
    return std::string("WRONG TYPE ") + typeid(e).name() + ": " + e.what();
  }
  return "NO EXCEPTION";
}

/// A float32 / float64 tensor of shape s filled with v: the inputs of the error cases.
inline Tensor f32(const Shape& s, double v = 1.0) { return Tensor::full(s, v, Dtype::Float32); }
inline Tensor f64(const Shape& s, double v = 1.0) { return Tensor::full(s, v, Dtype::Float64); }
/// f64(s, v) as a leaf that requires grad.
inline Tensor leaf64(const Shape& s, double v = 1.0) {
  Tensor t = f64(s, v);
  t.requires_grad_();
  return t;
}

/// A copy of every tensor of m's state dict, to compare "before" and "after" a refused call.
inline layers::StateDict state_snapshot(const layers::Module& m) {
  layers::StateDict out;
  for (auto& [k, t] : m.state_dict()) out.insert(k, t.clone());
  return out;
}
/// The same keys holding the same values.
inline bool same_state(const layers::StateDict& a, const layers::StateDict& b) {
  if (a.keys() != b.keys()) return false;
  for (auto& [k, t] : a)
    if (t.to_vector() != b.at(k).to_vector()) return false;
  return true;
}

}  // namespace tapegrad::test
