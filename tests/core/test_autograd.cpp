// The autograd engine's refusals and its reliability (docs/errors.md, "Autograd"): backward
// without a usable gradient or through a freed graph, tensors that do not require grad,
// in-place writes to saved tensors caught by version counters, deep graphs torn down and
// differentiated without recursion, failed backwards that leave no gradient, and graphs
// recorded on another thread.
#include <catch2/catch.hpp>

#include <string>
#include <thread>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/linear.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::f64;
using tapegrad::test::leaf64;
using tapegrad::test::thrown;

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

TEST_CASE("reliability: a million chained ops tear down and run backward without recursion",
          "[errors][reliability]") {
#if defined(__SANITIZE_ADDRESS__)
  constexpr int kDepth = 300000;  // ~3 GB under ASan at 1,000,000; 140,000 already overflowed
#else
  constexpr int kDepth = 1000000;
#endif
  Tensor w = leaf64({}, 0.0);
  {
    Tensor y = w;
    for (int i = 0; i < kDepth; ++i) y = add(y, 1.0);
    CHECK(y.item() == kDepth);
    // dropping y frees the whole chain (the recursive destructors overflowed the stack)
  }
  CHECK(autograd::tape_size() == 0);
  Tensor y = w;
  for (int i = 0; i < kDepth; ++i) y = add(y, 1.0);
  y.backward();
  CHECK(w.grad().item() == 1.0);
  // a long-lived accumulator over a long run (total = total + loss): two nodes a step,
  // 300,000 steps (140,000 chained nodes overflowed the stack before)
  Tensor total = Tensor::scalar(0.0, Dtype::Float64);
  for (int i = 0; i < 300000; ++i) total = total + mul(w, 1.0);
  total = Tensor();
  CHECK(autograd::tape_size() == 0);
}

TEST_CASE("reliability: copy_ into a tensor a Linear saved makes backward throw, naming the op",
          "[errors][reliability]") {
  layers::Linear lin(2, 2, true, Dtype::Float64);
  Tensor buf = f64({3, 2}, 1.0);
  Tensor loss = sum(lin.forward(buf));
  buf.copy_(f64({3, 2}, 5.0));
  CHECK_THAT(thrown<std::logic_error>([&] { loss.backward(); }),
             Contains("linear") && Contains("modified by an in-place operation") && Contains("version"));
  // nothing was accumulated by the failed backward
  CHECK_FALSE(lin.weight.grad().defined());
}

TEST_CASE("reliability: every in-place op, under NoGradGuard and through views, bumps the version",
          "[errors][reliability]") {
  auto check = [](auto&& modify, const char* what) {
    INFO(what);
    Tensor w = leaf64({2, 2}, 2.0);
    Tensor x = f64({2, 2}, 3.0);
    Tensor y = sum(mul(w, x));  // mul saves x
    modify(x);
    CHECK_THAT(thrown<std::logic_error>([&] { y.backward(); }), Contains("mul") && Contains("in-place"));
    CHECK_FALSE(w.grad().defined());
  };
  check([](Tensor& x) { x.fill_(7.0); }, "fill_");
  check([](Tensor& x) { x.zero_(); }, "zero_");
  check([](Tensor& x) { x.add_(f64({2, 2})); }, "add_");
  check([](Tensor& x) { x.mul_(2.0); }, "mul_");
  check([](Tensor& x) { x.copy_(f64({2, 2}, 9.0)); }, "copy_");
  check([](Tensor& x) { NoGradGuard ng; x.mul_(2.0); }, "mul_ under NoGradGuard");
  check([](Tensor& x) { x.detach().fill_(1.0); }, "fill_ through a detached handle");
  check([](Tensor& x) { reshape(x, {4}).fill_(1.0); }, "fill_ through a reshape view");
  check([](Tensor& x) { narrow(x, 0, 1, 1).mul_(3.0); }, "mul_ through a narrow view");
  // writes to a saved output (exp saves its result) and to a parameter (set_data)
  {
    Tensor w = leaf64({3}, 0.5);
    Tensor e = exp(w);
    Tensor y = sum(e);
    e.detach().add_(f64({3}));
    CHECK_THAT(thrown<std::logic_error>([&] { y.backward(); }), Contains("exp") && Contains("in-place"));
  }
  {
    Tensor w = leaf64({3}, 0.5);
    Tensor y = sum(mul(w, w));
    {
      NoGradGuard ng;
      w.add_(f64({3}));  // an optimizer step between forward and backward
    }
    CHECK_THAT(thrown<std::logic_error>([&] { y.backward(); }), Contains("mul") && Contains("in-place"));
  }
}

TEST_CASE("reliability: in-place writes after a backward, or to unsaved tensors, are fine", "[errors][reliability]") {
  Tensor w = leaf64({2}, 2.0);
  Tensor x = f64({2}, 3.0);
  Tensor y = sum(mul(w, x));
  y.backward();
  x.fill_(1.0);  // the graph is freed: nothing reads x any more
  CHECK(w.grad().to_vector() == std::vector<double>{3, 3});
  // add and sum do not read their inputs in backward: writing into them is fine (PyTorch too)
  Tensor a = f64({2}, 1.0);
  Tensor z = sum(add(w, a));
  a.fill_(5.0);
  z.backward();
  CHECK(w.grad().to_vector() == std::vector<double>{4, 4});
  // retain_graph: a second backward after an in-place write is refused
  Tensor y2 = sum(mul(w, x));
  y2.backward(Tensor(), true);
  x.fill_(2.0);
  CHECK_THROWS_AS(y2.backward(), std::logic_error);
}

TEST_CASE("reliability: a backward that throws leaves no gradient for a later backward", "[errors][reliability]") {
  AnomalyModeGuard anomaly;
  Tensor w = leaf64({2}, 1.0);
  Tensor h = mul(w, 2.0);                      // shared by both branches
  Tensor bad = sum(add(mul(h, 5.0), sqrt(mul(w, -1.0))));  // sqrt(-1): NaN gradient
  CHECK_THROWS_AS(bad.backward(), std::runtime_error);
  CHECK_FALSE(w.grad().defined());
  // an unrelated backward through h: d(sum(h))/dw = 2, not 2 + the failed pass's 10
  Tensor ok = sum(h);
  ok.backward();
  CHECK(w.grad().to_vector() == std::vector<double>{2, 2});
  // and a leaf that already had a gradient keeps exactly it
  Tensor bad2 = sum(add(mul(w, 3.0), sqrt(mul(w, -1.0))));
  CHECK_THROWS_AS(bad2.backward(), std::runtime_error);
  CHECK(w.grad().to_vector() == std::vector<double>{2, 2});
}

TEST_CASE("reliability: backward through a node recorded on another thread throws", "[errors][reliability]") {
  Tensor w = leaf64({2}, 1.0);
  Tensor h;
  std::thread([&] { h = mul(w, 2.0); }).join();
  std::string msg;
  std::thread([&] {
    Tensor loss = sum(mul(h, h));
    msg = thrown<std::logic_error>([&] { loss.backward(); });
  }).join();
  CHECK_THAT(msg, Contains("another thread") && Contains("mul"));
  CHECK_FALSE(w.grad().defined());
  // the recording thread's later backward does not receive a stale gradient
  Tensor own = sum(mul(w, 3.0));
  own.backward();
  CHECK(w.grad().to_vector() == std::vector<double>{3, 3});
  // the root itself on another thread (already refused before)
  std::string msg2;
  std::thread([&] { msg2 = thrown<std::logic_error>([&] { sum(h).backward(); }); }).join();
  CHECK_THAT(msg2, Contains("another thread"));
}
