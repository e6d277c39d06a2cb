// A backward run from inside a running backward (a post-accumulate-grad hook, a backward
// closure), as PyTorch allows: each backward propagates its own gradients, the tape is
// never compacted under the outer backward's walk, and a closure a nested backward frees
// is released only once it has returned. Run under ASan (scripts/test.sh, stage asan):
// before the fix the nested backward compacted the tape the outer one was walking by index.
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>

using namespace tapegrad;

namespace {
constexpr int kSteps = 12;  // ops per graph, recorded interleaved (A, B, A, B, ...)

void check_all(const Tensor& t, const std::vector<double>& expected) {
  const std::vector<double> got = t.to_vector();
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-12));
}
}  // namespace

TEST_CASE("nested backward: a hook runs another graph's backward, recorded interleaved, and drops it",
          "[autograd][nested_backward]") {
  Tensor x = Tensor::from_vector({1.0, -2.0, 0.5}, {3}, Dtype::Float64).requires_grad_();  // graph A
  Tensor z = Tensor::from_vector({3.0, 4.0, -1.0}, {3}, Dtype::Float64).requires_grad_();  // graph A, used last
  Tensor y = Tensor::from_vector({0.25, 2.0, -3.0}, {3}, Dtype::Float64).requires_grad_(); // graph B
  Tensor a = x;
  Tensor b = y;
  for (int i = 0; i < kSteps; ++i) {
    a = a * 1.5;
    b = b * 2.0;
  }
  std::optional<Tensor> lb = sum(b);  // B's root, recorded before A's
  Tensor la = sum(a * z);
  a = Tensor();
  b = Tensor();
  int hook_calls = 0;
  std::vector<double> y_grad_in_hook;
  // z's only consumer is A's last mul: its hook fires at the start of A's backward, with
  // most of A's nodes still to run below it on the tape.
  autograd::set_post_accumulate_grad_hook(z, [&] {
    ++hook_calls;
    lb->backward();
    lb.reset();  // B's nodes die here, under the outer backward's walk
    y_grad_in_hook = y.grad().to_vector();
  });
  la.backward();
  autograd::set_post_accumulate_grad_hook(z, {});
  const double fa = std::pow(1.5, kSteps), fb = std::pow(2.0, kSteps);
  CHECK(hook_calls == 1);
  CHECK(y_grad_in_hook == std::vector<double>{fb, fb, fb});
  check_all(x.grad(), {3.0 * fa, 4.0 * fa, -1.0 * fa});
  check_all(z.grad(), {1.0 * fa, -2.0 * fa, 0.5 * fa});
  la = Tensor();
  CHECK(autograd::tape_size() == 0);
}

TEST_CASE("nested backward: a backward closure runs another graph's backward", "[autograd][nested_backward]") {
  Tensor x = Tensor::from_vector({1.0, 2.0}, {2}, Dtype::Float64).requires_grad_();
  Tensor y = Tensor::from_vector({-1.0, 0.5}, {2}, Dtype::Float64).requires_grad_();
  Tensor a = x;
  Tensor b = y;
  for (int i = 0; i < kSteps; ++i) {
    a = a * 3.0;
    b = exp(b * 0.1);
  }
  std::optional<Tensor> lb = sum(b);
  // An identity op on A whose backward runs B's backward (like a hook on A's node).
  Tensor id = a.clone();
  int closure_calls = 0;
  autograd::record(
      "identity_running_b", id, {a},
      [&lb, &closure_calls](const Tensor& g, GradSink& sink) {
        ++closure_calls;
        lb->backward();
        lb.reset();
        sink.add(0, g);
      },
      autograd::kSavesNothing);
  Tensor la = sum(id * id);
  a = Tensor();
  b = Tensor();
  id = Tensor();
  // Reference for B: the same chain on a fresh leaf, in a backward of its own.
  Tensor y_ref = Tensor::from_vector({-1.0, 0.5}, {2}, Dtype::Float64).requires_grad_();
  Tensor r = y_ref;
  for (int i = 0; i < kSteps; ++i) r = exp(r * 0.1);
  sum(r).backward();
  r = Tensor();

  la.backward();
  CHECK(closure_calls == 1);
  const double f = std::pow(3.0, kSteps);
  check_all(x.grad(), {2.0 * f * f * 1.0, 2.0 * f * f * 2.0});  // d/dx sum((f x)^2)
  check_all(y.grad(), y_ref.grad().to_vector());
  la = Tensor();
  CHECK(autograd::tape_size() == 0);
}

