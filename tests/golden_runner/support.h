#pragma once
// Shared machinery of the golden-vector and regression-case runners: JSON <-> tensor,
// tolerant comparison, and registries that map PyTorch type names to tapegrad objects.
// Each layer family registers its factories in its own factories_*.cpp file.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/module.h>

namespace golden {

using json = nlohmann::json;
using tapegrad::Dtype;
using tapegrad::Tensor;

/// {"shape": [...], "data": [...], "dtype"?} -> tensor (float data converted to `dtype`).
Tensor tensor_from_json(const json& j, Dtype dtype);
/// Nested lists (the cases' format) -> tensor; a bare number is a scalar.
Tensor tensor_from_nested(const json& j, Dtype dtype);
/// Reads and parses a file; throws std::runtime_error naming the file on failure.
json read_json_file(const std::string& path);
/// The *.json files of a folder, sorted; throws when the folder is missing.
std::vector<std::string> json_files_in(const std::string& dir);

struct Tolerance {
  double rtol = 1e-9, atol = 1e-11;
  bool cases_style = false;  ///< |d| <= rtol·max(1, |want|) (regression cases' rule)
};
/// "" when equal within tolerance, else a message naming what, where and by how much.
std::string compare(const std::string& what, const Tensor& got, const Tensor& want, const Tolerance& tol);

// ---- registries ---------------------------------------------------------------------
/// Builds a layer from PyTorch constructor args (golden "args" or a case's module object).
using ModuleFactory = std::function<tapegrad::layers::ModulePtr(const json& args, Dtype dtype)>;
/// A loss: (input, target) -> scalar, from its args.
using LossFn = std::function<Tensor(const Tensor& input, const Tensor& target)>;
using LossFactory = std::function<LossFn(const json& args)>;
/// An optimizer bound to its parameters: step() applies one update.
struct OptimizerHandle {
  std::shared_ptr<void> owner;
  std::function<void()> step;
};
using OptimizerFactory = std::function<OptimizerHandle(const json& args, const std::vector<Tensor>& params)>;

std::map<std::string, ModuleFactory>& module_factories();
std::map<std::string, LossFactory>& loss_factories();
std::map<std::string, OptimizerFactory>& optimizer_factories();

/// For static registration: `static bool r = golden::add_module("Linear", ...);`
bool add_module(const std::string& type, ModuleFactory f);
bool add_loss(const std::string& type, LossFactory f);
bool add_optimizer(const std::string& type, OptimizerFactory f);

/// Builds a Sequential from [{"type":..., "args":...}, ...]; nullopt-like empty pointer
/// plus `missing` set when a layer type has no factory.
tapegrad::layers::ModulePtr build_sequential(const json& layers, Dtype dtype, std::string* missing);

/// Folder from the environment variable `env`, else `fallback` under the tests folder.
std::string dir_from_env(const char* env, const char* fallback);

/// Optional double from a JSON value that may be null.
std::optional<double> opt_double(const json& j);

/// BatchNorm-family options from PyTorch's constructor args (eps, momentum (null = cumulative
/// average), affine, track_running_stats), PyTorch's defaults where a key is absent.
tapegrad::layers::BatchNormOptions bn_options(const json& args, Dtype dtype);

}  // namespace golden
