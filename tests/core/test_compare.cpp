// Comparison ops eq ne lt le gt ge: hand-computed values, broadcasting, NaN, int64
// inputs, the tensor-scalar forms, no gradient, and errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <tapegrad/core/ops.h>

using namespace tapegrad;

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();
using V = std::vector<double>;
}  // namespace

TEST_CASE("comparisons: element-wise values, 1 where true and 0 elsewhere", "[core][compare]") {
  const Tensor a = Tensor::from_vector({1, 2, 3, 4}, {4});
  const Tensor b = Tensor::from_vector({1, 3, 2, 4}, {4});
  CHECK(eq(a, b).to_vector() == V{1, 0, 0, 1});
  CHECK(ne(a, b).to_vector() == V{0, 1, 1, 0});
  CHECK(lt(a, b).to_vector() == V{0, 1, 0, 0});
  CHECK(le(a, b).to_vector() == V{1, 1, 0, 1});
  CHECK(gt(a, b).to_vector() == V{0, 0, 1, 0});
  CHECK(ge(a, b).to_vector() == V{1, 0, 1, 1});
  // the result keeps the float dtype and can be summed directly
  CHECK(eq(a, b).dtype() == Dtype::Float32);
  CHECK(sum(le(a, b)).item() == 3);
  const Tensor a64 = a.to(Dtype::Float64), b64 = b.to(Dtype::Float64);
  CHECK(gt(a64, b64).dtype() == Dtype::Float64);
  CHECK(gt(a64, b64).to_vector() == V{0, 0, 1, 0});
}

TEST_CASE("comparisons broadcast like PyTorch", "[core][compare]") {
  // a (2, 3) vs b (3): torch.lt(a, b) row by row
  const Tensor a = Tensor::from_vector({0, 5, 2, 7, 1, 9}, {2, 3});
  const Tensor b = Tensor::from_vector({1, 5, 8}, {3});
  const Tensor r = lt(a, b);
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.to_vector() == V{1, 0, 1, 0, 1, 0});
  // column (2, 1) vs row (1, 3) -> (2, 3): c[i] >= d[j]
  const Tensor c = Tensor::from_vector({2, 5}, {2, 1});
  const Tensor d = Tensor::from_vector({1, 2, 6}, {1, 3});
  const Tensor g = ge(c, d);
  CHECK(g.shape() == Shape{2, 3});
  CHECK(g.to_vector() == V{1, 1, 0, 1, 1, 0});
  // scalar tensor (shape {}) against a matrix
  CHECK(eq(Tensor::scalar(5), a).to_vector() == V{0, 1, 0, 0, 0, 0});
  // shapes that do not broadcast: the error names both
  CHECK_THROWS_WITH(eq(a, Tensor::zeros({2})), Catch::Contains("[2, 3]") && Catch::Contains("[2]"));
}

TEST_CASE("comparisons with NaN: false, except ne which is true", "[core][compare]") {
  for (Dtype dt : {Dtype::Float32, Dtype::Float64}) {
    const Tensor a = Tensor::from_vector({kNaN, 1, kNaN}, {3}, dt);
    const Tensor b = Tensor::from_vector({kNaN, kNaN, 1}, {3}, dt);
    CHECK(eq(a, b).to_vector() == V{0, 0, 0});
    CHECK(ne(a, b).to_vector() == V{1, 1, 1});
    CHECK(lt(a, b).to_vector() == V{0, 0, 0});
    CHECK(le(a, b).to_vector() == V{0, 0, 0});
    CHECK(gt(a, b).to_vector() == V{0, 0, 0});
    CHECK(ge(a, b).to_vector() == V{0, 0, 0});
    CHECK(eq(a, kNaN).to_vector() == V{0, 0, 0});
    CHECK(ne(a, kNaN).to_vector() == V{1, 1, 1});
    CHECK(ge(a, 1.0).to_vector() == V{0, 1, 0});
    CHECK(ne(a, 1.0).to_vector() == V{1, 0, 1});
  }
}

