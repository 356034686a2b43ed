// ms/jit/detail/cache.hpp — what the jit's cache holds and how it traces.
//
// Stage: jit (private; included by src/ only). ms/jit/jit.hpp declares the
// cache (FunctionCache) and the trace callback (TraceInputs) with these types
// incomplete, so a user's translation unit does not parse the IR, the passes
// or the dynamic-shape machinery.
#pragma once

#ifndef MS_BUILDING_LIBRARY
#error "ms/jit/detail/cache.hpp is internal to libms; include <ms/jit/jit.hpp> instead"
#endif

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ms/dyn/detail/generalize.hpp"
#include "ms/jit/compile.hpp"
#include "ms/jit/jit.hpp"
#include "ms/jit/trace.hpp"

namespace ms::compiler::detail {

/// What compiling one signature produced.
struct Compiled {
  std::shared_ptr<Executable> exe;
  std::vector<std::size_t> structure;  ///< vector lengths of the result, in flatten order
  std::string phase;
  std::string dump;
};

/// What the template side gives the cache on a miss.
using Traced = TraceResult;

/// Runs the template side's trace of `call` (its flat inputs get `shapes`
/// instead of the arguments' own when given).
TraceResult trace_call(const CallInfo& call, std::span<const Shape> shapes);

}  // namespace ms::compiler::detail
