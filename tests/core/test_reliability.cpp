// Reliability of the core: size arithmetic that cannot overflow, deep graphs that neither
// tear down nor backward recursively, in-place writes to saved tensors detected by
// version counters, failed backwards that leave no trace, cross-thread graphs refused,
// NaN never hidden by a selection. Each case is an instance of docs/errors.md.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <new>
#include <thread>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/core/core.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::f32;
using tapegrad::test::f64;
using tapegrad::test::leaf64;
using tapegrad::test::thrown;

namespace {
constexpr std::int64_t kBig = std::int64_t(1) << 31;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
}  // namespace

// ---- 3. size and index arithmetic ------------------------------------------------------

TEST_CASE("reliability: a shape whose element or byte count overflows is refused, naming it", "[errors][reliability]") {
  // 2^31 · 2^31 = 2^62 elements: the byte count (2^64 for float32) wraps to 0
  CHECK_THAT(thrown<std::invalid_argument>([] { Tensor::ones({kBig, kBig}); }),
             Contains("[2147483648, 2147483648]") && Contains("overflow"));
  CHECK_THAT(thrown<std::invalid_argument>([] { Tensor::zeros({kMax, 2}, Dtype::Float64); }),
             Contains("[9223372036854775807, 2]") && Contains("overflow"));
  CHECK_THAT(thrown<std::invalid_argument>([] { Tensor::empty({kBig, kBig, kBig}); }), Contains("overflow"));
  // a count that fits but cannot be allocated is std::bad_alloc, not a crash
  CHECK_THROWS_AS(Tensor::empty({std::int64_t(1) << 60}, Dtype::Float32), std::bad_alloc);
  // a zero size makes the count 0, but the other sizes must still multiply without
  // overflow (every op takes partial products such as the extent before an axis)
  CHECK(Tensor::zeros({kBig, 0, 4}).numel() == 0);
  CHECK_THAT(thrown<std::invalid_argument>([] { Tensor::zeros({kMax, 0, kMax}); }), Contains("overflow"));
  CHECK_THAT(thrown<std::invalid_argument>([] { Tensor::from_vector({1.0}, {kBig, kBig, 4}, Dtype::Float64); }), Contains("overflow"));
  CHECK_THAT(thrown<std::invalid_argument>([] { Tensor::full({-1, 3}, 1.0); }), Contains("[-1, 3]"));
}

TEST_CASE("reliability: narrow and slice bounds cannot overflow", "[errors][reliability]") {
  const Tensor x = f64({2, 3});
  CHECK_THAT(thrown<std::out_of_range>([&] { narrow(x, 1, 1, kMax); }),
             Contains("narrow") && Contains("9223372036854775807") && Contains("[2, 3]"));
  CHECK_THAT(thrown<std::out_of_range>([&] { narrow(x, 1, kMax, 1); }), Contains("narrow"));
  CHECK_THAT(thrown<std::out_of_range>([&] { narrow(x, 0, std::numeric_limits<std::int64_t>::min(), 1); }),
             Contains("narrow"));
  // slice clamps like Python; extreme ends and steps give the clamped result
  CHECK(slice(x, 1, std::numeric_limits<std::int64_t>::min(), kMax, kMax).shape() == Shape{2, 1});
  CHECK(slice(x, 1, kMax, std::numeric_limits<std::int64_t>::min()).shape() == Shape{2, 0});
  CHECK(slice(x, 1, 1, kMax, 2).to_vector() == std::vector<double>{1, 1});
}

