// ms/core/xtensor.hpp — ms tensors and xtensor arrays over the same memory.
//
// Stage: core. Optional: include it when xtensor (Debian: libxtensor-dev) is
// installed; libms itself does not need it. Both directions are zero-copy and
// neither can dangle:
//
//   ms::Tensor t = ms::randn({2, 3});
//   auto a = ms::as_xarray<float>(t);        // an xt::xarray_adaptor over t's memory
//   a(1, 2) = 5.0f;                          // writes t[1][2]
//   double s = xt::sum(a)();                 // any xtensor expression reads it
//
//   xt::xarray<double> z = xt::linspace<double>(0.0, 1.0, 6);
//   ms::Tensor u = ms::from_xtensor(std::move(z));   // u owns z's buffer now
//
// Lifetimes: the adaptor as_xarray returns holds the tensor's storage (a
// shared pointer inside its buffer), so it stays valid after the tensor is
// gone; its shape and strides are the tensor's (a transposed or sliced view
// stays a view). from_xtensor takes a container by move (or shares it through
// a std::shared_ptr) and the tensor keeps it alive; an adaptor over memory it
// does not own (`xt::adapt(ptr, ..., xt::no_ownership(), ...)`) is wrapped
// only together with the owner of that memory. Lvalue containers are
// rejected at compile time: the tensor would outlive them.
#pragma once

#if !__has_include(<xtensor/xarray.hpp>)
#error "ms/core/xtensor.hpp needs xtensor (Debian package libxtensor-dev)"
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xbuffer_adaptor.hpp>
#include <xtensor/xbuilder.hpp>

#include "ms/core/error.hpp"
#include "ms/core/storage.hpp"
#include "ms/core/tensor.hpp"

