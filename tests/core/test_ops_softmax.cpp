// softmax, log_softmax, logsumexp: values and gradients against PyTorch 1.13, stability, gradcheck.
#include "test_ops_support.h"

#include <tapegrad/layers/losses.h>

using namespace ops_test;

namespace {
// x = torch.tensor([...]).reshape(2,3,4) (below); g = torch.linspace(-1, 1.3, 24).reshape(2,3,4)
const std::vector<double> kX = {0.5, -1.2, 3.0, 0.0,  2.2,  -0.7, 1.1, -3.0, 0.3, 0.9,  -0.4, 1.6,
                                -2.0, 0.1, 0.8, 2.5, 1.3, -1.1, 0.6, -0.2, 0.05, -0.9, 2.1,  0.4};
Tensor g24() { return Tensor::from_vector(seq(24, -1.0, 0.1), {2, 3, 4}, Dtype::Float64); }
}  // namespace

TEST_CASE("softmax and log_softmax over dim 1 and dim -1 match torch, with gradients", "[ops]") {
  {
    // y = torch.softmax(x, 1); y.backward(g)
    Tensor x = leaf(kX, {2, 3, 4});
    Tensor y = softmax(x, 1);
    require_close(y, {0.13712383573548126, 0.09246510048544423, 0.8453500625383077,  0.16658838420938754,
                      0.7506086629678667,  0.15244917796777663, 0.12643784161362287, 0.008293947273924768,
                      0.11226750129665204, 0.7550857215467791,  0.02821209584806948, 0.8251176685166877,
                      0.02787026057156576, 0.5991347344992725,  0.18221483300696684, 0.8405749276685566,
                      0.7556363115015106,  0.18045591418673476, 0.14918488744977265, 0.05649126901014341,
                      0.2164934279269236,  0.2204093513139928,  0.6686002795432605,  0.10293380332130006},
                  1e-12, 1e-15);
    y.backward(g24());
    require_close(x.grad(),
                  {-0.05348617592596201, -0.06149375311824321, -0.06183297251771564, -0.110516685454682,
                   0.007462951983764682, -0.040406387594119256, 0.041326864323543266, -0.0021847228649520645,
                   0.04602322394219733, 0.10190014071236245, 0.020506108194172434, 0.11270140831963407,
                   -0.013250894958237456, -0.14889088103856987, -0.1083365903698386, -0.08821291717000354,
                   -0.05701220577765391, 0.027337294099368425, -0.029024543239489744, 0.0166681132753782,
                   0.07026310073589133, 0.12155358693920147, 0.13736113360932836, 0.07154480389462527},
                  1e-10, 1e-14);
  }
  {
    // y = torch.log_softmax(x, -1); y.backward(g)
    Tensor x = leaf(kX, {2, 3, 4});
    Tensor y = log_softmax(x, -1);
    require_close(y, {-2.6370344381255597, -4.33703443812556,   -0.13703443812555963, -3.1370344381255597,
                      -0.3317546033360454, -3.2317546033360456, -1.4317546033360455,  -5.531754603336045,
                      -1.94419450271845,   -1.34419450271845,   -2.64419450271845,    -0.64419450271845,
                      -4.750377691587021,  -2.6503776915870207, -1.9503776915870206,  -0.25037769158702067,
                      -0.5935662736452109, -2.9935662736452113, -1.293566273645211,   -2.093566273645211,
                      -2.358370701256506,  -3.308370701256506,  -0.3083707012565056,  -2.008370701256506});
    y.backward(g24());
    require_close(x.grad(),
                  {-0.756651086263493,  -0.85554416286421,    2.1645966719387473,   -0.5524014228110437,
                   0.6917941442190736,  -0.42892132653505577, 0.03000091670103613,  -0.29287373438505404,
                   -0.17137951088856995, -0.04785006871369143, 0.014212514280058163, 0.20501706532220326,
                   0.18789220059330766, 0.20112565277766367,  0.20089151558164411,  -0.5899093689526155,
                   -1.0570617684417811, 0.5496747478928273,   -0.022872521682792045, 0.5302595422317452,
                   0.5649587382357707,  0.9317516971803644,   -2.179357498547452,   0.6826470631313176},
                  1e-10, 1e-14);
  }
  // torch.softmax(x, -1)[0, 0] and torch.log_softmax(x, 1)[0, 0] (spot values of the other pairings)
  require_close(narrow(softmax(Tensor::from_vector(kX, {2, 3, 4}, Dtype::Float64), -1), 0, 0, 1).to(Dtype::Float64),
                {0.07157320992250206, 0.013075246216408829, 0.8719401976290433, 0.043411346232045976,
                 0.7176634134550408, 0.03948815192496906, 0.23888939816724236, 0.003959036452747805,
                 0.14310244555715027, 0.26074965643154274, 0.07106257140029111, 0.5250853266110158},
                1e-12, 1e-15);
  require_close(narrow(log_softmax(Tensor::from_vector(kX, {2, 3, 4}, Dtype::Float64), 1), 0, 0, 1),
                {-1.9868708509571085, -2.380923997705562, -0.16800446221997503, -1.7922292743128583,
                 -0.28687085095710835, -1.8809239977055618, -2.068004462219975, -4.792229274312858,
                 -2.1868708509571086, -0.28092399770556176, -3.568004462219975, -0.19222927431285827});
}