TEST_CASE("reliability: reshape, flatten and broadcasting refuse overflowing shapes", "[errors][reliability]") {
  const Tensor x = f64({4});
  // 4 · (2^62 + 1) wraps to 4: accepted, it would make a view far past the storage
  CHECK_THAT(thrown<std::invalid_argument>([&] { reshape(x, {4, (std::int64_t(1) << 62) + 1}); }),
             Contains("reshape") && Contains("overflow"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { reshape(x, {kBig, kBig, kBig, 4}); }), Contains("reshape"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { reshape(x, {-1, kBig, kBig, kBig}); }), Contains("reshape"));
  CHECK(reshape(x, {-1, 2}).shape() == Shape{2, 2});
  const Tensor e = f64({0, 4});
  CHECK_THAT(thrown<std::invalid_argument>([&] { reshape(e, {-1, 0}); }), Contains("reshape"));
  // an expand/broadcast to a huge shape: refused before anything is allocated
  CHECK_THAT(thrown<std::invalid_argument>([&] { broadcast_to(f64({1, 1}), {kBig, kBig}); }), Contains("overflow"));
  // cat: sizes along the joined dimension that add up past int64
  const Tensor wide = Tensor::empty({0, kMax / 2 + 1});
  CHECK_THAT(thrown<std::invalid_argument>([&] { cat({wide, wide}, 1); }), Contains("cat") && Contains("overflow"));
}

TEST_CASE("reliability: a checkpoint entry whose sizes overflow beside a zero is a corrupt file",
          "[errors][reliability]") {
  // [0, 2^62, 2^62] has no elements, so the data-size bound never applied to the others
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})";
  std::vector<std::uint8_t> b(8 + header.size());
  for (int i = 0; i < 8; ++i) b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(header.size() >> (8 * i));
  std::copy(header.begin(), header.end(), b.begin() + 8);
  CHECK_THAT(thrown<std::runtime_error>([&] { parse_safetensors(b.data(), b.size()); }),
             Contains("safetensors") && Contains("'w'") && Contains("64-bit"));
}

// ---- 5. deep graphs ---------------------------------------------------------------------

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

// ---- 7. in-place writes to tensors saved for backward -----------------------------------

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

// ---- 8. a failed backward leaves no trace ------------------------------------------------

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

// ---- 9. graphs from another thread ---------------------------------------------------------

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

// ---- 10. NaN is never hidden ---------------------------------------------------------------

TEST_CASE("reliability: relu and every selection propagate NaN like PyTorch", "[errors][reliability]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (Dtype dt : {Dtype::Float32, Dtype::Float64}) {
    const Tensor x = Tensor::from_vector({nan, -1.0, 2.0}, {3}, dt);
    const auto r = relu(x).to_vector();
    CHECK(std::isnan(r[0]));
    CHECK(r[1] == 0.0);
    CHECK(r[2] == 2.0);
    CHECK(std::isnan(leaky_relu(x).at(0)));
    CHECK(std::isnan(clamp(x, 0.0, 1.0).at(0)));
    CHECK(std::isnan(clamp_min(x, 0.0).at(0)));
    CHECK(std::isnan(maximum(x, Tensor::zeros({3}, dt)).at(0)));
    CHECK(std::isnan(minimum(Tensor::zeros({3}, dt), x).at(0)));
    CHECK(std::isnan(max(x, 0).item()));
    CHECK(std::isnan(min(x, 0).item()));
    CHECK(argmax(x).item() == 0);
    CHECK(std::isnan(abs(x).at(0)));
    CHECK(std::isnan(where(Tensor::from_vector({1, 0, 0}, {3}, dt), x, x).at(0)));
    CHECK(std::isnan(sigmoid(x).at(0)));
    CHECK(std::isnan(tanh(x).at(0)));
    CHECK(std::isnan(gelu(x).at(0)));
    CHECK(std::isnan(softmax(x, 0).at(1)));
  }
  // the loss sees the NaN (a finite-loss guard fires); the gradient passes where the
  // input is not <= 0, as PyTorch's threshold_backward does
  Tensor w = Tensor::from_vector({nan, 1.0, -1.0}, {3}, Dtype::Float64);
  w.requires_grad_();
  Tensor loss = sum(relu(w));
  CHECK(std::isnan(loss.item()));
  loss.backward();
  CHECK(w.grad().to_vector() == std::vector<double>{1, 1, 0});
}