namespace ms {

/// The xtensor type as_xarray returns: a dynamic-rank, strided adaptor whose
/// buffer holds the tensor's storage alive.
template <class T>
using XArrayView =
    xt::xarray_adaptor<xt::xbuffer_adaptor<T*, xt::no_ownership, std::shared_ptr<Storage>>,
                       xt::layout_type::dynamic, std::vector<std::size_t>>;

/// `t` seen as an xtensor array of element type `T` (no copy): reads and
/// writes go to t's memory, with t's shape and strides. TypeError when T is not
/// t's element type; ValueError for a symbolic (traced) or undefined tensor,
/// and for a view with a negative stride (the adaptor's buffer starts at the
/// view's first element: pass `t.contiguous()`).
/// Example: `auto a = ms::as_xarray<float>(t);`
template <class T>
XArrayView<T> as_xarray(const Tensor& t) {
  static_assert(Element<T>, "ms::as_xarray: T must be an ms element type");
  MS_CHECK(t.defined() && !t.is_symbolic(), ValueError,
           "as_xarray: the tensor must hold values (given ",
           t.defined() ? "a symbolic tensor traced by ms::jit" : "an undefined tensor", ")");
  MS_CHECK(t.dtype() == dtype_of<T>, TypeError, "as_xarray: element type ", dtype_name(dtype_of<T>),
           " was requested for a tensor of ", dtype_name(t.dtype()));
  std::vector<std::size_t> shape;
  std::vector<std::ptrdiff_t> strides;
  std::size_t span = t.numel() > 0 ? 1 : 0;  // elements from the first to the last reachable
  for (std::int64_t i = 0; i < t.rank(); ++i) {
    const std::int64_t stride = t.strides()[static_cast<std::size_t>(i)];
    MS_CHECK(stride >= 0 || t.dim(i) <= 1, ValueError, "as_xarray: axis ", i, " of the view ",
             t.shape(), " has stride ", stride,
             "; the adaptor takes non-negative strides (pass t.contiguous())");
    shape.push_back(static_cast<std::size_t>(t.dim(i)));
    strides.push_back(static_cast<std::ptrdiff_t>(std::max<std::int64_t>(stride, 0)));
    if (t.numel() > 0) span += static_cast<std::size_t>((t.dim(i) - 1) * strides.back());
  }
  T* data = reinterpret_cast<T*>(t.storage()->data()) + t.offset();
  using Buffer = xt::xbuffer_adaptor<T*, xt::no_ownership, std::shared_ptr<Storage>>;
  return XArrayView<T>(Buffer(data, span, t.storage()), shape, strides);
}

namespace detail {

/// True when a container of storage type S frees its own memory (an owning
/// container, or a buffer adaptor that acquired its memory or holds a smart
/// pointer to it); false for a no_ownership adaptor.
template <class S>
struct XOwnsBuffer : std::true_type {};
template <class S>
struct XOwnsBuffer<S&> : std::false_type {};  // xt::adapt(vector, shape): a reference
template <class CP, class A>
struct XOwnsBuffer<xt::xbuffer_adaptor<CP, xt::no_ownership, A>>
    : std::bool_constant<!std::is_same_v<xt::detail::buffer_storage_t<CP, A, xt::no_ownership>,
                                         xt::detail::xbuffer_storage<CP, A>>> {};

/// A tensor over `c`'s elements, with `owner` keeping them alive.
template <class C>
Tensor wrap_xcontainer(const C& c, std::shared_ptr<const void> owner) {
  using T = std::remove_const_t<typename C::value_type>;
  static_assert(Element<T>, "ms::from_xtensor: the element type must be an ms element type");
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> strides;
  for (std::size_t i = 0; i < c.dimension(); ++i) {
    dims.push_back(static_cast<std::int64_t>(c.shape()[i]));
    strides.push_back(static_cast<std::int64_t>(c.strides()[i]));
  }
  const auto address = reinterpret_cast<std::uintptr_t>(c.data());
  MS_CHECK(address % alignof(T) == 0, ValueError, "from_xtensor: the data of a ",
           dtype_name(dtype_of<T>), " container must be aligned to ", alignof(T),
           " bytes (given an address ", address % alignof(T), " bytes past a multiple of ",
           alignof(T), "); copy it into an aligned container");
  auto* data = reinterpret_cast<std::byte*>(const_cast<T*>(c.data()));
  const auto nbytes = static_cast<std::int64_t>(c.storage().size() * sizeof(T));
  return Tensor(Storage::wrap(data, nbytes, std::move(owner)), dtype_of<T>, Shape(std::move(dims)),
                std::move(strides), static_cast<std::int64_t>(c.data_offset()));
}

}  // namespace detail

/// A tensor over the elements of the xtensor container `c` (xt::xarray,
/// xt::xtensor, an owning adaptor), without a copy: `c` is moved into the
/// tensor, which keeps it alive. Lvalues do not compile (pass std::move(c) or
/// a std::shared_ptr); a no_ownership adaptor needs the overload with an owner.
/// ValueError when the data is not aligned to the element type (as for every overload).
/// Example: `auto u = ms::from_xtensor(xt::xarray<float>{1.0f, 2.0f});`
template <class C>
requires(!std::is_lvalue_reference_v<C> && xt::is_xexpression<std::remove_cvref_t<C>>::value) Tensor
    from_xtensor(C&& c) {
  using Plain = std::remove_cvref_t<C>;
  static_assert(detail::XOwnsBuffer<typename Plain::storage_type>::value,
                "ms::from_xtensor: this adaptor does not own its memory; pass its owner: "
                "ms::from_xtensor(adaptor, owner)");
  auto keep = std::make_shared<Plain>(std::move(c));
  const Plain& ref = *keep;
  return detail::wrap_xcontainer(ref, std::move(keep));
}

/// As from_xtensor(C&&), sharing `c`: the tensor and the other holders of `c`
/// see the same elements. ValueError when `c` is null.
/// Example: `auto u =
/// ms::from_xtensor(std::make_shared<xt::xarray<float>>(xt::zeros<float>({3})));`
template <class C>
Tensor from_xtensor(std::shared_ptr<C> c) {
  MS_CHECK(c != nullptr, ValueError, "from_xtensor: the container pointer is null");
  const C& ref = *c;
  return detail::wrap_xcontainer(ref, std::shared_ptr<const void>(std::move(c)));
}

/// A tensor over the elements of `adaptor` (e.g. `xt::adapt(ptr, n, xt::no_ownership(), shape)`),
/// kept valid by `owner`, the object that owns that memory. ValueError when
/// `owner` is null.
/// Example: `auto u = ms::from_xtensor(xt::adapt(buf->data(), 4, xt::no_ownership(),
/// std::vector<std::size_t>{4}), buf);`
template <class C>
requires xt::is_xexpression<C>::value Tensor from_xtensor(const C& adaptor,
                                                          std::shared_ptr<const void> owner) {
  MS_CHECK(owner != nullptr, ValueError,
           "from_xtensor: owner must keep the adapted memory alive (given null)");
  return detail::wrap_xcontainer(adaptor, std::move(owner));
}

/// Lvalue containers are rejected at compile time: the tensor would outlive them.
template <class C>
requires xt::is_xexpression<C>::value Tensor from_xtensor(C& c) {
  static_assert(!sizeof(C*),
                "ms::from_xtensor: pass the container by move (std::move(c)) or as a "
                "std::shared_ptr; a tensor over an lvalue could outlive it");
  return {};
}

}  // namespace ms
