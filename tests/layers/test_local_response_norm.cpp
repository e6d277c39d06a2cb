// LocalResponseNorm against torch.nn.LocalResponseNorm, gradcheck, errors.
#include <catch2/catch.hpp>

#include <cmath>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/local_response_norm.h>
#include "test_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using tapegrad::test::require_close;

namespace {
// x[i] = 2·sin(0.7·i), grad_output[i] = cos(1.3·i), row-major, float64.
Tensor pattern(const Shape& s, double a, double scale) {
  std::vector<double> v(static_cast<std::size_t>(numel_of(s)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * (scale == 2 ? std::sin(a * i) : std::cos(a * i));
  return Tensor::from_vector(v, s, Dtype::Float64);
}

// lrn's output and input gradient on x = pattern(s, 0.7, 2) with grad_output pattern(s, 1.3, 1)
// are PyTorch's y and gx to 1e-13.
void require_pytorch_values(LocalResponseNorm& lrn, const Shape& s, const std::vector<double>& y,
                            const std::vector<double>& gx) {
  Tensor x = pattern(s, 0.7, 2);
  x.requires_grad_();
  Tensor out = lrn.forward(x);
  require_close(out.to_vector(), y, 1e-13);
  out.backward(pattern(s, 1.3, 1));
  require_close(x.grad().to_vector(), gx, 1e-13);
}
}  // namespace

TEST_CASE("LocalResponseNorm matches PyTorch: odd window on (N, C, L)", "[norms]") {
  // x = 2·sin(0.7·i) of shape (2, 5, 3); y = nn.LocalResponseNorm(3, 0.5, 0.75, 1.0)(x);
  // y.backward(cos(1.3·i)); PyTorch 1.13, float64.
  const std::vector<double> y{
      0.0, 1.0279056549585142, 1.3068788827629945, 1.025311066028155, 0.3991242127364564, -0.4179212802499034,
      -1.035175549585369, -1.1656998600231658, -0.7510780470337886, 0.02004400533888457, 0.7815533523499704,
      1.1724174498028808, 1.2692328021012824, 0.5079805288378069, -0.48369272288204884, -1.2873468771814423,
      -1.1922396658498076, -0.7612409636082517, 0.040082177675884914, 0.7964575561903331, 1.1752838215016466,
      1.0047150272630951, 0.3611885610215885, -0.4551469189365074, -1.0540243220184227, -1.157675082036646,
      -0.7197418177895395, 0.07341801478579942, 0.8282590786874665, 1.2264532646156512};
  const std::vector<double> gx{
      0.7389877936281417, 0.11768249063350429, -0.1483459963488589, -0.25872657711877245, 0.13709025351628523,
      0.46927548302629823, -0.13919262666491883, -0.07140387306649043, -0.36166125979730773, 0.3933160213104419,
      0.2878214052111173, -0.04417509937225075, -0.3784692178276636, -0.3288173983227185, 0.4676154440313347,
      0.2837593867482554, 0.06305452884080454, -0.372460791733921, -0.07995840699685518, 0.3999679580406347,
      0.005903308938521035, 0.00416013752490213, -0.5523679630194669, 0.1526653573349029, 0.208632166320989,
      0.11788910499025983, -0.1618174128322555, -0.6095112223918273, 0.2160348898390924, 0.1675383314391092};
  LocalResponseNorm lrn(3, 0.5, 0.75, 1.0);
  require_pytorch_values(lrn, {2, 5, 3}, y, gx);
  // float32 to float32 precision
  require_close(lrn.forward(pattern({2, 5, 3}, 0.7, 2).to(Dtype::Float32)).to_vector(), y, 2e-6);
}

TEST_CASE("LocalResponseNorm matches PyTorch: even window on (N, C, H, W)", "[norms]") {
  // x = 2·sin(0.7·i) of shape (1, 6, 2, 2); nn.LocalResponseNorm(4, 0.3, 0.6, 2.0); grad cos(1.3·i).
  const std::vector<double> y{
      0.0, 0.8113704560614537, 1.1321504028933467, 0.9931616928650431, 0.4228701952836399, -0.44178924678920095,
      -0.9716590535150964, -1.0579977295046126, -0.7518640005165944, 0.020998487427444843, 0.7258238509075831,
      1.0145900675691006, 0.950315828209129, 0.3995957561103154, -0.4336788264141766, -0.91948192410234,
      -1.0294405174984174, -0.7385579613957365, 0.041926423262470654, 0.737361261830562, 1.0679025986559154,
      1.010530694506234, 0.3920010996345214, -0.4507291666293378};
  const std::vector<double> gx{
      0.6531791845641552, 0.17923535417512876, -0.46385483075004447, -0.42014334127372577, 0.30086287070285844,
      0.6048285881407128, -0.017611040026483164, -0.5512910876989956, -0.32893689015286826, 0.4042326296812158,
      0.4920330967953891, -0.13706380672437163, -0.583507779785598, -0.2320444103816303, 0.4657966325449727,
      0.40562749542659776, -0.19091917474231418, -0.5935525726305302, -0.098551173322089, 0.5011633927325451,
      0.28143085995667594, -0.3463248712320564, -0.6026607946012152, 0.048672357529879945};
  LocalResponseNorm lrn(4, 0.3, 0.6, 2.0);
  require_pytorch_values(lrn, {1, 6, 2, 2}, y, gx);
}

TEST_CASE("LocalResponseNorm gradcheck; same in train and eval; errors", "[norms][gradcheck]") {
  Generator g(5);
  Tensor x = uniform({2, 4, 3}, -2, 2, Dtype::Float64, g);
  x.requires_grad_();
  for (std::int64_t size : {1, 2, 3, 5}) {
    LocalResponseNorm lrn(size, 0.8, 0.75, 1.0);
    for (bool train : {true, false}) {
      lrn.train(train);
      auto r = gradcheck([&](const std::vector<Tensor>& v) { return lrn.forward(v[0]); }, {x});
      INFO("size " << size << ": " << r.message);
      REQUIRE(r.ok);
    }
  }
  LocalResponseNorm lrn(2);
  REQUIRE_THROWS_WITH(lrn.forward(Tensor::zeros({2, 3})), Catch::Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(LocalResponseNorm(0), Catch::Contains("size"));
  REQUIRE(lrn.parameters().empty());
  REQUIRE(lrn.extra_repr() == "2, alpha=0.0001, beta=0.75, k=1");
}
