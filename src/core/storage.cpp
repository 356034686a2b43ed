#include "ms/core/storage.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace ms {
namespace {

constexpr std::int64_t kDefaultMaxAlloc = std::int64_t{64} << 30;

std::atomic<std::int64_t> g_live_bytes{0};
std::atomic<std::int64_t> g_peak_bytes{0};
std::atomic<std::int64_t> g_alloc_count{0};
std::atomic<std::int64_t> g_live_count{0};
std::atomic<std::int64_t> g_max_alloc{kDefaultMaxAlloc};

void update_peak(std::int64_t live) {
  std::int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
  while (live > peak &&
         !g_peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

}  // namespace

MemoryStats memory_stats() {
  return {g_live_bytes.load(), g_peak_bytes.load(), g_alloc_count.load(), g_live_count.load()};
}

void memory_stats_reset_peak() { g_peak_bytes.store(g_live_bytes.load()); }

void set_max_alloc_bytes(std::int64_t bytes) {
  MS_CHECK(bytes >= 0, ValueError, "set_max_alloc_bytes: bytes must be >= 0, got ", bytes);
  g_max_alloc.store(bytes == 0 ? kDefaultMaxAlloc : bytes);
}

std::int64_t max_alloc_bytes() { return g_max_alloc.load(); }

std::shared_ptr<Storage> Storage::allocate(std::int64_t nbytes, const char* what) {
  MS_CHECK(nbytes >= 0, ValueError, what, ": cannot allocate a negative byte count ", nbytes);
  const std::int64_t cap = g_max_alloc.load(std::memory_order_relaxed);
  MS_CHECK(nbytes <= cap, MemoryError, what, ": allocation of ", nbytes,
           " bytes is over the limit of ", cap, " bytes (ms::set_max_alloc_bytes)");
  // aligned_alloc needs a size that is a multiple of the alignment; keep at
  // least one line so that data() is never null.
  const std::size_t rounded = (static_cast<std::size_t>(nbytes) + kStorageAlignment - 1) /
                                  kStorageAlignment * kStorageAlignment +
                              (nbytes == 0 ? kStorageAlignment : 0);
  void* p = std::aligned_alloc(kStorageAlignment, rounded);
  MS_CHECK(p != nullptr, MemoryError, what, ": the system refused an allocation of ", nbytes,
           " bytes");
  std::shared_ptr<Storage> s;
  try {
    s.reset(new Storage(static_cast<std::byte*>(p), nbytes));
  } catch (...) {
    std::free(p);
    throw;
  }
  g_alloc_count.fetch_add(1, std::memory_order_relaxed);
  g_live_count.fetch_add(1, std::memory_order_relaxed);
  update_peak(g_live_bytes.fetch_add(nbytes, std::memory_order_relaxed) + nbytes);
  return s;
}

Storage::~Storage() {
  std::free(data_);
  g_live_bytes.fetch_sub(nbytes_, std::memory_order_relaxed);
  g_live_count.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace ms
