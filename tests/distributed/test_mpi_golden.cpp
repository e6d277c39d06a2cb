// syncbn.json (kind "sync_module"): every case with world_size == this job's world size,
// in float64 at the file's tolerance and in float32 at 1e-5 relative. ctest runs this
// under `mpirun -np R` for each R that the file uses, so every case runs (zero skips).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/sync_batch_norm.h>
#include "golden_runner/outcome.h"
#include "golden_runner/support.h"

using namespace tapegrad;
using golden::json;

namespace {

void check(golden::Outcome& o, const std::string& where, const std::string& msg) {
  if (!msg.empty()) o.failures.push_back(where + ": " + msg);
}

Tensor sum_over_ranks(const Tensor& t) {
  std::vector<double> v = t.defined() ? t.to_vector() : std::vector<double>();
  distributed::allreduce_sum(v.data(), static_cast<std::int64_t>(v.size()));
  return t.defined() ? Tensor::from_vector(v, t.shape(), t.dtype()) : Tensor();
}

void run_case(golden::Outcome& o, const std::string& where, const json& c, Dtype dtype, const golden::Tolerance& tol) {
  const int r = distributed::rank();
  const json& args = c["module"]["args"];
  distributed::SyncBatchNorm m(args["num_features"].get<std::int64_t>(), golden::bn_options(args, dtype));
  layers::StateDict sd;
  for (auto& [k, v] : c["initial_state"].items()) sd.insert(k, golden::tensor_from_json(v, dtype));
  m.load_state_dict(sd, true);
  for (std::size_t i = 0; i < c["steps"].size(); ++i) {
    const json& s = c["steps"][i];
    const json& e = s["expect"];
    const std::string w = where + " step " + std::to_string(i) + " rank " + std::to_string(r);
    m.train(s["mode"] == "train");
    m.zero_grad();
    Tensor x = golden::tensor_from_json(s["inputs"][r], dtype);
    x.requires_grad_();
    Tensor y = m.forward(x);
    check(o, w, golden::compare("output", y, golden::tensor_from_json(e["outputs"][r], dtype), tol));
    if (s.contains("grad_outputs")) {
      y.backward(golden::tensor_from_json(s["grad_outputs"][r], dtype));
      if (e.contains("grad_inputs"))
        check(o, w, golden::compare("grad_input", x.grad(), golden::tensor_from_json(e["grad_inputs"][r], dtype), tol));
      if (e.contains("grad_params_sum"))
        for (auto& [k, v] : e["grad_params_sum"].items()) {
          Tensor g;
          for (auto& [name, p] : m.named_parameters())
            if (name == k) g = p.grad();
          // collective on every rank, whatever this rank found
          if (!g.defined()) g = Tensor::zeros({args["num_features"].get<std::int64_t>()}, dtype);
          check(o, w, golden::compare("grad_" + k + " summed over ranks", sum_over_ranks(g),
                                      golden::tensor_from_json(v, dtype), tol));
        }
    }
    if (e.contains("buffers"))
      for (auto& [k, v] : e["buffers"].items()) {
        Tensor b;
        for (auto& [name, t] : m.named_buffers())
          if (name == k) b = t;
        check(o, w, golden::compare(k, b, golden::tensor_from_json(v, dtype), tol));
      }
  }
}

// Runs every sync_module case of this world size; returns how many ran.
int run_all(golden::Outcome& o, bool float32) {
  const std::string dir = golden::dir_from_env("TAPEGRAD_GOLDEN_DIR", "golden");
  int ran = 0;
  for (const auto& f : golden::json_files_in(dir)) {
    json doc = golden::read_json_file(f);
    golden::Tolerance file_tol{doc["tolerance"]["rtol"].get<double>(), doc["tolerance"]["atol"].get<double>(), false};
    for (auto& c : doc["cases"]) {
      if (c["kind"] != "sync_module") continue;
      if (c["world_size"].get<int>() != distributed::world_size()) continue;  // its own mpirun -np runs it
      const std::string where = doc["suite"].get<std::string>() + "/" + c["name"].get<std::string>() +
                                (float32 ? " [float32]" : "");
      if (c["module"]["type"] != "SyncBatchNorm") {
        o.failures.push_back(where + ": unknown sync_module type " + c["module"]["type"].dump());
        continue;
      }
      try {
        run_case(o, where, c, float32 ? Dtype::Float32 : Dtype::Float64,
                 float32 ? golden::Tolerance{1e-5, 0, true} : file_tol);
      } catch (const std::exception& e) {
        o.failures.push_back(where + ": threw " + e.what());
      }
      ++ran;
    }
  }
  return ran;
}

}  // namespace

TEST_CASE("syncbn golden vectors match PyTorch on this world size (float64)", "[golden]") {
  golden::Outcome o;
  const int ran = run_all(o, false);
  INFO("world size " << distributed::world_size());
  CHECK(ran > 0);  // ctest runs this only for world sizes the file uses
  golden::report(o);
}

TEST_CASE("syncbn golden vectors match PyTorch on this world size (float32, 1e-5 relative)", "[golden]") {
  golden::Outcome o;
  const int ran = run_all(o, true);
  CHECK(ran > 0);
  golden::report(o);
}
