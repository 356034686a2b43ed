// Generated machine code for straight float32 elementwise programs (the
// interface between the tile loop in elementwise.cpp and ew_codegen.cpp).
#pragma once

#include <cstdint>
#include <span>

#include "ms/kernels/elementwise.hpp"

namespace ms::kernels::detail {

/// How a generated kernel reads one Load instruction of its program.
enum class EwJitLoad : std::uint8_t {
  Stream,     ///< a dense float32 input, one element per output element
  Broadcast,  ///< one value for every element (from EwJitCall::broadcasts)
};

/// One call of a generated kernel: elements [0, n) of its streams and output.
struct EwJitCall {
  const float* const* streams;  ///< the Stream loads' inputs, in program order
  float* out;                   ///< the output
  std::int64_t n;               ///< elements to compute
  /// One value per Const instruction and Broadcast load, in program order.
  const float* broadcasts;
};

/// A generated kernel.
using EwJitFn = void (*)(const EwJitCall*);

/// Most Stream loads a generated kernel reads.
inline constexpr int kMaxJitStreams = 8;

/// The kernel computing `prog` (every register and the output float32, every
/// op EwExact, no conversions; `loads[k]` says how the Load instruction k
/// reads, other entries unread), with non-temporal stores of whole vectors
/// when `stream_out` (the output then 64-byte aligned). Compiled on the first
/// request and kept for the process (constants' values are arguments, not
/// code); null when the program has another instruction, when its values do
/// not fit the vector registers, when code generation is off, or when this
/// build or CPU has none (see ew_codegen_available).
EwJitFn ew_jit_kernel(const EwProgram& prog, std::span<const EwJitLoad> loads, bool stream_out);

/// Counts one ew_run on a generated kernel (ew_codegen_stats().runs).
void ew_jit_count_run() noexcept;

/// True when code generation is on (ew_codegen_available and set_ew_codegen).
bool ew_jit_enabled() noexcept;

}  // namespace ms::kernels::detail
