#pragma once
// Summary statistics over seeds.
#include <string>
#include <vector>

namespace studies::kit {

/// Mean and sample standard deviation (divides by n - 1; 0 for n = 1). n = 0 gives NaN mean.
struct MeanStd {
  double mean = 0, std = 0;
  int n = 0;
};
MeanStd mean_std(const std::vector<double>& v);

/// printf's conversions for fmt_mean_std: %f, %e, %g.
enum class Notation { Fixed, Scientific, General };
/// How fmt_mean_std prints a mean ± std.
struct MeanStdFormat {
  double scale = 1;                     ///< both numbers are multiplied by it (100: fractions as percent)
  int digits = 2;                       ///< printf precision of both numbers (< 0: printf's default 6)
  Notation notation = Notation::Fixed;  ///< printf conversion of both numbers
  bool sign = false;                    ///< the mean with its sign (printf "%+"), e.g. for a difference
};
/// "MEAN ± STD" (e.g. "0.87 ± 0.01" with the default format), or "—" when m.n == 0.
std::string fmt_mean_std(const MeanStd& m, const MeanStdFormat& format = {});

/// Per-epoch mean ± std over several loss curves; at each epoch only curves that reached it
/// count (a crashed run's curve stops at its crash). count[e] says how many did.
struct Band {
  std::vector<double> mean, std;
  std::vector<int> count;
};
/// `skip_crashed`: leave out every curve whose flag in `crashed` is set.
Band band(const std::vector<const std::vector<double>*>& curves, const std::vector<bool>& crashed, bool skip_crashed);
/// The same over log10 of the losses (values <= 0 count as 1e-30): for log-scale plots,
/// 10^mean is the geometric mean and 10^(mean ± std) the ±1 std band.
Band log10_band(const std::vector<const std::vector<double>*>& curves, const std::vector<bool>& crashed,
                bool skip_crashed);

/// First 1-based epoch whose loss is <= target, 0 when never.
int epochs_to_reach(const std::vector<double>& curve, double target);
/// Fraction of epoch-to-epoch changes that are increases (0 for a monotone descent);
/// a simple measure of how jagged a loss curve is. 0 for fewer than 2 epochs.
double rise_fraction(const std::vector<double>& curve);

}  // namespace studies::kit
