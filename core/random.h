#pragma once
// Seeded random numbers. Same seed => same sequence on every run of the same build.
#include <cstdint>
#include <random>
#include <string>

#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// A seeded generator (mt19937_64). Its full state can be saved and restored, so a
/// resumed training run draws exactly the numbers the uninterrupted one would.
class Generator {
 public:
  /// A generator seeded with `seed` (default 0).
  explicit Generator(std::uint64_t seed = 0) : engine_(seed) {}
  /// Reseeds: the sequence restarts as for Generator(seed).
  void manual_seed(std::uint64_t seed) { engine_.seed(seed); }
  /// Uniform in [0, 1).
  double uniform();
  /// Standard normal (Box–Muller).
  double normal();
  /// Uniform integer in [0, n). Throws for n <= 0.
  std::int64_t randint(std::int64_t n);
  /// The engine's next 64 raw bits.
  std::uint64_t next_u64() { return engine_(); }
  /// The engine's full state as text, and back. set_state throws on malformed text.
  std::string get_state() const;
  /// Restores a state from get_state(). Throws std::invalid_argument for malformed text,
  /// text after the state, or all 312 state words 0 (a degenerate engine); nothing changes then.
  void set_state(const std::string& state);
  /// The underlying engine (for std:: distributions).
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

/// The process-wide generator used when none is passed (thread-unsafe, like torch's).
Generator& default_generator();
/// Seeds the default generator.
void manual_seed(std::uint64_t seed);

/// Samples from N(0, 1).
Tensor randn(const Shape& shape, Dtype dtype = Dtype::Float32, Generator& gen = default_generator());
/// Samples from U[lo, hi).
Tensor uniform(const Shape& shape, double lo, double hi, Dtype dtype = Dtype::Float32,
               Generator& gen = default_generator());

}  // namespace tapegrad
