// set_post_accumulate_grad_hook: the hook runs once per backward, after the leaf's last
// gradient contribution of that backward.
#include <catch2/catch.hpp>

#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>

using namespace tapegrad;

TEST_CASE("post-accumulate-grad hook fires once, after the last contribution", "[autograd][hooks]") {
  Tensor w = Tensor::from_vector({2.0, 3.0}, {2}, Dtype::Float64).requires_grad_();
  Tensor v = Tensor::from_vector({1.0, 1.0}, {2}, Dtype::Float64).requires_grad_();
  std::vector<std::vector<double>> seen;
  int v_calls = 0;
  autograd::set_post_accumulate_grad_hook(w, [&] { seen.push_back(w.grad().to_vector()); });
  autograd::set_post_accumulate_grad_hook(v, [&] { ++v_calls; });
  // w is used three times (two uses recorded early, one late): one call, with the full sum
  Tensor a = w * w;              // d/dw = 2w
  Tensor b = a + w;              // + 1
  Tensor c = sum(b * 3.0 + v);   // v used once
  Tensor d = c + sum(w);         // + 1, recorded last
  d.backward();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == std::vector<double>{3 * (4 + 1) + 1, 3 * (6 + 1) + 1});
  CHECK(v_calls == 1);
  // a second backward fires again; a graph that does not reach v does not call v's hook
  sum(w).backward();
  CHECK(seen.size() == 2);
  CHECK(v_calls == 1);
  // removal
  autograd::set_post_accumulate_grad_hook(w, {});
  autograd::set_post_accumulate_grad_hook(v, {});
  sum(w * v).backward();
  CHECK(seen.size() == 2);
  CHECK(v_calls == 1);
  CHECK_THROWS_WITH(autograd::set_post_accumulate_grad_hook(w * 2.0, [] {}), Catch::Contains("leaf"));
}
