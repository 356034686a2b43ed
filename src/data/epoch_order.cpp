#include "ms/data/epoch_order.hpp"

#include <algorithm>
#include <numeric>

#include "ms/core/error.hpp"
#include "ms/core/random.hpp"
#include "ms/ops/random.hpp"

namespace ms::data {

EpochOrder::EpochOrder(std::int64_t n, bool shuffle, std::uint64_t seed)
    : n_(n), shuffle_(shuffle), seed_(seed) {
  if (shuffle_) {
    // Measured rather than assumed: how far one randperm of n moves a generator.
    Generator probe(seed_);
    (void)randperm(n_, probe);
    blocks_per_order_ = probe.offset();
  }
}

std::vector<std::int64_t> EpochOrder::operator()(std::int64_t e, const char* api) const {
  MS_CHECK(e >= 0, ValueError, api, ": epoch must be >= 0, got ", e);
  std::vector<std::int64_t> out(static_cast<std::size_t>(n_));
  if (!shuffle_) {
    std::iota(out.begin(), out.end(), std::int64_t{0});
    return out;
  }
  std::uint64_t skip = 0;
  MS_CHECK(!__builtin_mul_overflow(static_cast<std::uint64_t>(e), blocks_per_order_, &skip),
           ValueError, api, ": epoch ", e, " is too large");
  Generator gen(seed_);
  (void)gen.step(skip);
  const Tensor perm = randperm(n_, gen);
  std::copy_n(perm.data<std::int64_t>(), n_, out.begin());
  return out;
}

}  // namespace ms::data
