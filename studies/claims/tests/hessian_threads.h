#pragma once
// The Hessian study's determinism check, shared by its tests: the same bits for 1 and 2
// worker threads (every run single-threaded inside).
#include <catch2/catch.hpp>

#include "hessian_study.h"

/// Checks `o`, runs run_hessian (no Fashion-MNIST data) with 1 and with 2 threads, checks the
/// two CSVs are equal and returns the 1-thread result.
inline claims::HessianResult run_hessian_1_and_2_threads(claims::HessianOptions o) {
  claims::check_hessian_options(o);
  o.threads = 1;
  claims::HessianResult one = claims::run_hessian(o, {});
  o.threads = 2;
  const claims::HessianResult two = claims::run_hessian(o, {});
  CHECK(claims::hessian_csv(one) == claims::hessian_csv(two));
  return one;
}
