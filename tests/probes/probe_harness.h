// The probes' harness: one PASS/FAIL line per check, value comparison against the expected
// vector, expected errors. Each probe's exit status is its number of FAILs (finish()), and
// ctest fails its entry on that status or on any FAIL line. Standard headers only.
#pragma once
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace probe {

inline int g_fail = 0;

inline void verdict(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  if (!ok) ++g_fail;
}

inline void info(const std::string& what) { std::printf("INFO %s\n", what.c_str()); }

// A check whose code threw before it could compare: one FAIL naming the check and the error.
inline void threw(const std::string& what, const std::exception& e) {
  ++g_fail;
  std::printf("FAIL %s threw: %s\n", what.c_str(), e.what());
}

// |got - want| <= tol * max(1, |want|), element-wise, all finite (NaN allowed only where want is NaN).
inline bool close(const std::vector<double>& got, const std::vector<double>& want, double tol, double* worst = nullptr) {
  if (got.size() != want.size()) return false;
  bool ok = true;
  double w = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      if (!std::isnan(got[i])) ok = false;
      continue;
    }
    const double d = std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i]));
    if (!std::isfinite(got[i]) || !(d <= tol)) ok = false;
    if (std::isfinite(d)) w = std::max(w, d);
  }
  if (worst) *worst = w;
  return ok;
}

inline void print_vec(const char* label, const std::vector<double>& v) {
  std::printf("   %s:", label);
  for (std::size_t i = 0; i < v.size() && i < 24; ++i) std::printf(" %.12g", v[i]);
  if (v.size() > 24) std::printf(" ... (%zu values)", v.size());
  std::printf("\n");
}

// One verdict for `ok`; on a failure, both vectors.
inline void report(bool ok, const std::string& what, const std::vector<double>& got, const std::vector<double>& want) {
  verdict(ok, what);
  if (!ok) {
    if (got.size() != want.size()) std::printf("   size: got %zu, want %zu\n", got.size(), want.size());
    print_vec("got ", got);
    print_vec("want", want);
  }
}

// PASS when close(got, want, tol); the line gives the largest error and the tolerance.
inline void check(const std::string& what, const std::vector<double>& got, const std::vector<double>& want, double tol) {
  double worst = 0;
  const bool ok = close(got, want, tol, &worst);
  char buf[96];
  std::snprintf(buf, sizeof buf, " (max err %.3g, tol %.0e)", worst, tol);
  report(ok, what + buf, got, want);
}

inline std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Runs f; PASS when it throws a std::exception whose message mentions every string of `all`
// (case-insensitive). Returns the message ("" when nothing was thrown).
inline std::string expect_throw(const std::string& what, const std::function<void()>& f,
                                std::initializer_list<const char*> all = {}) {
  try {
    f();
  } catch (const std::exception& e) {
    const std::string msg = e.what(), l = lower(msg);
    bool ok = true;
    for (const char* s : all) ok = ok && l.find(lower(s)) != std::string::npos;
    verdict(ok, what + (ok ? "" : " (the error does not mention the expected words)"));
    std::printf("   error: %.400s\n", msg.c_str());
    return msg;
  }
  verdict(false, what + " (no error was thrown)");
  return "";
}

// The last line and the exit status: the number of FAILs, after `label` when one is given.
inline int finish(const std::string& label = "") {
  std::printf("%s%s%d failure(s)\n", label.c_str(), label.empty() ? "" : ": ", g_fail);
  return g_fail;
}

}  // namespace probe
