// Writes the ONNX engine cases into the folder given as argv[1]: for each net, <name>.onnx,
// and for batch sizes 1 and 4 the input and tapegrad's eval output as raw little-endian
// float32, or float64 for the float64 cases (<name>_b<N>_input.bin, <name>_b<N>_output.bin),
// plus manifest.json listing the cases, their dtype, shapes, which engines run them and, for
// the float64 cases, whether ONNX Runtime is expected to run them or to refuse them. check_onnx.py (onnx.checker, OpenCV DNN)
// and check_ort.js (ONNX Runtime) compare.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/debug/warnings.h>
#include <tapegrad/tapegrad.h>
#include "onnx_convert.h"
#include <tapegrad/io/onnx_export.h>
#include <tapegrad/layers/fuse_batch_norm.h>

using namespace tapegrad;

namespace {

// Non-trivial running statistics (train-mode batches of shifted inputs) and affine parameters.
void warm_up(layers::Module& m, const Shape& in, Generator& gen) {
  m.train();
  ModeChecksPause pause;  // train-mode forwards under NoGradGuard, on purpose: they set the statistics
  for (int i = 0; i < 3; ++i) {
    Tensor x = randn(in, Dtype::Float32, gen);
    NoGradGuard ng;
    x.mul_(2.0);
    x.add_(Tensor::full(in, 0.5));
    m(x);
  }
  for (auto& [name, p] : m.named_parameters()) {
    NoGradGuard ng;
    const bool norm_weight = name.find("weight") != std::string::npos && p.dim() != 2 && p.dim() != 4;  // not Linear/Conv
    if (norm_weight) p.copy_(uniform(p.shape(), 0.5, 1.5, Dtype::Float32, gen));
    if (name.find("bias") != std::string::npos) p.copy_(uniform(p.shape(), -0.5, 0.5, Dtype::Float32, gen));
  }
  m.eval();
}

// Raw little-endian float32, or float64 for a float64 tensor.
void write_raw(const std::string& path, const Tensor& t) {
  const auto v = t.to_vector();
  std::ofstream out(path, std::ios::binary);
  if (t.dtype() == Dtype::Float64) {
    out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(double)));
  } else {
    std::vector<float> f(v.begin(), v.end());
    out.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size() * sizeof(float)));
  }
  if (!out) throw std::runtime_error("cannot write " + path);
}

// Inputs (randn, or uniform [0, 1) pixels when `pixels`) at batch 1 and 4 and `forward`'s
// outputs for the model already written to <dir>/<name>.onnx.
template <class F>
nlohmann::json write_runs(const std::string& dir, const std::string& name, F&& forward, const Shape& sample,
                          const std::vector<std::string>& engines, Generator& gen, bool pixels = false,
                          Dtype dtype = Dtype::Float32) {
  nlohmann::json c{{"name", name},      {"model", name + ".onnx"},  {"engines", engines},
                   {"dtype", dtype_name(dtype)}, {"runs", nlohmann::json::array()}};
  for (std::int64_t batch : {1, 4}) {
    Shape s{batch};
    s.insert(s.end(), sample.begin(), sample.end());
    Tensor x = pixels ? uniform(s, 0.0, 1.0, Dtype::Float32, gen) : randn(s, Dtype::Float32, gen);
    if (dtype != Dtype::Float32) x = x.to(dtype);
    Tensor y;
    {
      NoGradGuard ng;
      y = forward(x);
    }
    const std::string stem = name + "_b" + std::to_string(batch);
    write_raw(dir + "/" + stem + "_input.bin", x);
    write_raw(dir + "/" + stem + "_output.bin", y);
    c["runs"].push_back({{"batch", batch},
                         {"input", stem + "_input.bin"},
                         {"input_shape", s},
                         {"output", stem + "_output.bin"},
                         {"output_shape", y.shape()}});
  }
  return c;
}

