#include "golden_runner/support.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <tapegrad/layers/sequential.h>

namespace golden {

Tensor tensor_from_json(const json& j, Dtype dtype) {
  std::vector<std::int64_t> shape = j.at("shape").get<std::vector<std::int64_t>>();
  const auto& data = j.at("data");
  if (j.contains("dtype") && j.at("dtype") == "int64") {
    std::vector<std::int64_t> v;
    for (auto& e : data) v.push_back(e.get<std::int64_t>());
    return Tensor::from_int64(v, shape);
  }
  std::vector<double> v;
  for (auto& e : data) v.push_back(e.get<double>());
  return Tensor::from_vector(v, shape, dtype);
}

namespace {
void flatten_nested(const json& j, std::size_t depth, std::vector<std::int64_t>& shape, std::vector<double>& out) {
  if (!j.is_array()) {
    out.push_back(j.get<double>());
    return;
  }
  if (shape.size() <= depth) shape.push_back(static_cast<std::int64_t>(j.size()));
  else if (shape[depth] != static_cast<std::int64_t>(j.size())) throw std::runtime_error("ragged nested list");
  for (auto& e : j) flatten_nested(e, depth + 1, shape, out);
}
}  // namespace

Tensor tensor_from_nested(const json& j, Dtype dtype) {
  std::vector<std::int64_t> shape;
  std::vector<double> v;
  flatten_nested(j, 0, shape, v);
  return Tensor::from_vector(v, shape, dtype);
}

json read_json_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  try {
    return json::parse(f);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot parse " + path + ": " + e.what());
  }
}

std::vector<std::string> json_files_in(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw std::runtime_error("no such folder: " + dir);
  std::vector<std::string> r;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") r.push_back(e.path().string());
  std::sort(r.begin(), r.end());
  return r;
}

std::string compare(const std::string& what, const Tensor& got, const Tensor& want, const Tolerance& tol) {
  if (!got.defined()) return what + ": missing (undefined tensor)";
  if (got.shape() != want.shape())
    return what + ": shape " + tapegrad::shape_str(got.shape()) + ", expected " + tapegrad::shape_str(want.shape());
  auto g = got.to_vector(), w = want.to_vector();
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double d = std::abs(g[i] - w[i]);
    const double lim = tol.cases_style ? tol.rtol * std::max(1.0, std::abs(w[i])) : tol.atol + tol.rtol * std::abs(w[i]);
    if (!std::isfinite(g[i]) || !(d <= lim)) {
      std::ostringstream os;
      os.precision(17);
      os << what << "[" << i << "]: got " << g[i] << ", expected " << w[i] << " (|diff| " << d << " > " << lim << ")";
      return os.str();
    }
  }
  return "";
}

std::map<std::string, ModuleFactory>& module_factories() {
  static std::map<std::string, ModuleFactory> m;
  return m;
}
std::map<std::string, LossFactory>& loss_factories() {
  static std::map<std::string, LossFactory> m;
  return m;
}
std::map<std::string, OptimizerFactory>& optimizer_factories() {
  static std::map<std::string, OptimizerFactory> m;
  return m;
}
bool add_module(const std::string& t, ModuleFactory f) { return module_factories().emplace(t, std::move(f)).second; }
bool add_loss(const std::string& t, LossFactory f) { return loss_factories().emplace(t, std::move(f)).second; }
bool add_optimizer(const std::string& t, OptimizerFactory f) {
  return optimizer_factories().emplace(t, std::move(f)).second;
}

tapegrad::layers::ModulePtr build_sequential(const json& layers, Dtype dtype, std::string* missing) {
  auto seq = std::make_shared<tapegrad::layers::Sequential>();
  for (auto& l : layers) {
    const std::string type = l.at("type");
    auto it = module_factories().find(type);
    if (it == module_factories().end()) {
      if (missing) *missing = type;
      return nullptr;
    }
    seq->push_back(it->second(l.contains("args") ? l.at("args") : l, dtype));
  }
  return seq;
}

std::string dir_from_env(const char* env, const char* fallback) {
  if (const char* v = std::getenv(env); v && *v) return v;
  return std::string(TAPEGRAD_TESTS_DIR) + "/" + fallback;
}

std::optional<double> opt_double(const json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<double>();
}

tapegrad::layers::BatchNormOptions bn_options(const json& a, Dtype dtype) {
  tapegrad::layers::BatchNormOptions o;
  o.eps = a.value("eps", 1e-5);
  o.momentum = a.contains("momentum") ? opt_double(a.at("momentum")) : std::optional<double>(0.1);
  o.affine = a.value("affine", true);
  o.track_running_stats = a.value("track_running_stats", true);
  o.dtype = dtype;
  return o;
}

}  // namespace golden
