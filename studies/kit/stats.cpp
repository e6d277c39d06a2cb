#include "kit/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace studies::kit {

MeanStd mean_std(const std::vector<double>& v) {
  MeanStd m;
  m.n = static_cast<int>(v.size());
  if (v.empty()) {
    m.mean = std::numeric_limits<double>::quiet_NaN();
    return m;
  }
  double s = 0;
  for (double x : v) s += x;
  m.mean = s / m.n;
  if (m.n > 1) {
    double q = 0;
    for (double x : v) q += (x - m.mean) * (x - m.mean);
    m.std = std::sqrt(q / (m.n - 1));
  }
  return m;
}

std::string fmt_mean_std(const MeanStd& m, const MeanStdFormat& format) {
  if (m.n == 0) return "—";
  const char* spec = format.notation == Notation::Scientific ? ".*e" : format.notation == Notation::General ? ".*g" : ".*f";
  const std::string f = std::string(format.sign ? "%+" : "%") + spec + " ± %" + spec;
  char buf[128];
  std::snprintf(buf, sizeof buf, f.c_str(), format.digits, format.scale * m.mean, format.digits,
                format.scale * m.std);
  return buf;
}

namespace {
Band band_impl(const std::vector<const std::vector<double>*>& curves, const std::vector<bool>& crashed,
               bool skip_crashed, bool log10_values) {
  std::size_t len = 0;
  for (auto* c : curves) len = std::max(len, c->size());
  Band b;
  b.mean.resize(len);
  b.std.resize(len);
  b.count.resize(len);
  std::vector<double> vals;
  for (std::size_t e = 0; e < len; ++e) {
    vals.clear();
    for (std::size_t i = 0; i < curves.size(); ++i) {
      if (skip_crashed && i < crashed.size() && crashed[i]) continue;
      if (e >= curves[i]->size()) continue;
      const double v = (*curves[i])[e];
      vals.push_back(log10_values ? std::log10(v > 0 ? v : 1e-30) : v);
    }
    const MeanStd m = mean_std(vals);
    b.mean[e] = m.mean;
    b.std[e] = m.std;
    b.count[e] = m.n;
  }
  return b;
}

}  // namespace

Band band(const std::vector<const std::vector<double>*>& curves, const std::vector<bool>& crashed, bool skip_crashed) {
  return band_impl(curves, crashed, skip_crashed, false);
}

Band log10_band(const std::vector<const std::vector<double>*>& curves, const std::vector<bool>& crashed,
                bool skip_crashed) {
  return band_impl(curves, crashed, skip_crashed, true);
}

int epochs_to_reach(const std::vector<double>& curve, double target) {
  for (std::size_t e = 0; e < curve.size(); ++e)
    if (curve[e] <= target) return static_cast<int>(e) + 1;
  return 0;
}

double rise_fraction(const std::vector<double>& curve) {
  if (curve.size() < 2) return 0.0;
  int ups = 0;
  for (std::size_t e = 1; e < curve.size(); ++e)
    if (curve[e] > curve[e - 1]) ++ups;
  return static_cast<double>(ups) / static_cast<double>(curve.size() - 1);
}

}  // namespace studies::kit