// A checkpoint as train_fashion_mnist writes it (model.* tensors, preprocess.mean/std,
// fmnist.* metadata), converted by tapegrad_convert onnx's function; the reference output
// standardises the pixels itself.
nlohmann::json checkpoint_case(const std::string& dir, const std::string& name, layers::Module& model,
                               const std::map<std::string, std::string>& meta, bool fuse, Generator& gen) {
  const double mean = 0.2860, stddev = 0.3530;  // Fashion-MNIST's training-set pixel statistics
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [k, v] : model.state_dict()) tensors.emplace_back("model." + k, v);
  tensors.emplace_back("preprocess.mean", Tensor::from_vector({mean}, {1}, Dtype::Float64));
  tensors.emplace_back("preprocess.std", Tensor::from_vector({stddev}, {1}, Dtype::Float64));
  std::map<std::string, std::string> metadata = meta;
  metadata["preprocess"] = "x = pixels / 255; input = (x - preprocess.mean) / preprocess.std";
  const std::string ckpt = dir + "/" + name + ".safetensors";
  save_safetensors(ckpt, tensors, metadata);
  fmnist::OnnxConvertOptions o;
  o.fuse_batch_norm = fuse;
  std::cout << fmnist::convert_checkpoint_to_onnx(ckpt, dir + "/" + name + ".onnx", o) << "\n";
  auto forward = [&](const Tensor& x) {
    Tensor z = x.to(Dtype::Float64);
    NoGradGuard ng;
    z.add_(Tensor::full(z.shape(), -mean, Dtype::Float64));
    z.mul_(1.0 / stddev);
    return model(z.to(Dtype::Float32));
  };
  return write_runs(dir, name, forward, {784}, {"onnx.checker", "onnxruntime", "opencv"}, gen, true);
}

nlohmann::json write_case(const std::string& dir, const std::string& name, layers::Module& model, const Shape& sample,
                          const std::vector<std::string>& engines, Generator& gen) {
  io::save_onnx(model, sample, dir + "/" + name + ".onnx");
  return write_runs(dir, name, [&](const Tensor& x) { return model(x); }, sample, engines, gen);
}

// One pool as a model, float32, in ONNX Runtime and onnx.checker (not OpenCV 4.6: it gets
// AveragePool with count_include_pad and padding wrong, docs/onnx.md).
nlohmann::json pool_case(const std::string& dir, const std::string& name, layers::ModulePtr pool, const Shape& sample,
                         Generator& gen) {
  layers::Sequential net{std::move(pool)};
  net.eval();
  return write_case(dir, name, net, sample, {"onnx.checker", "onnxruntime"}, gen);
}

// The pool configurations of the golden vectors and regression cases (their module args and
// input sizes), and ceil_mode windows around the end of the input.
void pool_cases(const std::string& dir, nlohmann::json& cases, Generator& gen) {
  using layers::AvgPool2d, layers::MaxPool2d, layers::Size2;
  auto add = [&](const std::string& name, layers::ModulePtr m, const Shape& sample) {
    cases.push_back(pool_case(dir, "pool_" + name, std::move(m), sample, gen));
  };
  // tests/golden/conv.json MaxPool2d_0..2, AvgPool2d_3..5, AdaptiveAvgPool2d_6 (AdaptiveAvgPool2d_7,
  // 5x7 -> 2x3, and C36 have uneven windows: refused); train_cnn.json's MaxPool2d(2) is MaxPool2d_0
  add("golden_max0", std::make_shared<MaxPool2d>(2, 2, 0, 1, false), {2, 4, 6});
  add("golden_max1", std::make_shared<MaxPool2d>(3, 2, 1, 1, false), {3, 7, 5});
  add("golden_max2_ceil", std::make_shared<MaxPool2d>(2, 2, 0, 1, true), {2, 5, 5});
  add("golden_avg3", std::make_shared<AvgPool2d>(2, 2, 0, false, true), {2, 4, 4});
  add("golden_avg4", std::make_shared<AvgPool2d>(3, 1, 1, false, false), {2, 4, 5});
  add("golden_avg5", std::make_shared<AvgPool2d>(3, 1, 1, false, true), {2, 4, 5});
  add("golden_adaptive6", std::make_shared<layers::AdaptiveAvgPool2d>(Size2(1, 1)), {3, 4, 5});
  // tests/cases C32 (the last window would start in the padding: 3x4, ONNX's ceil_mode 4x4)
  // and C34 (ceil_mode's extra cells do not count in the divisor)
  add("c32_max_ceil", std::make_shared<MaxPool2d>(Size2(2, 3), 2, 1, 1, true), {2, 5, 6});
  add("c34_avg_ceil_count_pad", std::make_shared<AvgPool2d>(3, 2, 1, true, true), {2, 6, 5});
  add("avg_ceil_no_count_pad", std::make_shared<AvgPool2d>(3, 2, 1, true, false), {2, 6, 5});
  add("max_ceil_5x5_pad1", std::make_shared<MaxPool2d>(2, 2, 1, 1, true), {1, 5, 5});
  add("avg_ceil_5x5_pad1", std::make_shared<AvgPool2d>(2, 2, 1, true, true), {1, 5, 5});
  add("avg_ceil_7x8_stride3", std::make_shared<AvgPool2d>(Size2(3, 4), 3, Size2(1, 2), true, true), {2, 7, 8});
  add("max_ceil_dilated", std::make_shared<MaxPool2d>(2, 2, 1, 3, true), {1, 8, 9});  // end pad >= kernel: a Pad node
}

