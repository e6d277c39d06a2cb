// ONNX export: the protobuf encoder's bytes, the graph's structure and the refusals. The
// outputs of exported models are compared with ONNX Runtime, OpenCV DNN and onnx.checker by
// the onnx_engines ctest (tests/onnx_engines).
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/io/onnx_export.h>
#include <tapegrad/io/onnx_proto.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/local_response_norm.h>
#include <tapegrad/layers/pooling.h>
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
