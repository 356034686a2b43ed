// ms::Generator (see ms/core/random.hpp); the random tensor functions that
// draw from it are ops (src/ops/random.cpp).
#include "ms/core/random.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <string_view>
#include <vector>

#include "ms/core/error.hpp"

namespace ms {

// ------------------------------------------------------------------ Generator

Generator::Generator(const Generator& other) : in_trace_(detail::tracing_active()) {
  std::lock_guard<std::mutex> lock(other.mu_);
  seed_ = other.seed_;
  offset_ = other.offset_;
}

Generator& Generator::operator=(const Generator& other) {
  if (this == &other) return *this;
  std::uint64_t s = 0, o = 0;
  {
    std::lock_guard<std::mutex> lock(other.mu_);
    s = other.seed_;
    o = other.offset_;
  }
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = s;
  offset_ = o;
  return *this;
}

Generator& Generator::manual_seed(std::uint64_t seed) {
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = seed;
  offset_ = 0;
  return *this;
}

namespace {
std::uint64_t random_seed() {
  std::uint64_t s = 0;
  try {
    std::random_device rd;
    s = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  } catch (...) {  // no entropy source: the clock is the usual fallback
  }
  s ^= static_cast<std::uint64_t>(
      std::chrono::high_resolution_clock::now().time_since_epoch().count());
  // SplitMix64 finalizer spreads clock bits; kept non-negative as MindSpore's int64 seeds.
  s = (s ^ (s >> 30)) * 0xbf58476d1ce4e5b9ULL;
  s = (s ^ (s >> 27)) * 0x94d049bb133111ebULL;
  s ^= s >> 31;
  return s & static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
}
}  // namespace

std::uint64_t Generator::seed() {
  const std::uint64_t s = random_seed();
  manual_seed(s);
  return s;
}

std::uint64_t Generator::initial_seed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seed_;
}

std::uint64_t Generator::offset() const {
  std::lock_guard<std::mutex> lock(mu_);
  return offset_;
}

Tensor Generator::get_state() const {
  std::uint64_t s = 0, o = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = seed_;
    o = offset_;
  }
  return from_vector(
      std::vector<std::int64_t>{std::bit_cast<std::int64_t>(s), std::bit_cast<std::int64_t>(o)},
      Shape{2});
}

void Generator::set_state(const Tensor& state) {
  MS_CHECK(state.defined(), ValueError, "Generator::set_state: state is an undefined tensor");
  MS_CHECK(state.dtype() == int64, TypeError,
           "Generator::set_state: state must be the Int64 tensor of shape [2] made by get_state, "
           "got dtype ",
           state.dtype());
  MS_CHECK(state.shape() == Shape{2}, ShapeError,
           "Generator::set_state: state must have shape [2] ({seed, offset}), got ", state.shape());
  const std::vector<std::int64_t> v = state.to_vector<std::int64_t>();
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = std::bit_cast<std::uint64_t>(v[0]);
  offset_ = std::bit_cast<std::uint64_t>(v[1]);
}

Generator::Draw Generator::step(std::uint64_t blocks) {
  std::lock_guard<std::mutex> lock(mu_);
  const Draw d{seed_, offset_};
  offset_ += blocks;
  return d;
}

Generator& default_generator() {
  static Generator g = [] {
    Generator d(random_seed());  // MindSpore seeds its default generator randomly
    d.in_trace_ = false;         // lives for the process, even when first used in a trace
    return d;
  }();
  return g;
}
Generator& manual_seed(std::uint64_t seed) { return default_generator().manual_seed(seed); }
std::uint64_t seed() { return default_generator().seed(); }
std::uint64_t initial_seed() { return default_generator().initial_seed(); }
Tensor get_rng_state() { return default_generator().get_state(); }
void set_rng_state(const Tensor& state) { default_generator().set_state(state); }

}  // namespace ms