// Each op of the exporter in a float64 model: ONNX Runtime must run it (compared with
// tapegrad) unless export_onnx warned that ONNX Runtime has no float64 kernel for it; then
// it must refuse to load it. Verifies the table in docs/onnx.md and the warning's op list.
void float64_cases(const std::string& dir, nlohmann::json& cases, Generator& gen) {
  using namespace layers;
  auto add = [&](const std::string& name, std::vector<ModulePtr> mods, const Shape& sample) {
    Sequential net;
    for (auto& m : mods) net.push_back(m);
    Shape in{8};
    in.insert(in.end(), sample.begin(), sample.end());
    warm_up(net, in, gen);
    net.to(Dtype::Float64);
    int warned = 0;
    {
      debug::set_warning_handler([&](const debug::Warning& w) { warned += w.kind == "no_float64_kernel"; });
      struct Restore {
        ~Restore() { debug::set_warning_handler({}); }
      } restore;
      io::save_onnx(net, sample, dir + "/f64_" + name + ".onnx");
    }
    auto c = write_runs(dir, "f64_" + name, [&](const Tensor& x) { return net(x); }, sample, {"onnx.checker", "onnxruntime"},
                        gen, false, Dtype::Float64);
    c["onnxruntime_expect"] = warned ? "no_kernel" : "pass";
    cases.push_back(c);
  };
  // a parameter-free model exports as float32: each case starts with a float64 layer that has
  // float64 kernels (Gemm for (N, 6), BatchNormalization for (N, C, H, W))
  auto lin = [&] { return std::make_shared<Linear>(6, 6, true, Dtype::Float32, gen); };
  auto bn = [&](std::int64_t c) { return std::make_shared<BatchNorm2d>(c); };
  add("linear_gemm", {std::make_shared<Linear>(6, 4, true, Dtype::Float32, gen)}, {6});
  add("linear_matmul", {std::make_shared<Linear>(6, 4, false, Dtype::Float32, gen)}, {6});
  add("batchnorm1d_mul_add", {std::make_shared<BatchNorm1d>(6)}, {6});
  add("batchnorm2d", {bn(2)}, {2, 4, 4});
  add("layernorm", {std::make_shared<LayerNorm>(Shape{6})}, {6});
  add("relu_sigmoid_tanh", {lin(), std::make_shared<ReLU>(), std::make_shared<Sigmoid>(), std::make_shared<Tanh>()}, {6});
  add("leaky_relu", {lin(), std::make_shared<LeakyReLU>(0.1)}, {6});
  add("gelu_tanh", {lin(), std::make_shared<GELU>("tanh")}, {6});
  add("clamp", {lin(), std::make_shared<Clamp>(-0.5, 0.5)}, {6});
  add("flatten_unflatten", {lin(), std::make_shared<Unflatten>(1, Shape{2, 3}), std::make_shared<Flatten>()}, {6});
  add("maxpool", {bn(2), std::make_shared<MaxPool2d>(2)}, {2, 4, 4});
  add("maxpool_pad", {bn(1), std::make_shared<MaxPool2d>(2, 2, 1, 3, true)}, {1, 8, 9});
  add("conv", {std::make_shared<Conv2d>(2, 3, 3, 1, 1, 1, 1, true, Dtype::Float32, gen)}, {2, 5, 5});
  add("gelu_erf", {lin(), std::make_shared<GELU>()}, {6});
  add("groupnorm", {std::make_shared<GroupNorm>(2, 4)}, {4, 3});
  add("instancenorm", {bn(2), std::make_shared<InstanceNorm2d>(2)}, {2, 4, 4});
  add("avgpool", {bn(2), std::make_shared<AvgPool2d>(2)}, {2, 4, 4});
  add("adaptive_avgpool", {bn(2), std::make_shared<AdaptiveAvgPool2d>(Size2(1, 1))}, {2, 4, 4});
}

