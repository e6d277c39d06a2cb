// Standardizer decides "constant" as scikit-learn's StandardScaler (_is_constant_feature):
// relative to the feature's magnitude, so a feature in small units is still scaled.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <tapegrad/data/dataset.h>

using namespace tapegrad;
using namespace tapegrad::data;
using V = std::vector<double>;

TEST_CASE("Standardizer scales a feature in small units and keeps std 1 for a constant one", "[data]") {
  // scikit-learn 1.2 StandardScaler on float32 [[1, 7, 1e-7, -3], [2, 7, 2e-7, 0.5], [3, 7, 3e-7, 2],
  // [4, 7, 4e-7, -1], [5, 7, 5e-7, 4]]: scale_ = [1.4142135623730951, 1, 1.4142135588025495e-07,
  // 2.4083189157584592]
  const V x = {1.0, 7.0, 1.0000000116860974e-07, -3.0, 2.0, 7.0, 2.0000000233721948e-07, 0.5,
               3.0, 7.0, 3.000000106112566e-07, 2.0, 4.0, 7.0, 4.0000000467443897e-07, -1.0,
               5.0, 7.0, 4.999999987376214e-07, 4.0};
  const Tensor X = Tensor::from_vector(x, {5, 4});
  const Standardizer s = Standardizer::fit(X);
  CHECK(s.stddev()[0] == Approx(1.4142135623730951).epsilon(1e-12));
  CHECK(s.stddev()[1] == 1.0);
  CHECK(s.stddev()[2] == Approx(1.4142135588025495e-07).epsilon(1e-9));
  CHECK(s.stddev()[3] == Approx(2.4083189157584592).epsilon(1e-12));
  const Tensor Z = s.transform(X);
  CHECK(Z.at(2) == Approx(-1.4142135824702782).epsilon(1e-6));
  CHECK(Z.at(18) == Approx(1.4142135322273193).epsilon(1e-6));
  CHECK(Z.at(1) == 0.0);

  // the same feature in unit scale and in units of 1e-9: the same standardised values
  const Tensor unit = Tensor::from_vector({0, 1, 0, 1}, {4, 1});
  const Tensor tiny = Tensor::from_vector({0, 1e-9, 0, 1e-9}, {4, 1});
  CHECK(Standardizer::fit(tiny).transform(tiny).to_vector() == Standardizer::fit(unit).transform(unit).to_vector());

  // a constant column of a large value whose float64 mean is off by rounding: still constant
  const Tensor big = Tensor::from_vector({16777215.0, 16777215.0, 16777215.0}, {3, 1});
  CHECK(Standardizer::fit(big).stddev()[0] == 1.0);
  const Tensor tenth = Tensor::from_vector(V(7, 0.1), {7, 1});
  CHECK(Standardizer::fit(tenth).stddev()[0] == 1.0);
  CHECK(Standardizer::fit(tenth).transform(tenth).to_vector() == V(7, 0.0));

  // global scope: one bound over every value
  const Standardizer g = Standardizer::fit(Tensor::from_vector({0, 1e-9, 0, 1e-9}, {2, 2}), Standardizer::Scope::Global);
  CHECK(g.stddev()[0] == Approx(5e-10).epsilon(1e-6));
  const Standardizer gc = Standardizer::fit(Tensor::from_vector(V(6, 3.0), {2, 3}), Standardizer::Scope::Global);
  CHECK(gc.stddev()[0] == 1.0);
}
