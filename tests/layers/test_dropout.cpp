// Dropout: inverted scaling, mask reuse in backward, fresh masks, seeding, p = 0 / 1,
// eval identity, errors, gradcheck with a fixed mask.
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/dropout.h>
#include <tapegrad/layers/functional/dropout.h>

using namespace tapegrad;
using namespace tapegrad::layers;

TEST_CASE("Dropout train: 0 or x/(1-p), gradient through the same mask", "[norms]") {
  Generator gen(42);
  Dropout d(0.25, &gen);
  std::vector<double> xs;
  for (int i = 1; i <= 64; ++i) xs.push_back(i);
  Tensor x = Tensor::from_vector(xs, {8, 8}, Dtype::Float64);
  x.requires_grad_();
  Tensor y = d.forward(x);
  Tensor g = Tensor::from_vector(std::vector<double>(64, 3.0), {8, 8}, Dtype::Float64);
  y.backward(g);
  auto yv = y.to_vector(), gv = x.grad().to_vector();
  int kept = 0;
  for (int i = 0; i < 64; ++i) {
    if (yv[i] != 0) {
      ++kept;
      REQUIRE(yv[i] == Approx(xs[i] * 4.0 / 3.0).epsilon(1e-15));
      REQUIRE(gv[i] == Approx(3.0 * 4.0 / 3.0).epsilon(1e-15));
    } else {
      REQUIRE(gv[i] == 0.0);
    }
  }
  REQUIRE(kept > 32);
  REQUIRE(kept < 64);
}

TEST_CASE("Dropout draws a fresh mask per call; the same seed gives the same masks", "[norms]") {
  Generator g1(7), g2(7);
  Dropout a(0.5, &g1), b(0.5, &g2);
  Tensor ones = Tensor::ones({1000});
  auto a1 = a.forward(ones).to_vector(), a2 = a.forward(ones).to_vector();
  REQUIRE(a1 != a2);
  REQUIRE(b.forward(ones).to_vector() == a1);
  REQUIRE(b.forward(ones).to_vector() == a2);
  // the default generator, seeded
  Dropout c(0.5);
  manual_seed(123);
  auto c1 = c.forward(ones).to_vector();
  manual_seed(123);
  REQUIRE(c.forward(ones).to_vector() == c1);
}

TEST_CASE("Dropout keeps about 1 - p of 100000 entries and preserves the mean", "[norms]") {
  Generator gen(1);
  for (double p : {0.1, 0.5, 0.8}) {
    Tensor y = functional::dropout(Tensor::ones({100000}, Dtype::Float64), p, true, gen);
    auto v = y.to_vector();
    double kept = 0, s = 0;
    for (double e : v) {
      kept += e != 0;
      s += e;
    }
    INFO("p = " << p);
    REQUIRE(std::abs(kept / 100000 - (1 - p)) < 0.01);
    REQUIRE(std::abs(s / 100000 - 1.0) < 0.03);
  }
}

TEST_CASE("Dropout p = 1 zeroes output and gradient; p = 0 and eval are the identity", "[norms]") {
  Tensor x = Tensor::from_vector({1, -2, 3, 4}, {2, 2}, Dtype::Float64);
  x.requires_grad_();
  Dropout all(1.0);
  Tensor y = all.forward(x);
  REQUIRE(y.to_vector() == std::vector<double>{0, 0, 0, 0});
  y.backward(Tensor::ones({2, 2}, Dtype::Float64));
  REQUIRE(x.grad().to_vector() == std::vector<double>{0, 0, 0, 0});
  x.zero_grad();
  Dropout none(0.0);
  Tensor y0 = none.forward(x);
  REQUIRE(y0.to_vector() == x.to_vector());
  Dropout half(0.5);
  half.eval();
  Tensor ye = half.forward(x);
  REQUIRE(ye.to_vector() == x.to_vector());
  sum(ye * 2.0).backward();
  REQUIRE(x.grad().to_vector() == std::vector<double>{2, 2, 2, 2});
  REQUIRE(half.extra_repr() == "p=0.5, inplace=False");
}

TEST_CASE("Dropout rejects p outside [0, 1] naming p", "[norms]") {
  REQUIRE_THROWS_WITH(Dropout(-0.1), Catch::Contains("[0, 1]") && Catch::Contains("-0.1"));
  REQUIRE_THROWS_WITH(Dropout(1.5), Catch::Contains("1.5"));
  REQUIRE_THROWS_WITH(Dropout(std::nan("")), Catch::Contains("[0, 1]"));
  REQUIRE_THROWS_WITH(functional::dropout(Tensor::ones({2}), 2.0), Catch::Contains("[0, 1]"));
  REQUIRE_THROWS_WITH(functional::dropout(Tensor::from_int64({1}, {1}), 0.5), Catch::Contains("int64"));
}

TEST_CASE("Dropout gradcheck with a fixed mask (a generator re-seeded per call)", "[norms][gradcheck]") {
  Generator seed_src(3);
  Tensor x = uniform({4, 5}, -1, 1, Dtype::Float64, seed_src);
  x.requires_grad_();
  auto r = gradcheck(
      [](const std::vector<Tensor>& v) {
        Generator g(99);
        return functional::dropout(v[0], 0.3, true, g);
      },
      {x});
  INFO(r.message);
  REQUIRE(r.ok);
}

TEST_CASE("Dropout float32: kept entries scaled by 1/(1-p) in float32", "[norms]") {
  Generator gen(9);
  Tensor x = Tensor::full({200}, 2.0, Dtype::Float32);
  auto v = functional::dropout(x, 0.2, true, gen).to_vector();
  for (double e : v) REQUIRE((e == 0.0 || e == static_cast<double>(2.0f * static_cast<float>(1.0 / 0.8))));
}

TEST_CASE("Dropout gradcheck in eval mode (identity)", "[norms][gradcheck]") {
  Dropout d(0.4);
  d.eval();
  Tensor x = Tensor::from_vector({0.5, -1.5, 2.0}, {3}, Dtype::Float64);
  x.requires_grad_();
  auto r = gradcheck([&](const std::vector<Tensor>& v) { return d.forward(v[0]) * 3.0; }, {x});
  INFO(r.message);
  REQUIRE(r.ok);
}
