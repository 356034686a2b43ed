#include <doctest/doctest.h>

#include <ms/core/storage.hpp>
#include <ms/core/tensor.hpp>
#include <optional>
#include <thread>

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
}