TEST_CASE("comparisons of int64 tensors give float32 0/1: accuracy from argmax", "[core][compare]") {
  // logits of 4 samples over 3 classes; argmax = [2, 0, 1, 1]; labels [2, 0, 0, 1] -> 3 right
  const Tensor logits = Tensor::from_vector({0.1, 0.2, 0.9, 3, 1, 2, -1, 5, 0, 0, 2, 1}, {4, 3});
  const Tensor y = Tensor::from_int64({2, 0, 0, 1}, {4});
  const Tensor pred = argmax(logits, 1);
  CHECK(pred.to_vector() == V{2, 0, 1, 1});
  const Tensor hit = eq(pred, y);
  CHECK(hit.dtype() == Dtype::Float32);
  CHECK(hit.to_vector() == V{1, 1, 0, 1});
  CHECK(mean(hit).item() == 0.75);
  // large int64 values compare exactly (not through float32)
  const Tensor big = Tensor::from_int64({(std::int64_t{1} << 40) + 1, std::int64_t{1} << 40}, {2});
  CHECK(eq(big, Tensor::from_int64({std::int64_t{1} << 40, std::int64_t{1} << 40}, {2})).to_vector() == V{0, 1});
  // scalar forms compare int64 as double: 0 < 0.5, 1 > 0.5
  const Tensor i = Tensor::from_int64({0, 1, -3}, {3});
  CHECK(lt(i, 0.5).to_vector() == V{1, 0, 1});
  CHECK(gt(i, -3.0).to_vector() == V{1, 1, 0});
  CHECK(le(i, -3.0).dtype() == Dtype::Float32);
  // mixing dtypes is refused, naming both
  CHECK_THROWS_WITH(eq(pred, logits), Catch::Contains("int64") && Catch::Contains("float32"));
}

TEST_CASE("tensor-scalar comparisons compare in the tensor's dtype", "[core][compare]") {
  // (expected values chosen not of the form {x, x, 0, 0}: GCC 12.2 with -march=native
  // miscompiles some such std::vector<double> literals into a broadcast of x)
  const Tensor a = Tensor::from_vector({-1, 0.5, 0, 2}, {2, 2});
  CHECK(eq(a, 0.5).to_vector() == V{0, 1, 0, 0});
  CHECK(ne(a, 0.5).to_vector() == V{1, 0, 1, 1});
  CHECK(lt(a, 0.0).to_vector() == V{1, 0, 0, 0});
  CHECK(le(a, 0.0).to_vector() == V{1, 0, 1, 0});
  CHECK(gt(a, 0.0).to_vector() == V{0, 1, 0, 1});
  CHECK(ge(a, 0.5).to_vector() == V{0, 1, 0, 1});
  CHECK(eq(a, 0.5).shape() == Shape{2, 2});
  // float32 0.1 == 0.1: the scalar is rounded to float32 first (as torch.tensor([0.1]) == 0.1)
  CHECK(eq(Tensor::from_vector({0.1}, {1}), 0.1).item() == 1);
  CHECK(eq(Tensor::from_vector({0.1}, {1}, Dtype::Float64), 0.1).item() == 1);
}

TEST_CASE("comparisons are not differentiable: no grad, no tape node", "[core][compare]") {
  Tensor w = Tensor::from_vector({1, -2, 3}, {3}).requires_grad_();
  const Tensor m = gt(w, 0.0);
  CHECK_FALSE(m.requires_grad());
  CHECK(m.grad_fn_name().empty());
  CHECK_FALSE(eq(w, w).requires_grad());
  // used as a mask the gradient flows only through the differentiable factor
  Tensor loss = sum(w * m);
  loss.backward();
  CHECK(w.grad().to_vector() == V{1, 0, 1});
  CHECK_THROWS_WITH(eq(Tensor(), w), Catch::Contains("undefined"));
  CHECK_THROWS_WITH(lt(Tensor(), 1.0), Catch::Contains("undefined"));
}
