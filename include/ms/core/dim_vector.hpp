// ms/core/dim_vector.hpp — the dims of a shape, or the strides of a tensor:
// a vector of int64 that keeps up to kInline of them inside itself, so that
// copying a Tensor (every step of a compiled graph copies its inputs) does not
// allocate for ranks up to kInline. Larger ranks live on the heap.
//
//   ms::DimVector d{2, 3};
//   d.push_back(4);          // [2, 3, 4], still inside
//   std::span<const std::int64_t> s = d;
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

namespace ms {

/// A vector of int64 with room for kInline elements inside (see the file comment).
class DimVector {
 public:
  /// Elements held without a heap allocation.
  static constexpr std::size_t kInline = 6;

  DimVector() = default;
  /// `DimVector{2, 3}`.
  DimVector(std::initializer_list<std::int64_t> v) { assign(v.begin(), v.size()); }
  /// Copies the elements of `v`.
  DimVector(std::span<const std::int64_t> v) { assign(v.data(), v.size()); }  // NOLINT: implicit
  /// Copies the elements of `v`.
  DimVector(const std::vector<std::int64_t>& v) { assign(v.data(), v.size()); }  // NOLINT: implicit
  /// The elements, copied into a vector.
  std::vector<std::int64_t> to_vector() const { return {begin(), end()}; }
  /// `n` copies of `value`.
  explicit DimVector(std::size_t n, std::int64_t value = 0) {
    reserve(n);
    std::fill(ptr(), ptr() + n, value);
    size_ = n;
  }
  /// @{
  /// Copies and moves (a move leaves `o` empty).
  DimVector(const DimVector& o) { copy_from(o); }
  DimVector(DimVector&& o) noexcept { take(o); }
  DimVector& operator=(const DimVector& o) {
    if (this != &o) copy_from(o);
    return *this;
  }
  DimVector& operator=(DimVector&& o) noexcept {
    if (this != &o) {
      heap_.reset();
      cap_ = kInline;
      take(o);
    }
    return *this;
  }
  ~DimVector() = default;
  /// @}

  /// The number of elements.
  std::size_t size() const { return size_; }
  /// True when there are no elements.
  bool empty() const { return size_ == 0; }
  /// The elements, contiguous.
  const std::int64_t* data() const {
    if (heap_) return heap_.get();
    if (size_ > kInline) __builtin_unreachable();  // bounds reads for GCC's -Warray-bounds
    return inline_;
  }
  /// The elements, writable.
  std::int64_t* data() { return ptr(); }
  /// Iterates over the elements.
  const std::int64_t* begin() const { return data(); }
  /// The end of the elements.
  const std::int64_t* end() const { return data() + size_; }
  /// Iterates over the elements, writable.
  std::int64_t* begin() { return ptr(); }
  /// The end of the elements, writable.
  std::int64_t* end() { return ptr() + size_; }
  /// Element `i` (unchecked).
  std::int64_t operator[](std::size_t i) const { return data()[i]; }
  /// Element `i`, writable (unchecked).
  std::int64_t& operator[](std::size_t i) { return ptr()[i]; }
  /// The last element (unchecked).
  std::int64_t back() const { return data()[size_ - 1]; }
  /// Appends `v`.
  void push_back(std::int64_t v) {
    if (size_ == cap_) reserve(cap_ * 2);
    ptr()[size_++] = v;
  }
  /// The elements as a span.
  operator std::span<const std::int64_t>() const { return {data(), size_}; }

  /// The same elements in the same order.
  friend bool operator==(const DimVector& a, const DimVector& b) {
    if (a.size_ != b.size_) return false;
    const std::int64_t *p = a.data(), *q = b.data();
    for (std::size_t i = 0; i < a.size_; ++i)  // a loop: std::equal calls memcmp
      if (p[i] != q[i]) return false;
    return true;
  }

 private:
  std::int64_t* ptr() { return heap_ ? heap_.get() : inline_; }
  // size_ <= cap_ always; inline (no heap_) means cap_ == kInline.
  // Room for at least n elements (the elements kept).
  void reserve(std::size_t n) {
    if (n <= cap_) return;
    auto grown = std::make_unique_for_overwrite<std::int64_t[]>(n);
    std::copy(data(), data() + size_, grown.get());
    heap_ = std::move(grown);
    cap_ = n;
  }
  void assign(const std::int64_t* p, std::size_t n) {
    if (n <= kInline) {  // the two cases apart: GCC's -Warray-bounds follows each
      heap_.reset();
      cap_ = kInline;
      std::copy(p, p + n, inline_);
    } else {
      if (!heap_ || n > cap_) {
        heap_ = std::make_unique_for_overwrite<std::int64_t[]>(n);
        cap_ = n;
      }
      std::copy(p, p + n, heap_.get());
    }
    size_ = n;
  }
  // o's elements (an inline o is copied whole: a fixed-size memcpy, which
  // GCC's -Warray-bounds can follow and inlines as a few vector moves, where
  // std::copy over the arrays became a call to memmove).
  void copy_from(const DimVector& o) {
    if (o.heap_) {
      assign(o.heap_.get(), o.size_);
      return;
    }
    heap_.reset();
    cap_ = kInline;
    std::memcpy(inline_, o.inline_, sizeof inline_);
    size_ = o.size_;
  }
  // Takes o's elements (this holds none on the heap); o is left empty.
  void take(DimVector& o) {
    if (o.heap_) {
      heap_ = std::move(o.heap_);
      cap_ = o.cap_;
    } else {
      std::memcpy(inline_, o.inline_, sizeof inline_);
    }
    size_ = o.size_;
    o.size_ = 0;
    o.cap_ = kInline;
  }

  std::unique_ptr<std::int64_t[]> heap_;
  std::size_t size_ = 0;
  std::size_t cap_ = kInline;
  std::int64_t inline_[kInline] = {};
};

}  // namespace ms
