// ms/expr/recorder.hpp — the recording interface that expressions see while
// ms::jit traces.
//
// Stage: expr. While a function is traced, an expression records its
// elementwise applications and in-place writes instead of computing them.
// The recorder is the elementwise part of the op table's tracer
// (ops::Tracer derives from it and adds op calls); the jit stage implements
// both, so lower stages never include higher ones.
//
//   if (ms::expr::active_recorder() != nullptr) { /* tracing: record, do not compute */ }
#pragma once

#include <cstdint>
#include <span>

#include "ms/core/tensor.hpp"

namespace ms::expr {

/// One operand of a traced elementwise op: a tensor or a weak C++ number.
struct EwTraceArg {
  const Tensor* tensor = nullptr;  ///< null for a number
  /// The number when `tensor` is null (a weak scalar: it takes the tensor operand's dtype).
  Scalar scalar = 0;
};

/// Records elementwise applications and in-place writes while ms::jit traces
/// a function on this thread.
class Recorder {
 public:
  virtual ~Recorder() = default;
  /// The id that symbolic tensors of this trace carry.
  virtual std::uint32_t trace_id() const = 0;
  /// Records elementwise instruction `op_id` (a kernels::EwInstructions id)
  /// with tensor or number operands.
  virtual Tensor record_elementwise(int op_id, std::span<const EwTraceArg> args) = 0;
  /// Records an in-place write of `src` into `dst` (a parameter update), `what` names the API.
  virtual void record_assign(const Tensor& dst, const Tensor& src, const char* what) = 0;
};

/// The recorder active on this thread (the active ops::Tracer), or nullptr.
Recorder* active_recorder();

namespace detail {
/// Makes `r` this thread's recorder; returns the previous one. Called only by
/// ops::set_active_tracer, so the recorder is always an ops::Tracer.
Recorder* set_active_recorder(Recorder* r);
}  // namespace detail

}  // namespace ms::expr
