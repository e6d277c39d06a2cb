// Options structs (libtorch style) for Conv2d, the pools, Linear, LayerNorm and GroupNorm:
// the defaults are PyTorch's, each setter reaches the module, and an options-built module
// equals the positional one (same generator: same weights, same outputs).
#include <catch2/catch.hpp>

#include <tapegrad/core/random.h>
#include <tapegrad/layers/conv.h>
#include <tapegrad/layers/group_norm.h>
#include <tapegrad/layers/layer_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/pooling.h>

using namespace tapegrad;
using namespace tapegrad::layers;

namespace {
Tensor input(const Shape& s, std::uint64_t seed) {
  Generator g(seed);
  return uniform(s, -1, 1, Dtype::Float32, g);
}
}  // namespace

TEST_CASE("Conv2dOptions: defaults, setters, and the same module as the positional form", "[layers][options]") {
  const Conv2dOptions d(1, 8, 3);
  CHECK(d.stride() == Size2(1));
  CHECK(d.padding() == Size2(0));
  CHECK(d.dilation() == Size2(1));
  CHECK(d.groups() == 1);
  CHECK(d.bias());
  CHECK(d.dtype() == Dtype::Float32);

  Generator g1(5), g2(5);
  Conv2d a(Conv2dOptions(2, 4, {3, 2}).stride(2).padding({1, 0}).dilation(1).groups(2).bias(false).dtype(Dtype::Float64), g1);
  Conv2d b(2, 4, {3, 2}, 2, {1, 0}, 1, 2, false, Dtype::Float64, g2);
  CHECK(a.kernel_size == Size2(3, 2));
  CHECK(a.stride == Size2(2));
  CHECK(a.padding == Size2(1, 0));
  CHECK(a.groups == 2);
  CHECK_FALSE(a.bias.defined());
  CHECK(a.weight.dtype() == Dtype::Float64);
  CHECK(a.weight.to_vector() == b.weight.to_vector());
  const Tensor x = input({1, 2, 6, 5}, 9).to(Dtype::Float64);
  CHECK(a(x).to_vector() == b(x).to_vector());
  // the checks are the constructor's: a bad value names itself
  CHECK_THROWS_WITH(Conv2d(Conv2dOptions(3, 4, 3).groups(2)), Catch::Contains("groups"));
}

TEST_CASE("pooling options equal the positional pools", "[layers][options]") {
  const Tensor x = input({2, 3, 7, 7}, 1);
  MaxPool2d m1(MaxPool2dOptions(3).stride(2).padding(1).ceil_mode(true));
  MaxPool2d m2(3, 2, 1, 1, true);
  CHECK(m1.ceil_mode);
  CHECK(m1.stride == Size2(2));
  CHECK(m1(x).to_vector() == m2(x).to_vector());
  MaxPool2d m3(MaxPool2dOptions(2));
  CHECK(m3.stride == Size2(2));  // stride defaults to the kernel size
  AvgPool2d a1(AvgPool2dOptions({2, 3}).padding(1).count_include_pad(false));
  AvgPool2d a2({2, 3}, std::nullopt, 1, false, false);
  CHECK_FALSE(a1.count_include_pad);
  CHECK(a1(x).to_vector() == a2(x).to_vector());
  AdaptiveAvgPool2d p(AdaptiveAvgPool2dOptions(1));
  CHECK(p(x).shape() == Shape{2, 3, 1, 1});
  CHECK_THROWS_AS(MaxPool2d(MaxPool2dOptions(2).padding(2)), std::invalid_argument);
}

TEST_CASE("LinearOptions, LayerNormOptions and GroupNormOptions equal the positional forms", "[layers][options]") {
  Generator g1(7), g2(7);
  Linear l1(LinearOptions(4, 3).bias(false), g1);
  Linear l2(4, 3, false, Dtype::Float32, g2);
  CHECK(LinearOptions(4, 3).bias());
  CHECK_FALSE(l1.bias.defined());
  CHECK(l1.weight.to_vector() == l2.weight.to_vector());

  LayerNorm n1(LayerNormOptions({3, 4}).eps(1e-3).elementwise_affine(true).bias(false));
  CHECK(n1.normalized_shape == Shape{3, 4});
  CHECK(n1.eps == 1e-3);
  CHECK(n1.weight.defined());
  CHECK_FALSE(n1.bias.defined());
  CHECK(LayerNormOptions({4}).eps() == 1e-5);
  LayerNorm n2(LayerNormOptions({4}).elementwise_affine(false));
  CHECK_FALSE(n2.weight.defined());
  const Tensor x = input({2, 3, 4}, 3);
  CHECK(n1(x).to_vector() == LayerNorm({3, 4}, 1e-3, true, false)(x).to_vector());

  GroupNorm g(GroupNormOptions(2, 6).eps(1e-3).affine(false).dtype(Dtype::Float64));
  CHECK(g.num_groups == 2);
  CHECK(g.num_channels == 6);
  CHECK(g.eps == 1e-3);
  CHECK_FALSE(g.affine);
  const Tensor y = input({2, 6, 3}, 4).to(Dtype::Float64);
  CHECK(g(y).to_vector() == GroupNorm(2, 6, 1e-3, false, Dtype::Float64)(y).to_vector());
  CHECK_THROWS_WITH(GroupNorm(GroupNormOptions(4, 6)), Catch::Contains("4") && Catch::Contains("6"));
}
