// libFuzzer target for data::parse_csv (read_csv's in-memory parser).
//
// The first input byte picks the options (delimiter, header, task, label column); the
// rest is the CSV text. Contract checked: any input either gives a valid Dataset or throws
// std::invalid_argument (anything else, a crash or a sanitizer report is a bug). A parsed
// dataset has X (N, D) float32 of finite values, y (N) with class indices >= 0 (below
// the number of class names, which are sorted and distinct, when there are any) or finite
// float targets; and writing it back as plain CSV and parsing that gives the same values.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include <tapegrad/data/csv.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tapegrad;
  using namespace tapegrad::data;
  if (size < 1) return 0;
  const std::uint8_t o = data[0];
  CsvOptions opt;
  static const char kDelims[4] = {',', ';', '\t', '|'};
  opt.delimiter = kDelims[o & 3];
  opt.header = (o & 4) != 0;
  opt.task = (o & 8) ? CsvTask::Regression : CsvTask::Classification;
  opt.label = (o & 16) ? CsvColumn(std::int64_t{0}) : CsvColumn(std::int64_t{-1});
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  Dataset d;
  try {
    d = parse_csv(text, opt, "<fuzz>");
  } catch (const std::invalid_argument&) {
    return 0;
  }
  const std::int64_t n = d.size(), f = d.num_features();
  if (n < 1 || f < 1 || d.X.dim() != 2 || d.X.dtype() != Dtype::Float32 || d.y.dim() != 1 || d.y.size(0) != n)
    std::abort();
  const float* x = d.X.data<float>();
  for (std::int64_t i = 0; i < n * f; ++i)
    if (!std::isfinite(x[i])) std::abort();
  for (std::size_t c = 1; c < d.class_names.size(); ++c)
    if (!(d.class_names[c - 1] < d.class_names[c])) std::abort();
  // write back: label first, then the features, as %.9g (exact for float32)
  std::string back = "label";
  for (std::int64_t j = 0; j < f; ++j) back += ",f" + std::to_string(j);
  back += '\n';
  char buf[64];
  for (std::int64_t i = 0; i < n; ++i) {
    if (opt.task == CsvTask::Regression) {
      const float v = d.y.data<float>()[i];
      if (!std::isfinite(v)) std::abort();
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
      back += buf;
    } else {
      const std::int64_t v = d.y.data<std::int64_t>()[i];
      if (v < 0 || (!d.class_names.empty() && v >= static_cast<std::int64_t>(d.class_names.size()))) std::abort();
      back += std::to_string(v);
    }
    for (std::int64_t j = 0; j < f; ++j) {
      std::snprintf(buf, sizeof buf, ",%.9g", static_cast<double>(x[i * f + j]));
      back += buf;
    }
    back += "\r\n";
  }
  CsvOptions again;
  again.label = std::int64_t{0};
  again.task = opt.task;
  const Dataset e = parse_csv(back, again, "<fuzz: written back>");
  if (e.size() != n || e.num_features() != f) std::abort();
  for (std::int64_t i = 0; i < n * f; ++i)
    if (e.X.data<float>()[i] != x[i]) std::abort();
  if (opt.task == CsvTask::Regression) {
    for (std::int64_t i = 0; i < n; ++i)
      if (e.y.data<float>()[i] != d.y.data<float>()[i]) std::abort();
  } else {
    for (std::int64_t i = 0; i < n; ++i)
      if (e.y.data<std::int64_t>()[i] != d.y.data<std::int64_t>()[i]) std::abort();
  }
  return 0;
}