TEST_CASE("nested backward: graphs sharing nodes propagate separately and both reach the leaves",
          "[autograd][nested_backward]") {
  Tensor x = Tensor::from_vector({0.5, -1.0}, {2}, Dtype::Float64).requires_grad_();
  Tensor z = Tensor::from_vector({2.0, 3.0}, {2}, Dtype::Float64).requires_grad_();
  Tensor h = x * x;            // shared: d h / d x = 2x
  Tensor lb = sum(h * 10.0);   // B uses h
  Tensor la = sum(h * z);      // A uses h; z's hook fires before h's node runs in A
  autograd::set_post_accumulate_grad_hook(z, [&] { lb.backward({}, /*retain_graph=*/true); });
  la.backward();
  autograd::set_post_accumulate_grad_hook(z, {});
  // A: 2x z; B: 2x * 10; the leaf receives both (h's node kept A's pending gradient apart)
  check_all(x.grad(), {2 * 0.5 * 2.0 + 2 * 0.5 * 10.0, 2 * -1.0 * 3.0 + 2 * -1.0 * 10.0});
  check_all(z.grad(), {0.25, 1.0});
}

TEST_CASE("nested backward: freeing a node the outer backward still needs is the usual error",
          "[autograd][nested_backward]") {
  Tensor x = Tensor::from_vector({0.5, -1.0}, {2}, Dtype::Float64).requires_grad_();
  Tensor z = Tensor::from_vector({2.0, 3.0}, {2}, Dtype::Float64).requires_grad_();
  Tensor h = x * x;
  Tensor lb = sum(h * 10.0);
  Tensor la = sum(h * z);
  autograd::set_post_accumulate_grad_hook(z, [&] { lb.backward(); });  // frees h's node
  CHECK_THROWS_WITH(la.backward(), Catch::Contains("backward through the graph a second time") &&
                                       Catch::Contains("retain_graph=true"));
  autograd::set_post_accumulate_grad_hook(z, {});
  // B's own backward completed (its gradient reached x); A's was abandoned as a whole, but
  // z is a hooked leaf, committed when final, before the hook ran (see the hook's docs)
  check_all(x.grad(), {2 * 0.5 * 10.0, 2 * -1.0 * 10.0});
  check_all(z.grad(), {0.25, 1.0});
}

TEST_CASE("nested backward: an error in the nested backward leaves the outer graph clean",
          "[autograd][nested_backward]") {
  Tensor x = Tensor::from_vector({1.0, 2.0}, {2}, Dtype::Float64).requires_grad_();
  Tensor y = Tensor::from_vector({3.0, 4.0}, {2}, Dtype::Float64).requires_grad_();
  Tensor z = Tensor::from_vector({1.0, 1.0}, {2}, Dtype::Float64).requires_grad_();
  Tensor a = x * 2.0;
  Tensor t = y * 1.0;
  Tensor b = t * t;  // saves t
  {
    NoGradGuard ng;
    t.mul_(2.0);  // B's backward will refuse
  }
  Tensor lb = sum(b);
  Tensor la = sum(a * z);
  autograd::set_post_accumulate_grad_hook(z, [&] { lb.backward(); });
  CHECK_THROWS_WITH(la.backward({}, /*retain_graph=*/true), Catch::Contains("modified by an in-place operation"));
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(y.grad().defined());
  // the outer graph holds no stale gradient: a plain backward afterwards is exact
  autograd::set_post_accumulate_grad_hook(z, {});
  z.zero_grad();
  la.backward();
  check_all(x.grad(), {2.0, 2.0});
}

TEST_CASE("nested backward: a closure whose node a nested backward frees is released after it returns",
          "[autograd][nested_backward]") {
  Tensor x = Tensor::from_vector({1.0, 2.0}, {2}, Dtype::Float64).requires_grad_();
  Tensor u = x.clone();
  int calls = 0;
  // The first run of the closure runs a backward from u itself: that backward reaches
  // this very node again and frees it (retain_graph=false) while the first run is still
  // inside the closure, which must stay alive until it returns.
  autograd::record(
      "reenter", u, {x},
      [&u, &calls](const Tensor& g, GradSink& sink) {
        if (++calls == 1) u.backward(Tensor::ones(u.shape(), u.dtype()));
        sink.add(0, g);
      },
      autograd::kSavesNothing);
  Tensor v = u * 1.0;
  v.backward(Tensor::ones({2}, Dtype::Float64));
  CHECK(calls == 2);
  check_all(x.grad(), {2.0, 2.0});  // one from each backward
}
