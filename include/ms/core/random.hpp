// ms/core/random.hpp — ms::Generator (counter-based Philox4x32-10).
//
// Stage: core. The random tensor functions that draw from a Generator
// (uniform, normal, dropout, ...) are ops: ms/ops/random.hpp.
// A Generator is a seed and an offset, as MindSpore's: a random function
// reserves the Philox blocks it needs (the offset advances by that count) and
// computes element i from the block `offset + i / k` (k elements per 128-bit
// block: 4 for float32 draws, 2 for float64 and 64-bit integer draws), so the
// numbers depend only on seed, offset and index — never on the thread count or
// on how the work is chunked.
//
//   ms::manual_seed(42);                                   // the default generator
//   ms::Tensor w = ms::normal({256, 784}, 0.0, 0.02);      // float32
//   ms::Generator g(7);
//   ms::Tensor u = ms::uniform({3}, -1.0, 1.0, g, ms::float64);
//   ms::Tensor s = g.get_state();  ...  g.set_state(s);    // replays the same numbers
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ms/core/dtype.hpp"
#include "ms/core/shape.hpp"
#include "ms/core/std_parts.hpp"
#include "ms/core/tensor.hpp"

namespace ms {

/// The Philox4x32-10 block function of Random123 (Salmon et al., SC'11): maps a
/// 128-bit counter and a 64-bit key to 128 random bits.
/// Example: `ms::philox4x32_10({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5`.
constexpr std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> ctr,
                                                     std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * ctr[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * ctr[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

/// A random-number generator state: a seed (the Philox key) and an offset (the
/// number of 128-bit Philox blocks consumed so far). Thread-safe: every member
/// locks. Copying copies the state (the copy then draws the same numbers).
/// Example: `ms::Generator g; g.manual_seed(5); auto x = ms::uniform({4}, 0, 1, g);`
class Generator {
 public:
  /// Seed 0, offset 0 (as MindSpore's `Generator()`).
  Generator() : Generator(0) {}
  /// Seed `seed`, offset 0.
  explicit Generator(std::uint64_t seed) : seed_(seed), in_trace_(detail::tracing_active()) {}
  /// Copies the seed and offset (the copy draws the same numbers as `other` from here on).
  Generator(const Generator& other);
  /// Copies the seed and offset of `other`.
  Generator& operator=(const Generator& other);

  /// Sets the seed and resets the offset to 0; returns this generator.
  Generator& manual_seed(std::uint64_t seed);
  /// Seeds with a fresh random value (std::random_device); offset 0. Returns the seed.
  std::uint64_t seed();
  /// The seed set last (by the constructor, manual_seed, seed or set_state).
  std::uint64_t initial_seed() const;
  /// Philox blocks consumed since the seed was set.
  std::uint64_t offset() const;

  /// The state as an int64 tensor of shape [2]: {seed, offset} (bit patterns).
  Tensor get_state() const;
  /// Restores a state made by get_state. TypeError unless int64, ShapeError unless shape [2].
  void set_state(const Tensor& state);

  /// What a random function draws from: the key and its first block.
  struct Draw {
    /// The Philox key.
    std::uint64_t seed;
    /// The first 128-bit Philox block to use.
    std::uint64_t offset;
  };
  /// Returns the current seed and offset and advances the offset by `blocks`
  /// (MindSpore's `Generator._step`). Random functions call this once per call.
  Draw step(std::uint64_t blocks);

  /// True for a generator created while ms::jit traced the function that
  /// draws from it (a local of that function): it is gone when the graph runs,
  /// and a fresh one draws the same numbers on every eager call, so its draws
  /// are computed at trace time and become constants of the graph.
  bool created_in_trace() const { return in_trace_; }

 private:
  friend Generator& default_generator();
  mutable std::mutex mu_;
  std::uint64_t seed_ = 0;
  std::uint64_t offset_ = 0;
  bool in_trace_ = false;
};

/// The process-wide generator random functions use when none is given. Seeded
/// with a random value on first use (as MindSpore's); `ms::manual_seed` fixes it.
Generator& default_generator();
/// Seeds the default generator (offset reset to 0) and returns it.
/// Example: `ms::manual_seed(42);`
Generator& manual_seed(std::uint64_t seed);
/// Seeds the default generator with a random value and returns that seed.
std::uint64_t seed();
/// The default generator's seed.
std::uint64_t initial_seed();
/// The default generator's state (see Generator::get_state).
Tensor get_rng_state();
/// Restores the default generator's state.
void set_rng_state(const Tensor& state);

}  // namespace ms
