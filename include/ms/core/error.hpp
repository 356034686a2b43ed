// ms/core/error.hpp — the ms::Error family and the MS_CHECK macro.
//
// Stage: core (the lowest). Every user-facing check in ms throws one of these
// with a message naming the op or API, the argument, what was expected and
// what was given. Checks are real `if` + throw and stay active in release
// builds; internal invariants use MS_ASSERT (debug only).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace ms {

/// Base of every error ms raises. `what()` is the full, human-readable message.
/// Example: `try { ms::matmul(a, b); } catch (const ms::Error& e) { std::cerr << e.what(); }`
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  /// The error class name as printed in front of messages, e.g. "ms::ShapeError".
  virtual const char* kind() const noexcept { return "ms::Error"; }
};

/// Shapes that do not fit an op (rank, broadcasting, inner dims, sizes).
class ShapeError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "ms::ShapeError"; }
};

/// A dtype an op or API does not accept, or a mismatch between dtypes.
class TypeError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "ms::TypeError"; }
};

/// A value out of its domain: negative sizes, zero strides, bad options.
class ValueError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "ms::ValueError"; }
};

/// An axis or index outside its range.
class IndexError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "ms::IndexError"; }
};

/// A name a mapping (a state dict) does not hold.
class KeyError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "ms::KeyError"; }
};

/// An allocation over the configured cap (`ms::set_max_alloc_bytes`) or one
/// the system refused.
class MemoryError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "ms::MemoryError"; }
};

namespace detail {

/// Concatenates anything streamable into one string.
template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

/// `s` in single quotes, for a name in a message.
inline std::string squote(std::string_view s) { return str_cat("'", s, "'"); }

template <class E, class... Args>
[[noreturn]] void raise(const Args&... args) {
  throw E(str_cat(args...));
}

}  // namespace detail
}  // namespace ms

/// `MS_CHECK(cond, ms::ShapeError, "matmul: lhs ", a, " and rhs ", b, ...)`:
/// throws the given error class with the concatenated message when `cond` is false.
#define MS_CHECK(cond, ErrorClass, ...)             \
  do {                                              \
    if (!(cond)) [[unlikely]]                       \
      ::ms::detail::raise<ErrorClass>(__VA_ARGS__); \
  } while (false)

#ifndef NDEBUG
#include <cassert>
/// Internal invariant, checked in debug builds only (never for user input).
#define MS_ASSERT(cond) assert(cond)
#else
#define MS_ASSERT(cond) ((void)0)
#endif
