// ONNX export: the protobuf encoder's bytes, the graph's structure and the refusals. The
// outputs of exported models are compared with ONNX Runtime, OpenCV DNN and onnx.checker by
// the onnx_engines ctest (tests/onnx_engines).
#include <catch2/catch.hpp>
#include <optional>
#include <utility>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/debug/warnings.h>
#include <tapegrad/io/onnx_export.h>
#include <tapegrad/io/onnx_proto.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/batch_norm_relu.h>
#include <tapegrad/layers/conv.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/fuse_modules.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/local_response_norm.h>
#include <tapegrad/layers/pooling.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/models/mlp.h>

using namespace tapegrad;
namespace op = io::onnx_proto;

TEST_CASE("onnx_proto encodes the protobuf wire format", "[onnx]") {
  op::Writer w;
  w.int64_field(1, 150);  // the protobuf documentation's example: 08 96 01
  REQUIRE(w.bytes() == std::string("\x08\x96\x01", 3));
  op::Writer n;
  n.int64_field(3, -1);  // negative int64: ten bytes of two's complement
  REQUIRE(n.bytes() == std::string("\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11));
  op::Writer s;
  s.bytes_field(2, "ab");
  s.float_field(4, 1.0f);  // fixed32 little-endian 0x3f800000
  REQUIRE(s.bytes() == std::string("\x12\x02" "ab" "\x25\x00\x00\x80\x3f", 9));
}

TEST_CASE("export_onnx writes the weights under their state_dict keys and a symbolic batch", "[onnx]") {
  tapegrad::ModeChecksPause pause;  // an untrained BatchNorm net exported on purpose
  Generator gen(1);
  models::MLP mlp({4, 6, 3}, {.norm = models::Norm::Batch}, gen);
  mlp.eval();
  const std::string bytes = io::export_onnx(mlp, {4});
  for (const char* s : {"0.weight", "0.bias", "1.scale", "1.shift", "2/Relu", "Gemm", "input", "output", "tapegrad"})
    REQUIRE(bytes.find(s) != std::string::npos);
  REQUIRE(bytes.find("\x12\x01N", 0) != std::string::npos);  // dim_param "N"
  // the first Linear's weight bytes are in the file as they are (raw_data, float32)
  const Tensor w = mlp[0]->parameters()[0];
  REQUIRE(bytes.find(std::string(static_cast<const char*>(w.raw_data()), w.nbytes())) != std::string::npos);
  // the LayerNorm decomposition has no LayerNormalization node
  models::MLP ln({4, 6, 3}, {.norm = models::Norm::Layer}, gen);
  ln.eval();
  const std::string lb = io::export_onnx(ln, {4});
  REQUIRE(lb.find("ReduceMean") != std::string::npos);
  REQUIRE(lb.find("LayerNormalization") == std::string::npos);
}

TEST_CASE("export_onnx writes a fuse_modules model as the unfused one, byte for byte", "[onnx][fuse_modules]") {
  tapegrad::ModeChecksPause pause;  // untrained BatchNorm nets exported on purpose
  for (auto norm : {models::Norm::Batch, models::Norm::None})
    for (auto clip : {std::optional<double>(0.5), std::optional<double>()}) {
      INFO("norm " << models::norm_name(norm) << ", act_clip " << (clip ? *clip : -1.0));
      Generator g1(4), g2(4);
      models::MLPOptions mo{.norm = norm, .act_clip = clip};
      models::MLP plain({4, 6, 5, 3}, mo, g1), fused({4, 6, 5, 3}, mo, g2);
      const auto r = layers::fuse_modules(fused);
      CHECK(r.batch_norm_relu + r.relu_clamp == (norm == models::Norm::Batch || clip ? 2u : 0u));
      plain.eval();
      fused.eval();
      const std::string a = io::export_onnx(plain, {4}), b = io::export_onnx(fused, {4});
      CHECK(a == b);
      // the activations under the unfused children's names: Linear 0, [BatchNorm 1,] ReLU, [Clamp]
      const bool bn = norm == models::Norm::Batch;
      CHECK(a.find(bn ? "2/Relu" : "1/Relu") != std::string::npos);
      if (clip) CHECK(a.find(bn ? "3/Clip" : "2/Clip") != std::string::npos);
    }
  // a fused module alone (no Identity places after it): its nodes under its own name
  tapegrad::layers::Sequential alone({std::make_shared<layers::Linear>(4, 3)});
  alone.push_back(std::make_shared<layers::BatchNorm1dReLU>(3, layers::BatchNormOptions{}, std::pair<double, double>{-1, 1}));
  alone.eval();
  const std::string c = io::export_onnx(alone, {4});
  for (const char* s : {"1.scale", "1/Relu", "1/Clip", "1.min", "1.max"}) CHECK(c.find(s) != std::string::npos);
}

TEST_CASE("export_onnx refuses what it cannot export, naming the module", "[onnx][errors]") {
  Generator gen(2);
  models::MLP mlp({4, 6, 3}, {.norm = models::Norm::Batch, .dropout = 0.5}, gen);
  REQUIRE_THROWS_WITH(io::export_onnx(mlp, {4}), Catch::Contains("the model (MLP) is in train mode; call eval() first"));
  mlp.eval();
  REQUIRE_THROWS_WITH(io::export_onnx(mlp, {5}), Catch::Contains("5"));  // the forward's shape error

  layers::Sequential lrn{std::make_shared<layers::LocalResponseNorm>(2)};
  lrn.eval();
  REQUIRE_THROWS_WITH(io::export_onnx(lrn, {3, 4, 4}),
                      Catch::Contains("cannot export module '0' (LocalResponseNorm): no ONNX mapping"));

  layers::Sequential untracked{std::make_shared<layers::BatchNorm1d>(3, layers::BatchNormOptions{.track_running_stats = false})};
  untracked.eval();
  REQUIRE_THROWS_WITH(io::export_onnx(untracked, {3, 5}), Catch::Contains("module '0' (BatchNorm1d) has no running statistics"));

  layers::Sequential flat0{std::make_shared<layers::Flatten>(0)};
  flat0.eval();
  REQUIRE_THROWS_WITH(io::export_onnx(flat0, {3}), Catch::Contains("merges the batch dim"));

  layers::Sequential uneven{std::make_shared<layers::AdaptiveAvgPool2d>(layers::Size2(3, 3))};
  uneven.eval();
  REQUIRE_THROWS_WITH(io::export_onnx(uneven, {2, 7, 7}), Catch::Contains("pools 7x7 to 3x3"));

  io::OnnxExportOptions o;
  o.input_mean = {0.5, 0.5};
  o.input_std = {1.0, 1.0};
  REQUIRE_THROWS_WITH(io::export_onnx(mlp, {4}, o), Catch::Contains("input_mean has 2 values; expected 1 or 4"));
  o.input_mean = {0.5};
  o.input_std = {0.0};
  REQUIRE_THROWS_WITH(io::export_onnx(mlp, {4}, o), Catch::Contains("input_std must be finite and > 0"));
}

namespace {
// The bytes of an AttributeProto of ints, as onnx_proto writes it.
std::string ints_attribute(const std::string& name, const std::vector<std::int64_t>& v) {
  op::Writer w;
  w.bytes_field(1, name);
  for (auto x : v) w.int64_field(8, x);
  w.int64_field(20, op::Attribute::Ints);
  return w.bytes();
}
}  // namespace

TEST_CASE("export_onnx writes ceil_mode pools as explicit end pads giving tapegrad's output size", "[onnx]") {
  // MaxPool2d(2, 2, padding 1, ceil_mode) on 5x5: tapegrad and PyTorch give 3x3 (a 4th window
  // would start in the end padding); ONNX's ceil_mode gives 4x4. Exported: pads (1, 1, 1, 1),
  // no ceil_mode.
  layers::Sequential max{std::make_shared<layers::MaxPool2d>(2, 2, 1, 1, true)};
  max.eval();
  REQUIRE(max(Tensor::zeros({1, 1, 5, 5})).shape() == Shape{1, 1, 3, 3});
  const std::string mb = io::export_onnx(max, {1, 5, 5});
  REQUIRE(mb.find("ceil_mode") == std::string::npos);
  REQUIRE(mb.find(ints_attribute("pads", {1, 1, 1, 1})) != std::string::npos);
  // AvgPool2d(3, 2, padding 1, ceil_mode, count_include_pad) on 6x5 -> 4x3: the last row of
  // windows needs one more end row (pads (1, 1, 2, 1)), which must not count in the divisor
  // (rows 5..7 divide by 2·3, not 3·3): the pool's output is rescaled by 9/6 there.
  layers::Sequential avg{std::make_shared<layers::AvgPool2d>(3, 2, 1, true, true)};
  avg.eval();
  const std::string ab = io::export_onnx(avg, {1, 6, 5});
  REQUIRE(ab.find("ceil_mode") == std::string::npos);
  REQUIRE(ab.find(ints_attribute("pads", {1, 1, 2, 1})) != std::string::npos);
  REQUIRE(ab.find(std::string("\x22\x03" "Mul", 5)) != std::string::npos);  // NodeProto.op_type "Mul"
  std::vector<float> scale(12, 1.0f);
  for (int j = 0; j < 3; ++j) scale[9 + j] = 1.5f;  // the last row of windows: 9 / 6
  REQUIRE(ab.find(std::string(reinterpret_cast<const char*>(scale.data()), scale.size() * 4)) != std::string::npos);
  // without ceil_mode's extra window nothing changes: symmetric pads, count_include_pad kept
  layers::Sequential plain{std::make_shared<layers::AvgPool2d>(3, 1, 1, false, true)};
  plain.eval();
  const std::string pb = io::export_onnx(plain, {1, 4, 5});
  REQUIRE(pb.find(ints_attribute("pads", {1, 1, 1, 1})) != std::string::npos);
  REQUIRE(pb.find(std::string("\x22\x03" "Mul", 5)) == std::string::npos);
}

TEST_CASE("export_onnx warns when a float64 graph has ops ONNX Runtime has no float64 kernel for", "[onnx]") {
  std::vector<debug::Warning> seen;
  debug::set_warning_handler([&](const debug::Warning& w) { seen.push_back(w); });
  struct Restore {
    ~Restore() { debug::set_warning_handler({}); }  // also when an assertion below ends the test
  } restore;
  Generator gen(3);
  layers::Sequential conv{std::make_shared<layers::Conv2d>(1, 2, 3, 1, 0, 1, 1, true, Dtype::Float64, gen),
                          std::make_shared<layers::GELU>()};
  conv.eval();
  io::export_onnx(conv, {1, 5, 5});
  layers::Sequential mlp{std::make_shared<layers::Linear>(4, 3, true, Dtype::Float64, gen), std::make_shared<layers::ReLU>()};
  mlp.eval();
  io::export_onnx(mlp, {4});  // Gemm, Relu: both have float64 kernels
  // a save that fails warns about nothing: no file, no warning
  REQUIRE_THROWS_AS(io::save_onnx(conv, {1, 5, 5}, "/nonexistent_tapegrad_dir/conv.onnx"), std::runtime_error);
  conv.to(Dtype::Float32);
  io::export_onnx(conv, {1, 5, 5});  // float32: every op runs
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].source == "onnx_export");
  CHECK(seen[0].kind == "no_float64_kernel");
  CHECK_THAT(seen[0].message, Catch::Contains("Conv (module '0')") && Catch::Contains("Erf (module '1')") &&
                                  Catch::Contains("no float64 kernel") && Catch::Contains("docs/onnx.md"));
}

TEST_CASE("export_onnx refuses a sample shape whose size product overflows or has a negative size", "[onnx][errors]") {
  layers::ReLU relu;
  relu.eval();
  // INT64_MAX x 2 (and with a zero among them: a reshape of the input multiplies the rest)
  for (const Shape& s : {Shape{INT64_MAX, 2}, Shape{0, INT64_MAX, 2}})
    REQUIRE_THROWS_WITH(io::export_onnx(relu, s), Catch::Contains("has more elements than a 64-bit count holds"));
  REQUIRE_THROWS_WITH(io::export_onnx(relu, Shape{3, -1}),
                      Catch::Contains("export_onnx: expected a sample shape of sizes >= 0, got [3, -1]"));
}
