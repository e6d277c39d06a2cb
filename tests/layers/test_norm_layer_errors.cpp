// Bad input to LayerNorm, GroupNorm, InstanceNorm1d/2d and Dropout (docs/errors.md,
// "Layers"): the documented exception type and a message naming expected and actual; the
// norm layers' options changed after construction are validated at the next forward.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/batch_renorm.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/dropout.h>
#include <tapegrad/layers/group_norm.h>
#include <tapegrad/layers/instance_norm.h>
#include <tapegrad/layers/layer_norm.h>
#include "test_errors_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using Catch::Matchers::Contains;
using tapegrad::test::f32;
using tapegrad::test::thrown;

TEST_CASE("errors: LayerNorm names normalized_shape and the input shape", "[errors]") {
  LayerNorm ln({4});
  CHECK_THAT(thrown<std::invalid_argument>([&] { ln(f32({2, 3})); }),
             Contains("trailing dims [4]") && Contains("[2, 3]"));
  LayerNorm ln2({3, 4});
  CHECK_THAT(thrown<std::invalid_argument>([&] { ln2(f32({2, 4, 3})); }),
             Contains("[3, 4]") && Contains("[2, 4, 3]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { ln2(f32({4})); }), Contains("[3, 4]") && Contains("[4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { ln(Tensor::ones({2, 4}, Dtype::Float64)); }),
             Contains("float64") && Contains("float32"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { LayerNorm(Shape{}); }), Contains("normalized_shape"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { LayerNorm(Shape{3, 0}); }), Contains("[3, 0]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { LayerNorm(Shape{3}, -1.0); }), Contains("eps must be >= 0"));
  // One sample is fine for LayerNorm (no batch statistics), and so is an empty batch.
  CHECK(ln(f32({1, 4})).shape() == Shape{1, 4});
  CHECK(ln(f32({0, 4})).shape() == Shape{0, 4});
}

TEST_CASE("errors: GroupNorm names channels, groups and the input shape", "[errors]") {
  CHECK_THAT(thrown<std::invalid_argument>([&] { GroupNorm(4, 6); }),
             Contains("num_channels (6)") && Contains("num_groups (4)"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { GroupNorm(0, 6); }), Contains("num_groups=0"));
  GroupNorm gn(2, 6);
  CHECK_THAT(thrown<std::invalid_argument>([&] { gn(f32({2, 4, 5})); }), Contains("(N, 6, *)") && Contains("[2, 4, 5]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { gn(f32({6})); }), Contains("(N, 6, *)") && Contains("[6]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { gn(Tensor::ones({2, 6}, Dtype::Float64)); }),
             Contains("float64") && Contains("float32"));
}

TEST_CASE("errors: InstanceNorm names rank, channels and single-position inputs", "[errors]") {
  InstanceNorm1d in1(3);
  CHECK_THAT(thrown<std::invalid_argument>([&] { in1(f32({2, 3, 4, 4})); }),
             Contains("InstanceNorm1d") && Contains("3D (N, C, L) or 2D (C, L)") && Contains("[2, 3, 4, 4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { in1(f32({2, 5, 4})); }),
             Contains("expected 3 channels (dim 1)") && Contains("[2, 5, 4]"));
  // A single position per instance would be normalised to 0 with its own statistics
  // (PyTorch: "Expected more than 1 spatial element when training").
  CHECK_THAT(thrown<std::invalid_argument>([&] { in1(f32({2, 3, 1})); }),
             Contains("more than 1 spatial element") && Contains("[2, 3, 1]"));
  InstanceNorm2d in2(3);
  CHECK_THAT(thrown<std::invalid_argument>([&] { in2(f32({2, 3, 4})); }),
             Contains("expected 3 channels (dim 0)") && Contains("[2, 3, 4]"));  // read as unbatched (C, H, W)
  CHECK_THAT(thrown<std::invalid_argument>([&] { in2(f32({2, 3})); }),
             Contains("4D (N, C, H, W) or 3D (C, H, W)") && Contains("[2, 3]"));
  InstanceNormOptions o;
  o.momentum = 2.0;
  CHECK_THAT(thrown<std::invalid_argument>([&] { InstanceNorm1d(3, o); }), Contains("momentum") && Contains("2.0"));
}

TEST_CASE("errors: Dropout p outside [0, 1] is refused, naming p", "[errors]") {
  CHECK_THAT(thrown<std::invalid_argument>([&] { Dropout(1.5); }), Contains("[0, 1]") && Contains("1.5"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { Dropout(-0.1); }), Contains("-0.1"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { Dropout(std::nan("")); }), Contains("nan"));
  // The edges are valid: p = 0 keeps everything, p = 1 zeroes everything (PyTorch).
  Generator gen(1);
  Dropout keep(0.0, &gen), drop(1.0, &gen);
  CHECK(keep(f32({4}, 2.0)).to_vector() == std::vector<double>{2, 2, 2, 2});
  CHECK(drop(f32({4}, 2.0)).to_vector() == std::vector<double>{0, 0, 0, 0});
}

TEST_CASE("reliability: norm options changed after construction are validated at the next forward",
          "[errors][reliability]") {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, Dtype::Float32);
  layers::BatchNorm1d bn(3);
  bn.options.momentum = 5.0;
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn.forward(x); }), Contains("momentum") && Contains("5"));
  CHECK(bn.batches_tracked() == 0);
  CHECK(bn.running_mean.to_vector() == std::vector<double>{0, 0, 0});
  bn.options.momentum = -0.1;
  CHECK_THROWS_AS(bn.forward(x), std::invalid_argument);
  bn.options.momentum = kNaN;
  CHECK_THROWS_AS(bn.forward(x), std::invalid_argument);
  bn.options.momentum = 0.1;
  bn.options.eps = -1e-5;
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn.forward(x); }), Contains("eps"));
  bn.options.eps = std::numeric_limits<double>::infinity();
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn.forward(x); }), Contains("eps"));
  CHECK_THAT(thrown<std::invalid_argument>([] { layers::BatchNorm1d b(3, {.eps = kNaN}); }), Contains("eps"));
  CHECK_THAT(thrown<std::invalid_argument>([] { layers::BatchNorm1d b(3, {.eps = 1.0 / 0.0}); }), Contains("eps"));
  // the functional form refuses the same values
  CHECK_THAT(thrown<std::invalid_argument>([&] {
               layers::functional::batch_norm(x, bn.running_mean, bn.running_var, Tensor(), Tensor(), true, 5.0);
             }),
             Contains("momentum"));

  layers::BatchRenorm1d br(3);
  br.options.momentum = 2.0;
  CHECK_THAT(thrown<std::invalid_argument>([&] { br.forward(x); }), Contains("momentum"));
  br.options.momentum = 0.1;
  CHECK_THAT(thrown<std::invalid_argument>([&] { br.set_clipping(0.5, 1.0); }), Contains("rmax"));

  const Tensor x3 = Tensor::ones({2, 3, 4});
  layers::InstanceNorm1d in(3);
  in.options.eps = -1;
  CHECK_THAT(thrown<std::invalid_argument>([&] { in.forward(x3); }), Contains("eps"));
  in.options.eps = 1e-5;
  in.options.momentum = 1.5;
  CHECK_THAT(thrown<std::invalid_argument>([&] { in.forward(x3); }), Contains("momentum"));

  layers::LayerNorm ln({3});
  ln.eps = kNaN;
  CHECK_THAT(thrown<std::invalid_argument>([&] { ln.forward(x); }), Contains("eps"));
  layers::GroupNorm gn(1, 3);
  gn.eps = -2;
  CHECK_THAT(thrown<std::invalid_argument>([&] { gn.forward(x3); }), Contains("eps"));
}
