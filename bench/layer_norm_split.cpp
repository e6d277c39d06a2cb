// LayerNorm's row kernels at (65536, 256) float32, forward and backward timed apart, beside a
// triad in the same process (process CPU time, medians): what share of the triad's bandwidth
// each reaches, counting the 5 passes the data needs (forward: read x, write y; backward: read
// x and dy, write dx) and the triad's 3 (STREAM's 12 bytes an element).
//   layer_norm_split [REPS]     (default 7; 1 thread)
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <tapegrad/core/parallel.h>
#include <tapegrad/core/random.h>
#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/functional/kernels/layer_norm_rows.h>

namespace {
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  namespace tg = tapegrad;
  namespace kn = tapegrad::layers::functional::kernels;
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  tg::set_num_threads(1);
  const std::int64_t R = 65536, K = 256, n = R * K;
  tg::Generator gen(1);
  tg::Tensor x = tg::randn({R, K}, tg::Dtype::Float32, gen), g = tg::randn({R, K}, tg::Dtype::Float32, gen);
  tg::Tensor y = tg::Tensor::zeros({R, K}), gx = tg::Tensor::zeros({R, K}), a = tg::Tensor::zeros({R, K});
  std::vector<float> w(K, 1.5f), b(K, 0.25f);
  std::vector<double> mean(R), rstd(R), dw(K), db(K);
  const float *xp = x.data<float>(), *gp = g.data<float>();
  float *yp = y.data<float>(), *gxp = gx.data<float>(), *ap = a.data<float>();
  std::vector<double> tf, tb, tt;
  for (int r = 0; r < reps; ++r) {
    const double t0 = cpu_seconds();
    kn::ln_rows<float>().forward(xp, yp, R, K, 1, w.data(), b.data(), 1e-5, mean.data(), rstd.data(), nullptr);
    const double t1 = cpu_seconds();
    kn::ln_rows<float>().backward(gp, xp, gxp, R, K, 1, w.data(), mean.data(), rstd.data(), dw.data(), db.data());
    const double t2 = cpu_seconds();
    for (std::int64_t i = 0; i < n; ++i) ap[i] = yp[i] + 0.5f * gxp[i];
    const double t3 = cpu_seconds();
    tf.push_back(t1 - t0);
    tb.push_back(t2 - t1);
    tt.push_back(t3 - t2);
  }
  const double f = median(tf), bw = median(tb), t = median(tt), el = static_cast<double>(n);
  const double triad = 12.0 * el / t;
  std::printf("forward %.2f ms (%.1f GB/s over 2 passes), backward %.2f ms (%.1f GB/s over 3), triad %.2f ms (%.1f GB/s): "
              "LayerNorm fwd+bwd at %.0f%% of the triad (5 passes)  [check %.6g]\n",
              f * 1e3, 8.0 * el / f / 1e9, bw * 1e3, 12.0 * el / bw / 1e9, t * 1e3, triad / 1e9,
              100.0 * (20.0 * el / (f + bw)) / triad, dw[0] + ap[12345]);
  return 0;
}
