// ms/jit/options.hpp — the options of ms::jit that a user sets: jit level and
// execution order.
//
// Stage: jit (public; ms/jit/jit.hpp includes it without the passes' interface).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string_view>

namespace ms {

/// How much ms::jit optimizes a graph (MindSpore's `jit_level`):
/// `{.jit_level = ms::JitLevel::O0}`.
enum class JitLevel : std::uint8_t {
  O0,  ///< debugging: dead-code elimination and execution order only, no fusion
  O1,  ///< + CSE, constant folding, algebraic simplification, fusion (the default)
};
/// The order a compiled graph runs its nodes in: `{.exec_order = ms::ExecOrder::Dfs}`.
enum class ExecOrder : std::uint8_t {
  Bfs,  ///< level by level (the default)
  Dfs,  ///< depth first from the outputs: lower peak memory
};

/// A jit level from text ("O0", "O1"; case-insensitive), as a config file or a
/// command line gives it. ValueError naming the accepted values otherwise.
JitLevel parse_jit_level(std::string_view text);
/// An execution order from text ("bfs", "dfs"; case-insensitive). ValueError otherwise.
ExecOrder parse_exec_order(std::string_view text);
/// "O0" or "O1".
std::string_view to_string(JitLevel level);
/// "bfs" or "dfs".
std::string_view to_string(ExecOrder order);
/// Prints to_string(level).
std::ostream& operator<<(std::ostream& os, JitLevel level);
/// Prints to_string(order).
std::ostream& operator<<(std::ostream& os, ExecOrder order);

}  // namespace ms

namespace ms::compiler {

#ifdef NDEBUG
/// Whether the IR verifier runs after each pass by default: on in debug builds, off under NDEBUG.
inline constexpr bool kVerifyDefault = false;
#else
inline constexpr bool kVerifyDefault = true;
#endif

}  // namespace ms::compiler