// Every norm but BatchNorm, and the layers the models do not use: ONNX Runtime only (OpenCV
// 4.6 has no InstanceNormalization over a reshaped group and no Erf).
std::shared_ptr<layers::Sequential> norms_net(Generator& gen) {
  using namespace layers;
  InstanceNormOptions io;
  io.affine = true;
  auto net = std::make_shared<Sequential>(std::initializer_list<ModulePtr>{
      std::make_shared<Unflatten>(1, Shape{2, 10, 10}),
      std::make_shared<Conv2d>(2, 8, 3, 1, 1, 1, 1, true, Dtype::Float32, gen),
      std::make_shared<GroupNorm>(4, 8),
      std::make_shared<LeakyReLU>(0.1),
      std::make_shared<Conv2d>(8, 8, Size2(3, 2), Size2(2, 1), Size2(2, 1), Size2(2, 1), 2, false, Dtype::Float32, gen),
      std::make_shared<InstanceNorm2d>(8, io),
      std::make_shared<GELU>(),
      std::make_shared<AvgPool2d>(2, 1, 1, false, false),
      std::make_shared<AdaptiveAvgPool2d>(Size2(2, 2)),
      std::make_shared<LayerNorm>(Shape{8, 2, 2}),
      std::make_shared<Flatten>(),
      std::make_shared<Linear>(32, 16, true, Dtype::Float32, gen),
      std::make_shared<LayerNorm>(Shape{16}),
      std::make_shared<GELU>("tanh"),
      std::make_shared<Dropout>(0.3),
      std::make_shared<Linear>(16, 12, true, Dtype::Float32, gen),
      std::make_shared<GroupNorm>(3, 12),
      std::make_shared<Sigmoid>(),
      std::make_shared<Linear>(12, 5, true, Dtype::Float32, gen),
      std::make_shared<Tanh>(),
      std::make_shared<Identity>()});
  return net;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: onnx_write_cases OUT_DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  try {
    Generator gen(2024);
    nlohmann::json cases = nlohmann::json::array();

    models::MLPOptions mo;
    mo.norm = models::Norm::Batch;
    mo.dropout = 0.25;
    models::MLP mlp({20, 32, 16, 10}, mo, gen);
    warm_up(mlp, {64, 20}, gen);
    cases.push_back(write_case(dir, "mlp_batchnorm", mlp, {20}, {"onnx.checker", "onnxruntime", "opencv"}, gen));
    // Clamp -> Clip with min/max inputs (opset >= 11): OpenCV 4.6 reads only Clip's opset-6 attributes
    mo.act_clip = 3.0;
    models::MLP clipped({20, 32, 16, 10}, mo, gen);
    warm_up(clipped, {64, 20}, gen);
    cases.push_back(write_case(dir, "mlp_batchnorm_clip", clipped, {20}, {"onnx.checker", "onnxruntime"}, gen));

    models::MLP plain({20, 24, 10}, {}, gen);
    plain.eval();
    cases.push_back(write_case(dir, "mlp_plain", plain, {20}, {"onnx.checker", "onnxruntime", "opencv"}, gen));

    models::CNN cnn({}, gen);  // the reference net on 28x28 images
    warm_up(cnn, {16, 1, 28, 28}, gen);
    cases.push_back(write_case(dir, "cnn_batchnorm", cnn, {1, 28, 28}, {"onnx.checker", "onnxruntime", "opencv"}, gen));
    auto fused = layers::fuse_batch_norm(cnn);
    cases.push_back(write_case(dir, "cnn_fused", *fused, {1, 28, 28}, {"onnx.checker", "onnxruntime", "opencv"}, gen));

    models::MLPOptions lo;
    lo.norm = models::Norm::Layer;
    models::MLP mlp_ln({20, 16, 8, 10}, lo, gen);
    warm_up(mlp_ln, {8, 20}, gen);
    cases.push_back(write_case(dir, "mlp_layernorm", mlp_ln, {20}, {"onnx.checker", "onnxruntime"}, gen));

    models::MLPOptions go;
    go.norm = models::Norm::Group;
    models::MLP mlp_gn({20, 16, 8, 10}, go, gen);
    warm_up(mlp_gn, {8, 20}, gen);
    cases.push_back(write_case(dir, "mlp_groupnorm", mlp_gn, {20}, {"onnx.checker", "onnxruntime"}, gen));

    for (models::ConvNorm n : {models::ConvNorm::Group, models::ConvNorm::Layer, models::ConvNorm::Instance}) {
      models::CNNOptions co;
      co.height = co.width = 12;
      co.channels = {8, 16};
      co.hidden = 16;
      co.groups = 4;
      co.norm = n;
      models::CNN c(co, gen);
      warm_up(c, {8, 1, 12, 12}, gen);
      cases.push_back(write_case(dir, "cnn_" + models::conv_norm_name(n) + "norm", c, {1, 12, 12},
                                 {"onnx.checker", "onnxruntime"}, gen));
    }

    // train_fashion_mnist checkpoints through the converter (standardisation folded in)
    models::MLPOptions fo;
    fo.norm = models::Norm::Batch;
    fo.dropout = 0.2;
    models::MLP fm({784, 32, 16, 10}, fo, gen);
    warm_up(fm, {32, 784}, gen);
    cases.push_back(checkpoint_case(dir, "fmnist_mlp", fm,
                                    {{"fmnist.model", "mlp"}, {"fmnist.hidden", "32,16"}, {"fmnist.norm", "batch"},
                                     {"fmnist.dropout", "0.20000000000000001"}}, false, gen));
    models::CNNOptions fc;
    fc.channels = {8, 16};
    fc.hidden = 32;
    layers::Sequential fcnn{std::make_shared<layers::Unflatten>(1, Shape{1, 28, 28}), std::make_shared<models::CNN>(fc, gen)};
    warm_up(fcnn, {16, 784}, gen);
    cases.push_back(checkpoint_case(dir, "fmnist_cnn_fused", fcnn,
                                    {{"fmnist.model", "cnn"}, {"fmnist.hidden", "256,128"}, {"fmnist.norm", "batch"},
                                     {"fmnist.dropout", "0"}, {"fmnist.cnn.channels", "8,16"}, {"fmnist.cnn.head", "32"},
                                     {"fmnist.cnn.groups", "8"}}, true, gen));

    pool_cases(dir, cases, gen);
    float64_cases(dir, cases, gen);

    auto norms = norms_net(gen);
    warm_up(*norms, {8, 200}, gen);
    cases.push_back(write_case(dir, "norms_net", *norms, {200}, {"onnx.checker", "onnxruntime"}, gen));

    std::ofstream(dir + "/manifest.json") << nlohmann::json{{"tolerance", 1e-5}, {"cases", cases}}.dump(1) << "\n";
    std::cout << "wrote " << cases.size() << " cases to " << dir << "\n";
  } catch (const std::exception& e) {
    std::cerr << "onnx_write_cases: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
