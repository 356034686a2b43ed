// ms/core/storage.hpp — aligned, reference-counted memory with statistics.
//
// Stage: core. Every tensor's bytes live in a Storage: 64-byte aligned (one
// cache line, a full AVX-512 register), freed when the last tensor viewing it
// goes away. Allocations are counted so tests can prove there are no hidden
// temporaries, and capped so a huge request is an ms::MemoryError, not a crash.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ms/core/error.hpp"

namespace ms {

/// Alignment in bytes of every Storage allocation (a cache line; enough for AVX-512 loads).
inline constexpr std::size_t kStorageAlignment = 64;

/// Statistics over all Storage allocations of the process.
struct MemoryStats {
  std::int64_t live_bytes = 0;   ///< bytes held by storages alive now
  std::int64_t peak_bytes = 0;   ///< maximum of live_bytes since start or the last reset
  std::int64_t alloc_count = 0;  ///< number of allocations since start (never decreases)
  std::int64_t live_count = 0;   ///< storages alive now
};

/// Current statistics. Example: `auto before = ms::memory_stats().alloc_count;`
MemoryStats memory_stats();
/// Sets peak_bytes to live_bytes.
void memory_stats_reset_peak();

/// Returns this thread's cache of freed blocks to the system. The cache keeps
/// blocks for reuse by the next allocation of the same size: up to 32 blocks
/// of at most 1 MiB (32 MiB), and up to 16 blocks of 1-64 MiB (128 MiB), per
/// thread, so that results made every call (small ops, a jitted function's
/// returned gradients, large eager outputs) do not each pay malloc and first
/// page touches. Cached blocks do not count in memory_stats(). (Blocks of
/// 2 MiB and more are mapped with transparent huge pages, their size rounded
/// up to whole 2 MiB pages.)
void storage_cache_clear();

/// Caps a single allocation (bytes); a larger request raises ms::MemoryError.
/// The default is 64 GiB; `0` restores it.
void set_max_alloc_bytes(std::int64_t bytes);
/// The current cap on a single allocation, in bytes (see set_max_alloc_bytes).
std::int64_t max_alloc_bytes();

/// Where the storages allocated by one thread take their memory from, instead
/// of the system: the jit executor installs one while a compiled graph runs, to
/// record the graph's allocations and then to serve them from one planned arena.
class StorageSource {
 public:
  virtual ~StorageSource() = default;
  /// Memory (64-byte aligned) for a new storage of `nbytes`, or nullptr to let
  /// the system allocate. `token` is handed back to `release`.
  virtual std::byte* acquire(std::int64_t nbytes, std::int64_t& token) = 0;
  /// The storage made with `token` (memory `data`, from acquire when
  /// `from_source`) is being destroyed.
  virtual void release(std::int64_t token, bool from_source) noexcept = 0;
};

/// Installs `source` for storages allocated by this thread (nullptr: the
/// system); returns the previous one. Each storage keeps its source alive.
std::shared_ptr<StorageSource> set_storage_source(std::shared_ptr<StorageSource> source);

/// A block of aligned bytes. Created only through `Storage::allocate`.
class Storage {
  struct Key {  // only allocate() can name it, so only allocate() can construct
    explicit Key() = default;
  };

 public:
  /// Allocates `nbytes` (uninitialized), 64-byte aligned. `what` names the API
  /// for the error message when the request is over the cap or refused.
  static std::shared_ptr<Storage> allocate(std::int64_t nbytes, const char* what = "allocate");
  /// A storage over memory that `owner` keeps valid (zero-copy interop, e.g.
  /// ms/core/xtensor.hpp): `data` (any alignment) and `nbytes`. ms never frees
  /// it and does not count it in memory_stats(); the storage holds `owner`
  /// until the last tensor viewing it goes away. ValueError when `owner` is
  /// null, or `data` is null while `nbytes` > 0.
  /// Example: `auto s = ms::Storage::wrap(reinterpret_cast<std::byte*>(buf->data()), 16, buf);`
  static std::shared_ptr<Storage> wrap(std::byte* data, std::int64_t nbytes,
                                       std::shared_ptr<const void> owner);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();
  /// For allocate (through std::make_shared: the storage and its count in one allocation).
  Storage(Key, std::byte* data, std::int64_t nbytes);

  /// The first byte of the allocation (aligned to kStorageAlignment).
  std::byte* data() const { return data_; }
  /// The size of the allocation in bytes.
  std::int64_t nbytes() const { return nbytes_; }
  /// A number unique to this storage, increasing with allocation order.
  std::uint64_t serial() const { return serial_; }
  /// The serial the next storage will get.
  static std::uint64_t next_serial();
  /// A name for graph dumps (a Parameter sets its name here, so a captured
  /// parameter prints as `%fc1.weight`); empty by default.
  const std::string& label() const { return label_; }
  /// Sets the name shown in graph dumps (see label()).
  void set_label(std::string label) { label_ = std::move(label); }
  /// How many times ms's in-place writers (Tensor::copy_ and fill_,
  /// ms::assign, a compiled graph's parameter updates) have written into this
  /// storage. Caches derived from the contents (a compiled graph's
  /// low-precision copies of parameters) compare it to know they are stale.
  /// Writes through raw pointers (`data<T>()`) are not counted: call
  /// note_write() after them.
  std::uint64_t write_count() const { return writes_.load(std::memory_order_acquire); }
  /// Counts one in-place write (see write_count()).
  void note_write() { writes_.fetch_add(1, std::memory_order_acq_rel); }
  /// True when this storage was allocated under the storage source the
  /// calling thread has installed now (set_storage_source): while a compiled
  /// graph runs, one of its own values, which nothing writes into during the
  /// run, as opposed to a tensor made outside it (a parameter, an input).
  bool from_thread_source() const;

 private:
  std::byte* data_;
  std::int64_t nbytes_;
  std::uint64_t serial_;
  std::shared_ptr<StorageSource> source_;  ///< set when a source saw this allocation
  std::int64_t token_ = 0;
  bool from_source_ = false;           ///< the memory belongs to source_, not to the system
  std::shared_ptr<const void> owner_;  ///< set by wrap: keeps memory ms does not own
  std::string label_;
  std::atomic<std::uint64_t> writes_{0};  ///< see write_count()
};

}  // namespace ms
