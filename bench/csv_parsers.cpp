// read_csv's tokenizer against Debian's libcsv (RFC 4180, libcsv-dev) on one numeric CSV.
// Both get the text in memory and produce the same float32 matrix with the same number
// conversion (std::from_chars, as read_csv); what differs is only the tokenizer.
//
//   build/bench/csv_parsers [rows=500000] [cols=12]
// writes a ~rows·cols·9-byte CSV (random floats, "%.6g", a header, integer labels in the
// last column), checks that both parsers agree on it and on a file with quotes, CRLF and
// empty lines, then reports the best of 5 runs of each, in MB/s.
#include <csv.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/data/csv.h>

using namespace tapegrad;

namespace {

struct LibcsvState {
  std::vector<float> x;
  std::vector<std::int64_t> y;
  std::size_t field = 0, cols = 0, rows = 0;
  bool header = true;
  std::string error;
};

void on_field(void* s, std::size_t len, void* data) {
  auto* st = static_cast<LibcsvState*>(data);
  const char* p = static_cast<const char*>(s);
  if (!st->header && st->error.empty()) {
    if (st->field + 1 == st->cols) {
      std::int64_t v = 0;
      const auto r = std::from_chars(p, p + len, v);
      if (r.ec != std::errc() || r.ptr != p + len) st->error = "bad label";
      st->y.push_back(v);
    } else {
      double v = 0;
      const auto r = std::from_chars(p, p + len, v);
      if (len == 0 || r.ec != std::errc() || r.ptr != p + len) st->error = "bad value";
      st->x.push_back(static_cast<float>(v));
    }
  }
  ++st->field;
}

void on_row(int, void* data) {
  auto* st = static_cast<LibcsvState*>(data);
  if (st->header) {
    st->cols = st->field;
    st->header = false;
  } else {
    if (st->field != st->cols && st->error.empty()) st->error = "ragged row";
    ++st->rows;
  }
  st->field = 0;
}

// libcsv + the same conversion into the same tensors as read_csv.
data::Dataset parse_libcsv(const std::string& text) {
  csv_parser p;
  if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI) != 0) throw std::runtime_error("csv_init failed");
  LibcsvState st;
  st.x.reserve(text.size() / 8);
  if (csv_parse(&p, text.data(), text.size(), on_field, on_row, &st) != text.size() ||
      csv_fini(&p, on_field, on_row, &st) != 0) {
    const std::string e = csv_strerror(csv_error(&p));
    csv_free(&p);
    throw std::runtime_error("libcsv: " + e);
  }
  csv_free(&p);
  if (!st.error.empty()) throw std::runtime_error("libcsv: " + st.error);
  const auto n = static_cast<std::int64_t>(st.rows), d = static_cast<std::int64_t>(st.cols) - 1;
  Tensor X = Tensor::empty({n, d}, Dtype::Float32);
  std::copy(st.x.begin(), st.x.end(), X.data<float>());
  return data::Dataset::make(X, Tensor::from_int64(st.y, {n}));
}

template <class F>
double best_seconds(F f) {
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void require_same(const data::Dataset& a, const data::Dataset& b, const char* what) {
  if (a.X.to_vector() != b.X.to_vector() || a.y.to_vector() != b.y.to_vector())
    throw std::runtime_error(std::string("the parsers disagree on ") + what);
}

}  // namespace

int main(int argc, char** argv) {
  const long rows = argc > 1 ? std::atol(argv[1]) : 500000, cols = argc > 2 ? std::atol(argv[2]) : 12;
  Generator g(0);
  std::string text = "f0";
  for (long c = 1; c < cols - 1; ++c) text += ",f" + std::to_string(c);
  text += ",label\n";
  char buf[32];
  for (long r = 0; r < rows; ++r) {
    for (long c = 0; c < cols - 1; ++c) {
      std::snprintf(buf, sizeof buf, "%.6g,", g.normal() * 100);
      text += buf;
    }
    text += std::to_string(g.randint(10)) + "\n";
  }
  // quotes, CRLF, an empty line: both must read this the same
  const std::string tricky = "\"a\",\"b, \"\"q\"\"\",label\r\n\"1.5\",2,0\r\n\r\n3,\"4\",\"1\"\r\n";
  require_same(data::parse_csv(tricky), parse_libcsv(tricky), "quotes/CRLF");
  require_same(data::parse_csv(text), parse_libcsv(text), "the benchmark file");

  const double mb = static_cast<double>(text.size()) / 1e6;
  const double own = best_seconds([&] { data::parse_csv(text); });
  const double lib = best_seconds([&] { parse_libcsv(text); });
  std::printf("%.1f MB, %ld rows x %ld columns\n", mb, rows, cols);
  std::printf("read_csv tokenizer: %.3f s  (%.0f MB/s)\n", own, mb / own);
  std::printf("libcsv tokenizer:   %.3f s  (%.0f MB/s)\n", lib, mb / lib);
  return 0;
}
