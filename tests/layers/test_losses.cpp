// Losses against PyTorch 1.13 (torch.nn.functional, float64 unless stated), error messages, gradcheck.
#include "test_ops_support.h"

#include <tapegrad/layers/losses.h>

using namespace ops_test;
using tapegrad::layers::Reduction;
namespace L = tapegrad::layers;

namespace {
// x = [[1.2,-0.3,2.5,0.1],[-1.0,0.4,0.0,3.3],[0.7,0.7,-2.2,1.1]], t = [2,3,0]
const std::vector<double> kLogits = {1.2, -0.3, 2.5, 0.1, -1.0, 0.4, 0.0, 3.3, 0.7, 0.7, -2.2, 1.1};
Tensor targets() { return Tensor::from_int64({2, 3, 0}, {3}); }

// l = loss(x) for x = leaf(kLogits, (3, 4)): checks l against want_l, then x.grad() after
// l.backward(grad_output) (undefined: a scalar loss's backward())
// against want_grad (rtol 1e-12, atol 1e-15). Returns l for further checks.
Tensor check_logits_loss(const std::function<Tensor(const Tensor&)>& loss, const std::vector<double>& want_l,
                         const std::vector<double>& want_grad, const Tensor& grad_output = Tensor()) {
  Tensor x = leaf(kLogits, {3, 4});
  Tensor l = loss(x);
  require_close(l, want_l);
  l.backward(grad_output);
  require_close(x.grad(), want_grad, 1e-12, 1e-15);
  return l;
}
}  // namespace

TEST_CASE("mse_loss none/sum/mean match torch, both inputs differentiable", "[losses]") {
  // F.mse_loss(a, b, reduction=r); l.backward(ones_like(l))
  const std::vector<double> av = {0.2, -1.3, 0.7, 1.5, 0.4, -0.6}, bv = {0.0, -1.0, 2.0, 1.0, 1.0, -0.5};
  const std::vector<double> g_sum = {0.4, -0.6000000000000001, -2.6, 1.0, -1.2, -0.19999999999999996};
  {
    Tensor a = leaf(av, {2, 3}), b = leaf(bv, {2, 3});
    Tensor l = L::mse_loss(a, b, Reduction::None);
    require_close(l, {0.04000000000000001, 0.09000000000000002, 1.6900000000000002, 0.25, 0.36,
                      0.009999999999999995});
    l.backward(Tensor::ones({2, 3}, Dtype::Float64));
    require_close(a.grad(), g_sum);
  }
  {
    Tensor a = leaf(av, {2, 3}), b = leaf(bv, {2, 3});
    Tensor l = L::mse_loss(a, b, Reduction::Sum);
    require_close(l, {2.4400000000000004});
    l.backward();
    require_close(a.grad(), g_sum);
  }
  {
    Tensor a = leaf(av, {2, 3}), b = leaf(bv, {2, 3});
    Tensor l = L::MSELoss{}(a, b);
    REQUIRE(l.shape() == Shape{});
    require_close(l, {0.40666666666666673});
    l.backward();
    require_close(a.grad(), {0.06666666666666667, -0.1, -0.43333333333333335, 0.16666666666666666,
                             -0.19999999999999998, -0.033333333333333326});
    require_close(b.grad(), {-0.06666666666666667, 0.1, 0.43333333333333335, -0.16666666666666666,
                             0.19999999999999998, 0.033333333333333326});
  }
  REQUIRE_THROWS_WITH(L::mse_loss(Tensor::zeros({4, 1}), Tensor::zeros({4})),
                      Catch::Contains("[4, 1]") && Catch::Contains("[4]"));
}

TEST_CASE("cross_entropy none/sum/mean match torch (values and fused gradient)", "[losses]") {
  // F.cross_entropy(x, t, reduction='none'); l.backward(tensor([1., 2., -1.]))
  Tensor l = check_logits_loss([](const Tensor& x) { return L::cross_entropy(x, targets(), Reduction::None); },
                               {0.35351181277396254, 0.10027505843517802, 1.266059298553599},
                               {0.191376648172676, 0.04270190215543891, -0.2977823025998595, 0.06370375227174475,
                                0.024547926763116405, 0.09954675179589517, 0.06672818324652283, -0.19082286180553432,
                                0.7180595212412947, -0.2819404787587053, -0.015513273005549043, -0.42060576947704054},
                               Tensor::from_vector({1, 2, -1}, {3}, Dtype::Float64));
  REQUIRE(l.shape() == Shape{3});
  // F.cross_entropy(x, t, reduction='sum')
  check_logits_loss([](const Tensor& x) { return L::cross_entropy(x, targets(), Reduction::Sum); },
                    {1.7198461697627394},
                    {0.191376648172676, 0.04270190215543891, -0.2977823025998595, 0.06370375227174475,
                     0.012273963381558202, 0.049773375897947586, 0.03336409162326141, -0.09541143090276716,
                     -0.7180595212412947, 0.2819404787587053, 0.015513273005549043, 0.42060576947704054});
  // F.cross_entropy(x, t): mean
  l = check_logits_loss([](const Tensor& x) { return L::CrossEntropyLoss{}(x, targets()); }, {0.5732820565875798},
                        {0.06379221605755866, 0.014233967385146304, -0.0992607675332865, 0.021234584090581585,
                         0.004091321127186067, 0.016591125299315862, 0.01112136387442047, -0.031803810300922386,
                         -0.23935317374709822, 0.0939801595862351, 0.005171091001849681, 0.1402019231590135});
  REQUIRE(l.grad_fn_name() == "cross_entropy");
  // F.cross_entropy(x, tensor([2, -100, 0])): the ignored row gets no loss and no gradient
  check_logits_loss([](const Tensor& x) { return L::cross_entropy(x, Tensor::from_int64({2, -100, 0}, {3})); },
                    {0.8097855556637807},
                    {0.095688324086338, 0.021350951077719456, -0.14889115129992975, 0.03185187613587238, 0, 0, 0, 0,
                     -0.35902976062064734, 0.14097023937935266, 0.007756636502774522, 0.21030288473852027});
  // unbatched: (C) logits and a scalar target give row 0's loss
  require_close(L::cross_entropy(Tensor::from_vector({1.2, -0.3, 2.5, 0.1}, {4}, Dtype::Float64), Tensor::from_int64({2}, {}),
                                 Reduction::None),
                {0.35351181277396254});
}

