#include "ms/core/storage.hpp"

#include <atomic>
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

// A small per-thread cache of freed blocks, so that the many short-lived
// results of small ops do not each pay malloc + free (glibc also consolidates
// its fast bins on every mid-size request). Only blocks up to kCacheMaxBlock
// are kept, at most kCacheMaxBytes per thread; cached blocks are not live
// memory and are returned to the system by ms::storage_cache_clear() or at
// thread exit. Under AddressSanitizer the cache is off so that every use
// after free is still caught.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheEnabled = false;
#else
constexpr bool kCacheEnabled = true;
#endif
constexpr std::size_t kCacheMaxBlock = std::size_t{1} << 20;
constexpr std::size_t kCacheMaxBytes = std::size_t{32} << 20;
constexpr std::size_t kCacheMaxCount = 32;

// Set when this thread's cache is destroyed. Trivially destructible, so it can
// still be read afterwards: a Storage freed later on this thread (a static or
// thread_local tensor made before the cache, destroyed after it at exit)
// frees its block directly instead of writing into the dead cache.
thread_local bool t_cache_gone = false;

struct BlockCache {
  struct Block {
    std::size_t size;
    void* p;
  };
  std::vector<Block> blocks;
  std::size_t bytes = 0;
  ~BlockCache() {
    clear();
    t_cache_gone = true;
  }
  void clear() {
    for (const Block& b : blocks) std::free(b.p);
    blocks.clear();
    bytes = 0;
  }
  void* take(std::size_t size) {
    for (std::size_t i = blocks.size(); i-- > 0;)
      if (blocks[i].size == size) {
        void* p = blocks[i].p;
        blocks[i] = blocks.back();
        blocks.pop_back();
        bytes -= size;
        return p;
      }
    return nullptr;
  }
  bool give(std::size_t size, void* p) {
    if (size > kCacheMaxBlock || bytes + size > kCacheMaxBytes) return false;
    if (blocks.size() >= kCacheMaxCount) {
      std::free(blocks.front().p);
      bytes -= blocks.front().size;
      blocks.erase(blocks.begin());
    }
    blocks.push_back({size, p});
    bytes += size;
    return true;
  }
};

// This thread's cache; null once it has been destroyed (thread or program exit).
BlockCache* block_cache() {
  if (t_cache_gone) return nullptr;
  thread_local BlockCache cache;
  return &cache;
}

std::size_t rounded_size(std::int64_t nbytes) {
  // aligned_alloc needs a multiple of the alignment; keep at least one line
  // so that data() is never null.
  const auto n = static_cast<std::size_t>(nbytes);
  return n == 0 ? kStorageAlignment
                : (n + kStorageAlignment - 1) / kStorageAlignment * kStorageAlignment;
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

Storage::Storage(std::byte* data, std::int64_t nbytes)
    : data_(data), nbytes_(nbytes), serial_(g_serial.fetch_add(1, std::memory_order_relaxed)) {}

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
        s.reset(new Storage(mem, nbytes));
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
  if (p == nullptr) p = std::aligned_alloc(kStorageAlignment, rounded);
  MS_CHECK(p != nullptr, MemoryError, what, ": the system refused an allocation of ", nbytes,
           " bytes");
  std::shared_ptr<Storage> s;
  try {
    s.reset(new Storage(static_cast<std::byte*>(p), nbytes));
  } catch (...) {
    std::free(p);
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

Storage::~Storage() {
  if (source_) source_->release(token_, from_source_);
  if (from_source_) return;  // the source's memory (an arena): not counted, not freed
  BlockCache* cache = kCacheEnabled ? block_cache() : nullptr;
  if (cache == nullptr || !cache->give(rounded_size(nbytes_), data_)) std::free(data_);
  g_live_bytes.fetch_sub(nbytes_, std::memory_order_relaxed);
  g_live_count.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace ms
