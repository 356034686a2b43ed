// ms/data/epoch_order.hpp — the sample order of each epoch, as the loaders
// (DataLoader, ByteTextLoader) draw it.
//
// Stage: data. Without shuffle the order is 0..n-1. With shuffle, epoch e is
// the (e+1)-th ms::randperm of n drawn from `ms::Generator(seed)`: any epoch is
// reproducible on its own (the generator is moved past the e earlier orders
// without drawing them), so a resumed run sees the orders of an unbroken one.
#pragma once

#include <cstdint>
#include <vector>

namespace ms::data {

/// The order of each epoch of n samples (see the header comment).
class EpochOrder {
 public:
  /// The order of no samples (for a loader to assign its own to).
  EpochOrder() = default;
  /// The orders of `n` samples; `shuffle` draws them from `Generator(seed)`.
  EpochOrder(std::int64_t n, bool shuffle, std::uint64_t seed);
  /// The order of epoch `epoch`. ValueError naming `api` when `epoch` is
  /// negative or too large to reach.
  std::vector<std::int64_t> operator()(std::int64_t epoch, const char* api) const;

 private:
  std::int64_t n_ = 0;
  bool shuffle_ = false;
  std::uint64_t seed_ = 0;
  std::uint64_t blocks_per_order_ = 0;  ///< Philox blocks one randperm of n consumes
};

}  // namespace ms::data