TEST_CASE("cross_entropy with logits of magnitude 1000 is exact in float64 and float32", "[losses]") {
  // big = [[500,-500,0],[1000,1000,1000],[-800,-0.891,-0.096]], t = [1,2,0]; F.cross_entropy(big, t)
  const std::vector<double> big = {500, -500, 0, 1000, 1000, 1000, -800, -0.891, -0.096};
  Tensor t = Tensor::from_int64({1, 2, 0}, {3});
  Tensor x = leaf(big, {3, 3});
  Tensor l = L::cross_entropy(x, t);
  require_close(l, {600.4584219192577});
  l.backward();
  require_close(x.grad(), {0.3333333333333333, -0.3333333333333333, 2.374858802247095e-218, 0.1111111111111111,
                           0.1111111111111111, -0.2222222222222222, -0.3333333333333333, 0.10369869400768178,
                           0.22963463932565154},
                1e-12, 1e-300);
  // the same in float32: torch gives 600.4584350585938 and gradients within 1e-7
  Tensor xf = Tensor::from_vector(big, {3, 3}, Dtype::Float32);
  xf.requires_grad_();
  Tensor lf = L::cross_entropy(xf, t);
  REQUIRE(lf.dtype() == Dtype::Float32);
  require_close(lf, {600.4584350585938}, 1e-7);
  lf.backward();
  REQUIRE(xf.grad().dtype() == Dtype::Float32);
  require_close(xf.grad(), {0.3333333432674408, -0.3333333432674408, 0.0, 0.1111111044883728, 0.1111111044883728,
                            -0.222222238779068, -0.3333333432674408, 0.10369870066642761, 0.22963464260101318},
                1e-6, 1e-7);
}

TEST_CASE("cross_entropy and nll_loss reject bad targets with clear messages", "[losses]") {
  Tensor x = Tensor::from_vector(kLogits, {3, 4}, Dtype::Float64);
  // class index out of range names the index, its position and C
  REQUIRE_THROWS_AS(L::cross_entropy(x, Tensor::from_int64({2, 4, 0}, {3})), std::invalid_argument);
  REQUIRE_THROWS_WITH(L::cross_entropy(x, Tensor::from_int64({2, 4, 0}, {3})),
                      Catch::Contains("target[1] = 4") && Catch::Contains("C = 4"));
  REQUIRE_THROWS_WITH(L::nll_loss(x, Tensor::from_int64({-1, 0, 0}, {3})),
                      Catch::Contains("target[0] = -1") && Catch::Contains("C = 4"));
  // wrong dtype (float class indices) names the dtype
  REQUIRE_THROWS_WITH(L::cross_entropy(x, Tensor::from_vector({2, 3, 0}, {3}, Dtype::Float64)),
                      Catch::Contains("int64") && Catch::Contains("float64"));
  // wrong shape names the expected and the actual shape
  REQUIRE_THROWS_WITH(L::cross_entropy(x, Tensor::from_int64({2, 3, 0, 1}, {4})),
                      Catch::Contains("[3]") && Catch::Contains("[4]") && Catch::Contains("[3, 4]"));
  REQUIRE_THROWS_WITH(L::cross_entropy(x, Tensor::from_int64({2, 3, 0}, {3, 1})), Catch::Contains("[3, 1]"));
  REQUIRE_THROWS_WITH(L::cross_entropy(Tensor::zeros({2, 3, 4}), Tensor::from_int64({0, 0}, {2})),
                      Catch::Contains("[2, 3, 4]"));
  // mean over nothing is refused instead of returning NaN
  REQUIRE_THROWS_WITH(L::cross_entropy(x, Tensor::from_int64({-100, -100, -100}, {3})),
                      Catch::Contains("ignore_index"));
  REQUIRE_THROWS_WITH(L::parse_reduction("avg"), Catch::Contains("avg"));
}