TEST_CASE("softmax/log_softmax are stable for logits of magnitude 1000 (float64 and float32)", "[ops]") {
  const std::vector<double> big = {1000, 0, -1000, 1000, 1000, 999, -1000, -1000, -1001};
  // torch.softmax(big, 1), torch.log_softmax(big, 1)
  const std::vector<double> sm = {1.0, 0.0, 0.0, 0.4223187982515182, 0.4223187982515182, 0.15536240349696362,
                                  0.4223187982515182, 0.4223187982515182, 0.15536240349696362};
  const std::vector<double> lsm = {0.0, -1000.0, -2000.0, -0.8619948040582511, -0.8619948040582511,
                                   -1.8619948040582512, -0.8619948040582511, -0.8619948040582511,
                                   -1.8619948040582512};
  for (Dtype dt : {Dtype::Float64, Dtype::Float32}) {
    Tensor b = Tensor::from_vector(big, {3, 3}, dt);
    const double tol = dt == Dtype::Float64 ? 1e-12 : 2e-7;
    require_close(softmax(b, 1), sm, tol, 1e-30);
    require_close(log_softmax(b, 1), lsm, tol, tol);
  }
  Tensor b = leaf(big, {3, 3});
  Tensor y = log_softmax(b, 1);
  sum(y).backward();
  for (double v : b.grad().to_vector()) REQUIRE(std::isfinite(v));
}

TEST_CASE("logsumexp over dim 0 matches torch and its gradient is softmax", "[ops]") {
  // torch.logsumexp(x, 0)
  Tensor x = leaf(kX, {2, 3, 4});
  Tensor y = logsumexp(x, 0);
  REQUIRE(y.shape() == Shape{3, 4});
  require_close(y, {0.5788897342925495, 0.34100845383299216, 3.105083319768696, 2.5788897342925496,
                    2.541153874732088, -0.18698474760004746, 1.5740769841801066, -0.14096717371202866,
                    0.8759394198788437, 1.052977610526074, 2.1788897342925497, 1.8632824673380313});
  REQUIRE(logsumexp(x, 0, true).shape() == Shape{1, 3, 4});
  sum(y).backward();
  NoGradGuard ng;
  require_close(x.grad(), softmax(x.detach(), 0).to_vector());
  REQUIRE(logsumexp(Tensor::from_vector({1000, 1000}, {2}, Dtype::Float64), 0).item() == Approx(1000 + std::log(2.0)).epsilon(1e-15));
}

TEST_CASE("gradcheck: softmax, log_softmax, logsumexp over every axis", "[ops][gradcheck]") {
  Tensor x = rand_leaf({2, 3, 4}, 41, -2.0, 2.0);
  for (std::int64_t d : {0, 1, 2, -1}) {
    INFO("dim " << d);
    require_gradcheck([d](const std::vector<Tensor>& v) { return softmax(v[0], d); }, {x});
    require_gradcheck([d](const std::vector<Tensor>& v) { return log_softmax(v[0], d); }, {x});
    require_gradcheck([d](const std::vector<Tensor>& v) { return logsumexp(v[0], d); }, {x});
  }
  Tensor m = rand_leaf({5, 3}, 42, -3.0, 3.0);
  require_gradcheck([](const std::vector<Tensor>& v) { return softmax(v[0], 1); }, {m});
}

TEST_CASE("softmax axis errors name the axis, the rank and the shape", "[ops]") {
  Tensor x = Tensor::zeros({2, 3}, Dtype::Float64);
  REQUIRE_THROWS_WITH(softmax(x, 2),
                      Catch::Contains("softmax") && Catch::Contains("axis 2") && Catch::Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(log_softmax(Tensor::from_int64({1, 2}, {2}), 0), Catch::Contains("int64"));
}

TEST_CASE("large inputs: the threaded row loops give the same bits as one thread", "[ops]") {
  Generator gen(7);
  Tensor x = randn({20000, 5}, Dtype::Float32, gen);
  Tensor t = Tensor::from_int64(std::vector<std::int64_t>(20000, 3), {20000});
  auto run = [&](int threads) {
    set_num_threads(threads);
    Tensor xs = x.clone();
    xs.requires_grad_();
    Tensor l = tapegrad::layers::cross_entropy(xs, t);
    l.backward();
    std::vector<std::vector<double>> r = {softmax(x, 1).to_vector(), log_softmax(x, 0).to_vector(),
                                          argmax(x, 1).to_vector(), max(x, 0).to_vector(), l.to_vector(),
                                          xs.grad().to_vector()};
    return r;
  };
  const int before = get_num_threads();
  auto one = run(1);
  auto two = run(2);
  set_num_threads(before);
  for (std::size_t i = 0; i < one.size(); ++i) {
    INFO("result " << i);
    REQUIRE(one[i] == two[i]);
  }
  // rows of a softmax sum to 1
  auto sm = one[0];
  for (std::size_t r = 0; r < 20000; r += 997) {
    double s = 0;
    for (std::size_t c = 0; c < 5; ++c) s += sm[r * 5 + c];
    REQUIRE(s == Approx(1.0).epsilon(1e-6));
  }
}
