// Bad input to tensors, ops and autograd: each case of docs/errors.md ("Tensors and
// ops", "Autograd") gets the documented exception type and a message that names the
// expected and the actual shape, dtype or value.
#include <catch2/catch.hpp>

#include <thread>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/losses.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::f64;
using tapegrad::test::leaf64;
using tapegrad::test::thrown;


// ---- tensors and ops ------------------------------------------------------------------

TEST_CASE("errors: every binary op names both shapes when they do not broadcast", "[errors]") {
  const Tensor a = f64({2, 3}), b = f64({4});
  CHECK_THAT(thrown<std::invalid_argument>([&] { add(a, b); }),
             Contains("add") && Contains("[2, 3]") && Contains("[4]") && Contains("not broadcastable"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { sub(a, b); }), Contains("sub") && Contains("[2, 3]") && Contains("[4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { mul(a, b); }), Contains("mul") && Contains("[2, 3]") && Contains("[4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { div(a, b); }), Contains("div") && Contains("[2, 3]") && Contains("[4]"));
  // The offending dimension is named too: dim 1 of the aligned shapes, 3 vs 4.
  CHECK_THAT(thrown<std::invalid_argument>([&] { add(a, b); }), Contains("dimension 1: 3 vs 4"));
  // Broadcasting that PyTorch accepts is accepted: (2, 3) + (3) and (2, 1) * (1, 3).
  CHECK(add(a, f64({3})).shape() == Shape{2, 3});
  CHECK(mul(f64({2, 1}), f64({1, 3})).shape() == Shape{2, 3});
}

TEST_CASE("errors: matmul names both shapes", "[errors]") {
  CHECK_THAT(thrown<std::invalid_argument>([&] { matmul(f64({2, 3}), f64({4, 5})); }),
             Contains("matmul") && Contains("[2, 3]") && Contains("[4, 5]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { matmul(f64({3}), f64({3, 2})); }),
             Contains("matmul") && Contains("[3]") && Contains("[3, 2]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { linear(f64({2, 4}), f64({5, 3}), Tensor()); }),
             Contains("linear") && Contains("(*, 3)") && Contains("[2, 4]") && Contains("[5, 3]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { linear(f64({2, 3}), f64({5, 3}), f64({4})); }),
             Contains("bias") && Contains("(5)") && Contains("[4]"));
}

TEST_CASE("errors: mixing float32 and float64 names both dtypes", "[errors]") {
  const Tensor a = Tensor::ones({2, 3}, Dtype::Float32), b = Tensor::ones({2, 3}, Dtype::Float64);
  for (auto op : {+[](const Tensor& x, const Tensor& y) { return add(x, y); },
                  +[](const Tensor& x, const Tensor& y) { return mul(x, y); }})
    CHECK_THAT(thrown<std::invalid_argument>([&] { op(a, b); }),
               Contains("dtype mismatch") && Contains("float32") && Contains("float64"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { matmul(a, Tensor::ones({3, 2}, Dtype::Float64)); }),
             Contains("matmul") && Contains("float32") && Contains("float64"));
  // int64 tensors hold indices and counters; arithmetic on them is refused.
  CHECK_THAT(thrown<std::invalid_argument>([&] { relu(Tensor::zeros({2}, Dtype::Int64)); }),
             Contains("float32 or float64") && Contains("int64"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { a.data<double>(); }), Contains("float32") && Contains("float64"));
}

TEST_CASE("errors: construction and shape ops name the sizes", "[errors]") {
  CHECK_THAT(thrown<std::invalid_argument>([&] { Tensor::from_vector({1, 2, 3}, {2, 2}, Dtype::Float64); }),
             Contains("3 values") && Contains("[2, 2]") && Contains("expected 4"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { Tensor::zeros({2, -1}); }), Contains("negative") && Contains("[2, -1]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { reshape(f64({2, 3}), {4}); }), Contains("[4]") && Contains("[2, 3]"));
  CHECK_THAT(thrown<std::out_of_range>([&] { sum(f64({2, 3}), {2}); }), Contains("axis 2") && Contains("rank 2"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { f64({2, 3}).item(); }), Contains("one element") && Contains("[2, 3]"));
  CHECK_THAT(thrown<std::out_of_range>([&] { f64({2, 3}).at(6); }), Contains("index 6") && Contains("6 elements"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { f64({2, 3}).copy_(f64({3, 2})); }),
             Contains("[3, 2]") && Contains("[2, 3]"));
  CHECK_THAT(thrown<std::logic_error>([&] { Tensor().shape(); }), Contains("undefined"));
}

TEST_CASE("errors: empty inputs are refused where a mean over zero values would be NaN", "[errors]") {
  // PyTorch returns NaN for these; tapegrad refuses them with a message naming the shape.
  CHECK_THAT(thrown<std::invalid_argument>([&] { mean(f64({0, 3}), {0}); }), Contains("zero") && Contains("[0, 3]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { layers::mse_loss(f64({0}), f64({0})); }), Contains("empty"));
  // What is well defined on an empty batch still works: sums, elementwise ops, linear.
  CHECK(sum(f64({0, 3}), {0}).to_vector() == std::vector<double>{0, 0, 0});
  CHECK(linear(f64({0, 3}), f64({2, 3}), f64({2})).shape() == Shape{0, 2});
}

// ---- autograd -------------------------------------------------------------------------

TEST_CASE("errors: backward on a non-scalar without a gradient names the shape", "[errors]") {
  Tensor x = leaf64({2, 3});
  Tensor y = mul(x, 2.0);
  CHECK_THAT(thrown<std::invalid_argument>([&] { y.backward(); }),
             Contains("one-element") && Contains("[2, 3]") && Contains("pass a gradient"));
  // A gradient of the wrong shape or dtype names both.
  CHECK_THAT(thrown<std::invalid_argument>([&] { y.backward(f64({3, 2})); }), Contains("[3, 2]") && Contains("[2, 3]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { y.backward(Tensor::ones({2, 3}, Dtype::Float32)); }),
             Contains("float32") && Contains("float64"));
  // With a correct gradient it works: d(2x)/dx · g = 2g.
  y.backward(f64({2, 3}, 0.5));
  CHECK(x.grad().to_vector() == std::vector<double>(6, 1.0));
}

TEST_CASE("errors: backward twice through a freed graph names the op and the fix", "[errors]") {
  Tensor x = leaf64({3}, 2.0);
  Tensor loss = sum(square(x));
  loss.backward();
  CHECK_THAT(thrown<std::logic_error>([&] { loss.backward(); }),
             Contains("second time") && Contains("sum") && Contains("retain_graph=true"));
  // The first backward's result is untouched by the failed second one: d(Σx²)/dx = 2x = 4.
  CHECK(x.grad().to_vector() == std::vector<double>{4, 4, 4});

  // Reaching a freed node deeper in the graph is caught too (a new head on an old graph).
  Tensor a = leaf64({2}, 1.0);
  Tensor h = mul(a, 3.0);
  sum(h).backward();
  CHECK_THAT(thrown<std::logic_error>([&] { sum(mul(h, 2.0)).backward(); }),
             Contains("second time") && Contains("mul_scalar") && Contains("retain_graph=true"));
  CHECK(a.grad().to_vector() == std::vector<double>{3, 3});  // the first backward's 3, nothing added

  // With retain_graph the second backward accumulates: 2·(2x) = 8.
  Tensor z = leaf64({3}, 2.0);
  Tensor l2 = sum(square(z));
  l2.backward(Tensor(), true);
  l2.backward();
  CHECK(z.grad().to_vector() == std::vector<double>{8, 8, 8});
}

TEST_CASE("errors: backward and grad of tensors that do not require grad", "[errors]") {
  Tensor x = f64({3}, 2.0);  // no requires_grad_()
  Tensor y = sum(square(x));
  CHECK_THAT(thrown<std::logic_error>([&] { y.backward(); }),
             Contains("does not require grad") && Contains("requires_grad_()"));
  // Computed under NoGradGuard: same error, and the hint names the guard.
  Tensor w = leaf64({3});
  Tensor out;
  {
    NoGradGuard ng;
    out = sum(square(w));
  }
  CHECK_THAT(thrown<std::logic_error>([&] { out.backward(); }), Contains("NoGradGuard"));
  // Reading grad() of such a tensor gives an undefined tensor (PyTorch: None), and using
  // that undefined tensor's data fails with a clear message, not a crash.
  CHECK_FALSE(x.grad().defined());
  CHECK_THAT(thrown<std::logic_error>([&] { x.grad().to_vector(); }), Contains("undefined"));
  CHECK_THAT(thrown<std::logic_error>([&] { x.set_grad(f64({3})); }), Contains("does not require grad"));
  // Setting a gradient of the wrong shape names both.
  CHECK_THAT(thrown<std::invalid_argument>([&] { w.set_grad(f64({2})); }), Contains("[3]") && Contains("[2]"));
  // int64 tensors cannot require grad.
  CHECK_THAT(thrown<std::invalid_argument>([&] { Tensor::zeros({2}, Dtype::Int64).requires_grad_(); }),
             Contains("int64"));
  // A non-leaf cannot stop requiring grad (PyTorch: use detach()).
  Tensor nl = mul(w, 2.0);
  CHECK_THAT(thrown<std::logic_error>([&] { nl.requires_grad_(false); }), Contains("leaf") && Contains("detach"));
}

TEST_CASE("errors: in-place update of a tensor that requires grad is refused in grad mode", "[errors]") {
  Tensor w = leaf64({3}, 1.0);
  CHECK_THAT(thrown<std::logic_error>([&] { w.add_(f64({3})); }), Contains("in-place") && Contains("NoGradGuard"));
  CHECK_THAT(thrown<std::logic_error>([&] { w.mul_(2.0); }), Contains("mul_"));
  CHECK(w.to_vector() == std::vector<double>{1, 1, 1});  // unchanged
  {
    NoGradGuard ng;
    w.mul_(2.0);
  }
  CHECK(w.to_vector() == std::vector<double>{2, 2, 2});
}

TEST_CASE("errors: backward of a graph recorded on another thread", "[errors]") {
  Tensor x = leaf64({2});
  Tensor y;
  std::thread t([&] { y = sum(mul(x, 3.0)); });
  t.join();
  CHECK_THAT(thrown<std::logic_error>([&] { y.backward(); }), Contains("another thread"));

  // Sequence numbers are per thread, so another thread's live graph can hold a node with
  // the same number as the root: that must not be mistaken for the root's tape.
  std::string msg;
  std::thread t2([&] {
    Tensor own = sum(mul(x, 5.0));  // same op count as y's graph: the same sequence numbers
    msg = thrown<std::logic_error>([&] { y.backward(); });
  });
  t2.join();
  CHECK_THAT(msg, Contains("another thread"));
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("errors: Generator::set_state refuses the all-zero state and trailing text, changing nothing",
          "[errors][reliability]") {
  Generator g(7);
  const std::string good = g.get_state();
  std::string zeros;
  for (int i = 0; i < 312; ++i) zeros += "0 ";
  zeros += "312";
  CHECK_THAT(tapegrad::test::thrown<std::invalid_argument>([&] { g.set_state(zeros); }),
             Catch::Matchers::Contains("set_state") && Catch::Matchers::Contains("non-zero word"));
  CHECK_THAT(tapegrad::test::thrown<std::invalid_argument>([&] { g.set_state(good + " 5"); }),
             Catch::Matchers::Contains("set_state") && Catch::Matchers::Contains("text after"));
  CHECK(g.get_state() == good);
  g.set_state(good + "\n");  // trailing blanks are fine
  CHECK(g.get_state() == good);
}