TEST_CASE("nll_loss of log_softmax equals cross_entropy and matches torch", "[losses]") {
  // F.nll_loss(log_softmax(x, 1), t, reduction='none' / 'mean')
  Tensor x = leaf(kLogits, {3, 4});
  Tensor lp = log_softmax(x, 1);
  require_close(L::nll_loss(lp, targets(), Reduction::None),
                {0.35351181277396254, 0.10027505843517802, 1.266059298553599});
  Tensor p = leaf(lp.detach().to_vector(), {3, 4});
  Tensor l = L::NLLLoss{}(p, targets());
  require_close(l, {0.5732820565875798});
  l.backward();
  const double third = 0.3333333333333333;
  require_close(p.grad(), {0, 0, -third, 0, 0, 0, 0, -third, -third, 0, 0, 0});
  // composed log_softmax + nll_loss gives the fused cross_entropy gradient
  L::nll_loss(lp, targets()).backward();
  Tensor x2 = leaf(kLogits, {3, 4});
  L::cross_entropy(x2, targets()).backward();
  require_close(x.grad(), x2.grad().to_vector(), 1e-12, 1e-15);
}

TEST_CASE("binary_cross_entropy_with_logits matches torch and is stable at |x| = 800", "[losses]") {
  // z = [[0.5,-1,2],[-30,40,0]], y = [[1,0,0.5],[1,0,0.25]]; F.binary_cross_entropy_with_logits(z, y, reduction=r)
  const std::vector<double> zv = {0.5, -1.0, 2.0, -30.0, 40.0, 0.0}, yv = {1.0, 0.0, 0.5, 1.0, 0.0, 0.25};
  {
    Tensor z = leaf(zv, {2, 3}), y = leaf(yv, {2, 3});
    Tensor l = L::binary_cross_entropy_with_logits(z, y, Reduction::None);
    require_close(l, {0.4740769841801067, 0.31326168751822286, 1.1269280110429727, 30.000000000000092, 40.0,
                      0.6931471805599453});
    l.backward(Tensor::ones({2, 3}, Dtype::Float64));
    require_close(z.grad(), {-0.3775406687981454, 0.2689414213699951, 0.3807970779778823, -0.9999999999999064, 1.0,
                             0.25});
    require_close(y.grad(), {-0.5, 1.0, -2.0, 30.0, -40.0, 0.0});
  }
  {
    Tensor z = leaf(zv, {2, 3}), y = leaf(yv, {2, 3});
    require_close(L::binary_cross_entropy_with_logits(z, y, Reduction::Sum), {72.60741386330133});
    Tensor l = L::BCEWithLogitsLoss{}(z, y);
    require_close(l, {12.101235643883555});
    l.backward();
    require_close(z.grad(), {-0.0629234447996909, 0.04482357022833252, 0.06346617966298039, -0.16666666666665106,
                             0.16666666666666666, 0.041666666666666664});
    require_close(y.grad(), {-0.08333333333333333, 0.16666666666666666, -0.3333333333333333, 5.0,
                             -6.666666666666667, 0.0});
  }
  // torch: F.binary_cross_entropy_with_logits(tensor([800., -800.]), tensor([0., 1.])) = 800, grad [0.5, -0.5]
  Tensor b = leaf({800, -800}, {2});
  Tensor l = L::binary_cross_entropy_with_logits(b, Tensor::from_vector({0, 1}, {2}, Dtype::Float64));
  require_close(l, {800.0});
  l.backward();
  require_close(b.grad(), {0.5, -0.5});
  REQUIRE_THROWS_WITH(L::binary_cross_entropy_with_logits(Tensor::zeros({2, 3}), Tensor::zeros({3})),
                      Catch::Contains("[2, 3]") && Catch::Contains("[3]"));
}

TEST_CASE("gradcheck: every loss and reduction (float64)", "[losses][gradcheck]") {
  Tensor x = rand_leaf({4, 5}, 81, -2.0, 2.0);
  Tensor t = Tensor::from_int64({4, 0, 2, 2}, {4});
  Tensor ti = Tensor::from_int64({4, -100, 2, 1}, {4});
  for (Reduction r : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
    INFO("reduction " << static_cast<int>(r));
    require_gradcheck([t, r](const std::vector<Tensor>& v) { return L::cross_entropy(v[0], t, r); }, {x});
    require_gradcheck([ti, r](const std::vector<Tensor>& v) { return L::cross_entropy(v[0], ti, r); }, {x});
    require_gradcheck([t, r](const std::vector<Tensor>& v) { return L::nll_loss(v[0], t, r); }, {x});
    Tensor y = rand_leaf({4, 5}, 82, 0.0, 1.0);
    require_gradcheck([r](const std::vector<Tensor>& v) { return L::binary_cross_entropy_with_logits(v[0], v[1], r); },
                      {x, y});
    Tensor m = rand_leaf({4, 5}, 83);
    require_gradcheck([r](const std::vector<Tensor>& v) { return L::mse_loss(v[0], v[1], r); }, {x, m});
  }
}
