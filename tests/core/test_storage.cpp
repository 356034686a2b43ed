#include <doctest/doctest.h>

#include <sys/resource.h>

#include <cstring>
#include <ms/core/storage.hpp>
#include <ms/core/tensor.hpp>
#include <optional>
#include <thread>
#include <vector>

namespace {
// Under AddressSanitizer the block cache and the mapped blocks are off (every
// block comes from aligned_alloc so that a use after free is reported).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCached = false;
#else
constexpr bool kCached = true;
#endif
constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// Minor page faults of this thread so far.
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}
}  // namespace

TEST_SUITE("core") {
  TEST_CASE("storage is 64-byte aligned and counted") {
    const auto before = ms::memory_stats();
    {
      auto s = ms::Storage::allocate(100);
      CHECK(reinterpret_cast<std::uintptr_t>(s->data()) % 64 == 0);
      CHECK(s->nbytes() == 100);
      const auto during = ms::memory_stats();
      CHECK(during.live_bytes == before.live_bytes + 100);
      CHECK(during.alloc_count == before.alloc_count + 1);
      CHECK(during.peak_bytes >= during.live_bytes);
    }
    CHECK(ms::memory_stats().live_bytes == before.live_bytes);
  }

  TEST_CASE("a zero-byte storage still has a valid pointer") {
    auto s = ms::Storage::allocate(0);
    CHECK(s->data() != nullptr);
  }

  TEST_CASE("allocation cap raises MemoryError, never crashes") {
    ms::set_max_alloc_bytes(1 << 20);
    CHECK_THROWS_WITH_AS(ms::zeros({1024, 1024}, ms::float32),
                         doctest::Contains("over the limit of 1048576 bytes"), ms::MemoryError);
    CHECK_NOTHROW(ms::zeros({256, 256}, ms::float32));
    ms::set_max_alloc_bytes(0);
    CHECK(ms::max_alloc_bytes() == (std::int64_t{64} << 30));
    CHECK_THROWS_AS(ms::set_max_alloc_bytes(-1), ms::ValueError);
  }

  TEST_CASE("a request the system refuses is an ms::Error") {
    // 60 GiB is under the default cap but over this machine's memory.
    ms::set_max_alloc_bytes(std::int64_t{1} << 62);
    bool threw_ms_error = false;
    try {
      auto s = ms::Storage::allocate(std::int64_t{1} << 61, "test");
    } catch (const ms::MemoryError&) {
      threw_ms_error = true;
    }
    ms::set_max_alloc_bytes(0);
    CHECK(threw_ms_error);
  }

  TEST_CASE("a tensor freed after its thread's block cache is gone frees its memory directly") {
    // `early` is constructed before the thread's block cache, so it is
    // destroyed after it at thread exit: its storage must not be handed to the
    // destroyed cache (that corrupted the heap; a static tensor at program
    // exit took the same path).
    const std::int64_t live = ms::memory_stats().live_count;
    std::thread t([] {
      thread_local std::optional<ms::Tensor> early;
      early.emplace();
      { const ms::Tensor warm = ms::zeros({64}); }  // creates the cache, gives it a block
      early = ms::ones({64});
    });
    t.join();
    CHECK(ms::memory_stats().live_count == live);
    // The allocator still works on this thread and in a new one.
    CHECK(ms::ones({64}).numel() == 64);
    std::thread([] { CHECK(ms::ones({128}).numel() == 128); }).join();
  }

  TEST_CASE("a freed large block serves the next request of its size without page faults") {
    // A block that came back from the cache is already mapped: writing all of
    // it again takes no page fault. A fresh block (munmap'ed and mapped again,
    // or trimmed from the heap) faults on first touch.
    ms::storage_cache_clear();
    const auto before = ms::memory_stats();
    for (const std::int64_t n : {kMiB + 64, 3 * kMiB / 2, 5 * kMiB + 3, 48 * kMiB}) {
      CAPTURE(n);
      const auto un = static_cast<std::size_t>(n);
      {
        auto s = ms::Storage::allocate(n);
        std::memset(s->data(), 1, un);  // every byte is writable
      }
      CHECK(ms::memory_stats().live_bytes == before.live_bytes);
      const long faults = minor_faults();
      auto again = ms::Storage::allocate(n);
      std::memset(again->data(), 2, un);
      if (kCached) CHECK(minor_faults() == faults);
      CHECK(reinterpret_cast<std::uintptr_t>(again->data()) % 64 == 0);
    }
    CHECK(ms::memory_stats().live_bytes == before.live_bytes);
    ms::storage_cache_clear();
  }

  TEST_CASE("blocks of 2 MiB and more are aligned to 2 MiB and shared by sizes of equal pages") {
    ms::storage_cache_clear();
    {
      auto s = ms::Storage::allocate(5 * kMiB + 3);
      if (kCached) CHECK(reinterpret_cast<std::uintptr_t>(s->data()) % (2 * kMiB) == 0);
      std::memset(s->data(), 7, static_cast<std::size_t>(5 * kMiB + 3));
      CHECK(s->nbytes() == 5 * kMiB + 3);
    }
    // 6 MiB rounds to the same three 2 MiB pages as 5 MiB + 3 bytes: the
    // cached block, no page fault.
    const long faults = minor_faults();
    auto s = ms::Storage::allocate(6 * kMiB);
    std::memset(s->data(), 0, static_cast<std::size_t>(6 * kMiB));
    if (kCached) CHECK(minor_faults() == faults);
    ms::storage_cache_clear();
  }

  TEST_CASE("the large-block cache is bounded and keeps the newest blocks") {
    ms::storage_cache_clear();
    // 20 distinct sizes of 4-42 MiB, each freed at once: at most 16 blocks and
    // 128 MiB stay cached, the oldest are returned to the system.
    for (std::int64_t i = 0; i < 20; ++i) {
      auto s = ms::Storage::allocate((i + 2) * 2 * kMiB);
      std::memset(s->data(), static_cast<int>(i), static_cast<std::size_t>(s->nbytes()));
    }
    {
      const long faults = minor_faults();
      auto newest = ms::Storage::allocate(42 * kMiB);
      std::memset(newest->data(), 1, static_cast<std::size_t>(42 * kMiB));
      if (kCached) CHECK(minor_faults() == faults);
    }
    // More than 64 MiB is never cached, and works.
    for (int i = 0; i < 2; ++i) {
      auto s = ms::Storage::allocate(65 * kMiB);
      std::memset(s->data(), i, static_cast<std::size_t>(65 * kMiB));
    }
    // After a clear, the same size is a fresh block: its pages fault again.
    ms::storage_cache_clear();
    const long faults = minor_faults();
    auto after_clear = ms::Storage::allocate(42 * kMiB);
    std::memset(after_clear->data(), 3, static_cast<std::size_t>(42 * kMiB));
    if (kCached) CHECK(minor_faults() > faults);
  }

  TEST_CASE("Storage::wrap keeps its owner alive, never frees or counts the memory") {
    auto buf = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
    std::weak_ptr<std::vector<float>> watch = buf;
    const ms::MemoryStats before = ms::memory_stats();
    {
      auto s = ms::Storage::wrap(reinterpret_cast<std::byte*>(buf->data()), 16, buf);
      buf.reset();
      CHECK_FALSE(watch.expired());  // the storage holds the owner
      ms::Tensor t(s, ms::float32, ms::Shape{2, 2}, {2, 1}, 0);
      s.reset();
      CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
      const ms::MemoryStats during = ms::memory_stats();
      CHECK(during.live_bytes == before.live_bytes);
      CHECK(during.live_count == before.live_count);
    }
    CHECK(watch.expired());  // released with the last tensor
  }

  TEST_CASE("Storage::wrap rejects a null owner, a negative size and null data") {
    auto owner = std::make_shared<int>(0);
    std::byte b{};
    CHECK_THROWS_WITH_AS(ms::Storage::wrap(&b, 1, nullptr), doctest::Contains("owner"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::Storage::wrap(&b, -1, owner), doctest::Contains("nbytes"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::Storage::wrap(nullptr, 4, owner), doctest::Contains("null"),
                         ms::ValueError);
    CHECK(ms::Storage::wrap(nullptr, 0, owner)->nbytes() == 0);
    // a view reaching past the wrapped bytes is refused by the tensor
    CHECK_THROWS_AS(ms::Tensor(ms::Storage::wrap(&b, 1, owner), ms::float32, ms::Shape{1}, {1}, 0),
                    ms::Error);
  }

}  // TEST_SUITE
