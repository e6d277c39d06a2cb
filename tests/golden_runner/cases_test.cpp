// The regression-case runner: replays every *.json in TAPEGRAD_CASES_DIR (default
// tests/cases), cases drawn from public bug reports about BN, LN and Dropout. Schema:
// tests/cases/README.md. Unknown module types are reported as skipped, by name.
#include <catch2/catch.hpp>

#include <cstdlib>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops.h>
#include "golden_runner/outcome.h"
#include "golden_runner/support.h"

using namespace tapegrad;
using golden::json;

namespace {

using golden::Outcome;
using golden::report;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

Tensor value_tensor(const json& v, Dtype dtype) {
  if (v.is_number_integer()) return Tensor::from_int64({v.get<std::int64_t>()}, {});
  return golden::tensor_from_nested(v, dtype);
}

bool error_matches(const std::string& msg, const json& spec) {
  const std::string m = lower(msg);
  if (spec.contains("mention_all")) {
    for (auto& s : spec["mention_all"])
      if (m.find(lower(s.get<std::string>())) == std::string::npos) return false;
    return true;
  }
  if (spec.contains("mention_any")) {
    for (auto& s : spec["mention_any"])
      if (m.find(lower(s.get<std::string>())) != std::string::npos) return true;
    return false;
  }
  return true;
}

Tensor find_named(layers::Module& m, const std::string& name) {
  for (auto& [k, t] : m.named_parameters())
    if (k == name) return t;
  for (auto& [k, t] : m.named_buffers())
    if (k == name) return t;
  return Tensor();
}

void run_case(Outcome& o, const std::string& id, const json& c, Dtype dtype) {
  const double tolv = c.value("tolerance", 1e-6) * (dtype == Dtype::Float32 ? 10.0 : 1.0);
  const golden::Tolerance tol{tolv, 0.0, true};
  const json& mc = c["module"];
  const std::string type = mc["type"];
  layers::ModulePtr m;
  if (type == "Sequential") {
    std::string missing;
    m = golden::build_sequential(mc["layers"], dtype, &missing);
    if (!m) {
      o.skips.push_back(id + ": skipped, no module type '" + missing + "' yet");
      return;
    }
  } else {
    auto it = golden::module_factories().find(type);
    if (it == golden::module_factories().end()) {
      o.skips.push_back(id + ": skipped, no module type '" + type + "' yet");
      return;
    }
    m = it->second(mc, dtype);
  }
  // `init` overrides tensors before step 1: the module's own (names as in its state_dict), the
  // case's top-level one, and, inside a Sequential, each layer config's (names relative to that
  // layer, applied to child "i").
  std::vector<std::pair<std::string, const json*>> inits;  // (name prefix, {name: value})
  if (mc.contains("init")) inits.emplace_back("", &mc["init"]);
  else if (c.contains("init")) inits.emplace_back("", &c["init"]);
  if (type == "Sequential")
    for (std::size_t i = 0; i < mc["layers"].size(); ++i)
      if (mc["layers"][i].contains("init")) inits.emplace_back(std::to_string(i) + ".", &mc["layers"][i]["init"]);
  {
    NoGradGuard ng;
    for (const auto& [prefix, init] : inits)
      for (auto& [k, v] : init->items()) {
        Tensor t = find_named(*m, prefix + k);
        if (!t.defined()) {
          o.failures.push_back(id + ": init names unknown tensor '" + prefix + k + "'");
          return;
        }
        t.copy_(value_tensor(v, dtype));
      }
  }
  auto fail = [&](std::size_t i, const std::string& msg) {
    if (!msg.empty()) o.failures.push_back(id + " step " + std::to_string(i) + ": " + msg);
  };
  for (std::size_t i = 0; i < c["steps"].size(); ++i) {
    const json& s = c["steps"][i];
    if (s.contains("mode")) m->train(s["mode"] == "train");
    if (s.contains("load_state_dict")) {
      layers::StateDict sd;
      for (auto& [k, v] : s["load_state_dict"]["state"].items()) sd.insert(k, value_tensor(v, dtype));
      const bool strict = s["load_state_dict"].value("strict", true);
      try {
        m->load_state_dict(sd, strict);
        if (s.contains("expect_error") && !s.contains("input")) fail(i, "expected load_state_dict to throw");
      } catch (const std::exception& e) {
        if (!s.contains("expect_error")) fail(i, std::string("load_state_dict threw: ") + e.what());
        else if (!error_matches(e.what(), s["expect_error"])) fail(i, std::string("error message lacks the expected words: ") + e.what());
        continue;
      }
    }
    Tensor x, y;
    if (s.contains("input") || s.contains("input_fill")) {
      x = s.contains("input") ? golden::tensor_from_nested(s["input"], dtype)
                              : Tensor::full(s["input_fill"]["shape"].get<std::vector<std::int64_t>>(),
                                             s["input_fill"]["value"].get<double>(), dtype);
      const bool no_grad = s.value("no_grad", false);
      if (!no_grad) x.requires_grad_();
      m->zero_grad();
      try {
        if (no_grad) {
          NoGradGuard ng;
          y = m->forward(x);
        } else {
          y = m->forward(x);
        }
        if (s.contains("expect_error")) fail(i, "expected the forward to throw, got " + y.to_string());
      } catch (const std::exception& e) {
        if (!s.contains("expect_error")) fail(i, std::string("forward threw: ") + e.what());
        else if (!error_matches(e.what(), s["expect_error"])) fail(i, std::string("error message lacks the expected words: ") + e.what());
      }
      if (y.defined()) {
        for (double v : y.to_vector())
          if (!std::isfinite(v)) {
            fail(i, "non-finite output");
            break;
          }
        if (s.contains("expect_output"))
          fail(i, golden::compare("output", y, golden::tensor_from_nested(s["expect_output"], dtype), tol));
        if (s.contains("expect_output_zero_or_scaled")) {
          auto ref = golden::tensor_from_nested(s["expect_output_zero_or_scaled"]["reference"], dtype).to_vector();
          const double sc = s["expect_output_zero_or_scaled"]["scale"];
          auto yv = y.to_vector();
          for (std::size_t k = 0; k < yv.size(); ++k)
            if (yv[k] != 0 && std::abs(yv[k] - ref[k] * sc) > tolv * std::max(1.0, std::abs(ref[k] * sc)))
              fail(i, "output[" + std::to_string(k) + "] is neither 0 nor reference*scale");
        }
        if (s.contains("expect_output_mean")) {
          const double mv = mean(y).item();
          if (std::abs(mv - s["expect_output_mean"]["value"].get<double>()) > s["expect_output_mean"]["abs_tol"].get<double>())
            fail(i, "output mean " + std::to_string(mv));
        }
        if (s.contains("expect_output_zero_fraction")) {
          auto yv = y.to_vector();
          double z = 0;
          for (double v : yv) z += v == 0;
          z /= static_cast<double>(yv.size());
          if (std::abs(z - s["expect_output_zero_fraction"]["value"].get<double>()) >
              s["expect_output_zero_fraction"]["abs_tol"].get<double>())
            fail(i, "zero fraction " + std::to_string(z));
        }
        if (s.contains("backward")) {
          Tensor go = golden::tensor_from_nested(s["backward"]["grad_output"], dtype);
          y.backward(go);
          if (s.contains("expect_grad_input"))
            fail(i, golden::compare("grad_input", x.grad(), golden::tensor_from_nested(s["expect_grad_input"], dtype), tol));
          if (s.contains("expect_grad_weight"))
            fail(i, golden::compare("grad_weight", find_named(*m, "weight").grad(),
                                    golden::tensor_from_nested(s["expect_grad_weight"], dtype), tol));
          if (s.contains("expect_grad_bias"))
            fail(i, golden::compare("grad_bias", find_named(*m, "bias").grad(),
                                    golden::tensor_from_nested(s["expect_grad_bias"], dtype), tol));
          if (s.contains("expect_grad_input_follows_mask")) {
            const double sc = s["expect_grad_input_follows_mask"]["scale"];
            auto yv = y.to_vector(), gv = go.to_vector(), gi = x.grad().to_vector();
            for (std::size_t k = 0; k < yv.size(); ++k) {
              const double want = yv[k] != 0 ? gv[k] * sc : 0.0;
              if (std::abs(gi[k] - want) > tolv * std::max(1.0, std::abs(want)))
                fail(i, "grad_input[" + std::to_string(k) + "] does not follow the dropout mask");
            }
          }
        }
      }
    }
    if (s.contains("expect_running_mean"))
      fail(i, golden::compare("running_mean", find_named(*m, "running_mean"),
                              golden::tensor_from_nested(s["expect_running_mean"], dtype), tol));
    if (s.contains("expect_running_var"))
      fail(i, golden::compare("running_var", find_named(*m, "running_var"),
                              golden::tensor_from_nested(s["expect_running_var"], dtype), tol));
    if (s.contains("expect_num_batches_tracked")) {
      Tensor t = find_named(*m, "num_batches_tracked");
      if (!t.defined() || t.item() != s["expect_num_batches_tracked"].get<double>())
        fail(i, "num_batches_tracked is " + (t.defined() ? std::to_string(t.item()) : std::string("missing")));
    }
    if (s.contains("expect_state"))
      for (auto& [k, v] : s["expect_state"].items()) {
        auto sd = m->state_dict();
        const Tensor* t = sd.find(k);
        fail(i, golden::compare(k, t ? *t : Tensor(), value_tensor(v, dtype), tol));
      }
    if (s.contains("expect_state_dict_keys")) {
      auto keys = m->state_dict().keys();
      std::set<std::string> got(keys.begin(), keys.end());
      std::set<std::string> want;
      for (auto& k : s["expect_state_dict_keys"]) want.insert(k.get<std::string>());
      if (got != want) {
        std::string g;
        for (auto& k : got) g += k + " ";
        fail(i, "state_dict keys are: " + g);
      }
    }
  }
}

Outcome run_all(Dtype dtype) {
  Outcome o;
  const std::string dir = golden::dir_from_env("TAPEGRAD_CASES_DIR", "cases");
  const auto files = golden::json_files_in(dir);
  if (files.empty()) o.failures.push_back("no case files in " + dir);
  for (const auto& f : files) {
    json c = golden::read_json_file(f);
    const std::string id = c.value("id", f) + (dtype == Dtype::Float32 ? " [float32]" : "");
    try {
      run_case(o, id, c, dtype);
    } catch (const std::exception& e) {
      o.failures.push_back(id + ": threw " + e.what());
    }
  }
  return o;
}

}  // namespace

// Some cases reproduce the mode mistakes on purpose (eval on fresh statistics, a non-strict load
// without buffers, a train-mode forward under no-grad), as PyTorch runs them: the checks pause.
TEST_CASE("regression cases from public bug reports (float64)", "[cases]") {
  tapegrad::ModeChecksPause pause;
  report(run_all(Dtype::Float64));
}

TEST_CASE("regression cases from public bug reports (float32)", "[cases]") {
  tapegrad::ModeChecksPause pause;
  report(run_all(Dtype::Float32));
}
