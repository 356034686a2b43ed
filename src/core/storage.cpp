#include "ms/core/storage.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

namespace ms {
namespace {

constexpr std::int64_t kDefaultMaxAlloc = std::int64_t{64} << 30;

std::atomic<std::int64_t> g_live_bytes{0};
std::atomic<std::int64_t> g_peak_bytes{0};
std::atomic<std::int64_t> g_alloc_count{0};
std::atomic<std::int64_t> g_live_count{0};
std::atomic<std::int64_t> g_max_alloc{kDefaultMaxAlloc};
std::atomic<std::uint64_t> g_serial{1};

std::shared_ptr<StorageSource>& thread_source() {
  thread_local std::shared_ptr<StorageSource> source;
  return source;
}

// Blocks of kHugeMin bytes and more are mapped directly, their size rounded up
// to a multiple of kHugePage and their start aligned to one, with
// madvise(MADV_HUGEPAGE) (transparent huge pages, in the "madvise" mode that
// Debian's kernels default to): writing a fresh 64 MiB result then takes 32
// page faults instead of 16384. On the 2-core VM this project is measured on a
// 4 KiB fault costs ~16-20 µs, so a fresh 64 MiB block cost ~290 ms before a
// byte of arithmetic, 4.4 ms with huge pages (measured with an ad-hoc program).
// kHugeMin is 1 MiB: a weight matrix of 1-2 MiB in one physically contiguous
// huge page spreads evenly over the L2's sets, where 4 KiB pages land where
// they may. The MLP 784-512-256-10 at batch 1 (2.1 MB of weights, about one
// core's L2; BM_OnnxMlp_Jit and BM_OnnxMlp_GraphCell) ran in one of two modes
// per process, ~29 or ~38 us: in the slow one in 4 of 12 processes with a
// 2 MiB threshold, in 2 of 24 with 1 MiB. The rounding wastes less than 2 MiB
// per block (at most half of a block below 2 MiB). Kernels without THP ignore
// the advice. Blocks below kHugeMin come from aligned_alloc.
//
// Freed blocks go to a per-thread cache, in two pools. Small blocks (up to
// kSmallMaxBlock): the many short-lived results of small ops do not each pay
// malloc + free (glibc also consolidates its fast bins on every mid-size
// request). Large blocks (up to kLargeMaxBlock): the same multi-MB results
// come back every call (a jitted function's returned gradients, an eager
// conv's output), and glibc hands such blocks back to the kernel when they are
// freed (munmap, or trimming the heap top), so that each call first-touches
// fresh pages again. A block is reused for a request of exactly its size (for
// mapped blocks: the same number of huge pages). Each pool is bounded in
// blocks and bytes per thread and evicts its oldest block; cached blocks are
// not live memory (memory_stats) and are returned to the system by
// ms::storage_cache_clear() or at thread exit. Under AddressSanitizer both
// are off (every block from aligned_alloc, nothing cached) so that every use
// after free is still caught.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheEnabled = false;
#else
constexpr bool kCacheEnabled = true;
#endif
constexpr bool kHugeEnabled = kCacheEnabled;
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kHugeMin = std::size_t{1} << 20;  // see above
constexpr std::size_t kSmallMaxBlock = std::size_t{1} << 20;
constexpr std::size_t kSmallMaxBytes = std::size_t{32} << 20;
constexpr std::size_t kSmallMaxCount = 32;
constexpr std::size_t kLargeMaxBlock = std::size_t{64} << 20;
constexpr std::size_t kLargeMaxBytes = std::size_t{128} << 20;
constexpr std::size_t kLargeMaxCount = 16;

bool is_mapped(std::size_t rounded) { return kHugeEnabled && rounded >= kHugeMin; }

// A block of `rounded` bytes (rounded_size), or null when the system refuses.
void* alloc_block(std::size_t rounded) {
  if (!is_mapped(rounded)) return std::aligned_alloc(kStorageAlignment, rounded);
  // Map one huge page more than asked and unmap the unaligned head and tail.
  if (rounded > SIZE_MAX - kHugePage) return nullptr;
  const std::size_t len = rounded + kHugePage;
  void* base = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  const std::uintptr_t a = (b + kHugePage - 1) & ~(std::uintptr_t{kHugePage} - 1);
  if (a > b) munmap(base, a - b);
  if (a + rounded < b + len) munmap(reinterpret_cast<void*>(a + rounded), b + len - a - rounded);
  void* p = reinterpret_cast<void*>(a);
  madvise(p, rounded, MADV_HUGEPAGE);  // advice only: a kernel without THP ignores it
  return p;
}

void free_block(void* p, std::size_t rounded) {
  if (is_mapped(rounded))
    munmap(p, rounded);
  else
    std::free(p);
}

// Set when this thread's cache is destroyed. Trivially destructible, so it can
// still be read afterwards: a Storage freed later on this thread (a static or
// thread_local tensor made before the cache, destroyed after it at exit)
// frees its block directly instead of writing into the dead cache.
thread_local bool t_cache_gone = false;

// Blocks of exactly the requested (rounded) size are reused: a Storage frees
// by its own byte count, so a block must not be larger than its request.
struct BlockPool {
  struct Block {
    std::size_t size;
    void* p;
  };
  std::size_t max_bytes, max_count;
  std::vector<Block> blocks;  // oldest first
  std::size_t bytes = 0;
  void clear() {
    for (const Block& b : blocks) free_block(b.p, b.size);
    blocks.clear();
    bytes = 0;
  }
  void* take(std::size_t size) {
    for (std::size_t i = blocks.size(); i-- > 0;)
      if (blocks[i].size == size) {
        void* p = blocks[i].p;
        blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
        bytes -= size;
        return p;
      }
    return nullptr;
  }
  void give(std::size_t size, void* p) {
    std::size_t evict = 0;
    std::size_t freed = 0;
    while (evict < blocks.size() &&
           (blocks.size() - evict >= max_count || bytes - freed + size > max_bytes)) {
      freed += blocks[evict].size;
      free_block(blocks[evict].p, blocks[evict].size);
      ++evict;
    }
    blocks.erase(blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(evict));
    bytes -= freed;
    blocks.push_back({size, p});
    bytes += size;
  }
};

struct BlockCache {
  BlockPool small{kSmallMaxBytes, kSmallMaxCount, {}};
  BlockPool large{kLargeMaxBytes, kLargeMaxCount, {}};
  ~BlockCache() {
    clear();
    t_cache_gone = true;
  }
  void clear() {
    small.clear();
    large.clear();
  }
  void* take(std::size_t size) {
    if (size <= kSmallMaxBlock) return small.take(size);
    return size <= kLargeMaxBlock ? large.take(size) : nullptr;
  }
  bool give(std::size_t size, void* p) {
    if (size <= kSmallMaxBlock)
      small.give(size, p);
    else if (size <= kLargeMaxBlock)
      large.give(size, p);
    else
      return false;
    return true;
  }
};

// This thread's cache; null once it has been destroyed (thread or program exit).
BlockCache* block_cache() {
  if (t_cache_gone) return nullptr;
  thread_local BlockCache cache;
  return &cache;
}

// The size of the block behind `nbytes` (nbytes <= the allocation cap, so no
// overflow): a multiple of the alignment, as aligned_alloc needs, at least one
// line so that data() is never null; mapped blocks a multiple of kHugePage.
std::size_t rounded_size(std::int64_t nbytes) {
  const auto n = static_cast<std::size_t>(nbytes);
  const std::size_t r = n == 0
                            ? kStorageAlignment
                            : (n + kStorageAlignment - 1) / kStorageAlignment * kStorageAlignment;
  return is_mapped(r) ? (r + kHugePage - 1) / kHugePage * kHugePage : r;
}

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

void storage_cache_clear() {
  if (BlockCache* c = block_cache()) c->clear();
}

std::shared_ptr<StorageSource> set_storage_source(std::shared_ptr<StorageSource> source) {
  std::shared_ptr<StorageSource> prev = std::move(thread_source());
  thread_source() = std::move(source);
  return prev;
}

Storage::Storage(Key, std::byte* data, std::int64_t nbytes)
    : data_(data), nbytes_(nbytes), serial_(g_serial.fetch_add(1, std::memory_order_relaxed)) {}

bool Storage::from_thread_source() const {
  const std::shared_ptr<StorageSource>& current = thread_source();
  return current != nullptr && current == source_;
}

std::uint64_t Storage::next_serial() { return g_serial.load(std::memory_order_relaxed); }

std::shared_ptr<Storage> Storage::allocate(std::int64_t nbytes, const char* what) {
  MS_CHECK(nbytes >= 0, ValueError, what, ": cannot allocate a negative byte count ", nbytes);
  const std::int64_t cap = g_max_alloc.load(std::memory_order_relaxed);
  MS_CHECK(nbytes <= cap, MemoryError, what, ": allocation of ", nbytes,
           " bytes is over the limit of ", cap, " bytes (ms::set_max_alloc_bytes)");
  const std::size_t rounded = rounded_size(nbytes);
  std::shared_ptr<StorageSource>& source = thread_source();
  std::int64_t token = 0;
  if (source) {
    if (std::byte* mem = source->acquire(nbytes, token)) {
      std::shared_ptr<Storage> s;
      try {
        s = std::make_shared<Storage>(Key{}, mem, nbytes);
      } catch (...) {
        source->release(token, true);
        throw;
      }
      s->source_ = source;
      s->token_ = token;
      s->from_source_ = true;
      return s;
    }
  }
  BlockCache* cache = kCacheEnabled ? block_cache() : nullptr;
  void* p = cache != nullptr ? cache->take(rounded) : nullptr;
  if (p == nullptr) p = alloc_block(rounded);
  MS_CHECK(p != nullptr, MemoryError, what, ": the system refused an allocation of ", nbytes,
           " bytes");
  std::shared_ptr<Storage> s;
  try {
    s = std::make_shared<Storage>(Key{}, static_cast<std::byte*>(p), nbytes);
  } catch (...) {
    free_block(p, rounded);
    if (source) source->release(token, false);
    throw;
  }
  if (source) {
    s->source_ = source;
    s->token_ = token;
  }
  g_alloc_count.fetch_add(1, std::memory_order_relaxed);
  g_live_count.fetch_add(1, std::memory_order_relaxed);
  update_peak(g_live_bytes.fetch_add(nbytes, std::memory_order_relaxed) + nbytes);
  return s;
}

std::shared_ptr<Storage> Storage::wrap(std::byte* data, std::int64_t nbytes,
                                       std::shared_ptr<const void> owner) {
  MS_CHECK(owner != nullptr, ValueError,
           "Storage::wrap: owner must keep the memory alive (expected a non-null owner, "
           "given null)");
  MS_CHECK(nbytes >= 0, ValueError, "Storage::wrap: nbytes must be >= 0, given ", nbytes);
  MS_CHECK(data != nullptr || nbytes == 0, ValueError, "Storage::wrap: data is null for ", nbytes,
           " bytes");
  auto s = std::make_shared<Storage>(Key{}, data, nbytes);
  s->owner_ = std::move(owner);
  return s;
}

Storage::~Storage() {
  if (owner_) return;  // wrapped memory: its owner frees it; never counted
  if (source_) source_->release(token_, from_source_);
  if (from_source_) return;  // the source's memory (an arena): not counted, not freed
  BlockCache* cache = kCacheEnabled ? block_cache() : nullptr;
  const std::size_t rounded = rounded_size(nbytes_);
  if (cache == nullptr || !cache->give(rounded, data_)) free_block(data_, rounded);
  g_live_bytes.fetch_sub(nbytes_, std::memory_order_relaxed);
  g_live_count.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace ms
