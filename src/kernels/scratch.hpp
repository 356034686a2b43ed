// src/kernels/scratch.hpp — private to src/kernels: a thread's work buffer
// that outlives the call, for kernels that would otherwise allocate (and
// first touch) a block on every call. conv1's narrow gradients keep theirs
// so: each part's region then stays in the cache of the thread that runs the
// part, and no call allocates.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>

#include "ms/core/error.hpp"
#include "ms/core/storage.hpp"

namespace ms::kernels::detail {

// A 64-byte aligned buffer, grown on demand and kept for the next calls
// (contents not kept); meant as a thread_local. get() returns null when the
// system refuses the memory (or the size cannot be rounded to 64 bytes),
// never for a request of 0 bytes (64 are kept then), so that whether a
// kernel runs cannot depend on what the thread ran before.
class Scratch {
 public:
  void* get(std::size_t bytes) noexcept {
    bytes = std::max<std::size_t>(bytes, 64);
    if (bytes > std::numeric_limits<std::size_t>::max() - 63) return nullptr;
    if (bytes > size_) {
      const std::size_t rounded = (bytes + 63) / 64 * 64;
      data_.reset(static_cast<unsigned char*>(std::aligned_alloc(64, rounded)));
      size_ = data_ ? rounded : 0;
    }
    return data_.get();
  }

  // get(bytes), or an ms::MemoryError naming `what` when the request is over
  // the cap on a single allocation (ms::set_max_alloc_bytes, checked on every
  // call, kept block or not) or the system refuses it.
  void* need(std::size_t bytes, const char* what) {
    const auto cap = static_cast<std::uint64_t>(max_alloc_bytes());
    MS_CHECK(bytes <= cap, MemoryError, what, ": a scratch block of ", bytes,
             " bytes is over the limit of ", cap, " bytes (ms::set_max_alloc_bytes)");
    void* p = get(bytes);
    MS_CHECK(p != nullptr, MemoryError, what, ": the system refused a scratch block of ", bytes,
             " bytes");
    return p;
  }

 private:
  struct Free {
    void operator()(unsigned char* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<unsigned char, Free> data_;
  std::size_t size_ = 0;
};

}  // namespace ms::kernels::detail
