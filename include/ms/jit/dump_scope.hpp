// ms/jit/dump_scope.hpp — the part of ms/jit/dump.hpp a cell's call needs:
// the dump scope of a cell marked with ms::set_dump(cell).
//
// Stage: jit. Split from dump.hpp so that <ms/nn/cell.hpp> does not pull in
// <filesystem> and the dump configuration (bench/compile_time.sh measures
// what a user's translation unit pays for each header).
#pragma once

#include <cstdint>
#include <string>

namespace ms::compiler::detail {

/// What set_dump and the configuration write for iteration `it` of a dumped
/// op: inputs, outputs (both false: nothing).
struct DumpSelection {
  bool inputs = false;   ///< write the inputs
  bool outputs = false;  ///< write the outputs
};
/// The selection for iteration `it` (all of both without a configuration).
DumpSelection dump_selection(std::int64_t it);
/// Whether ops traced inside a cell marked with set_dump(cell) are dumped
/// (no configuration, or dump_mode 2).
bool cell_dumps_active();
/// The dump scope of the ops traced now on this thread: the names of the
/// marked cells being called, outermost first, joined by '-' ("" outside any).
const std::string& current_dump_scope();
/// Enters the call of a marked cell named `name` (a scope for the ops it traces)
/// and returns its call number (its iteration), counting `eager` calls only.
std::int64_t enter_dump_scope(const void* cell, const std::string& name, bool eager);
/// Leaves the scope enter_dump_scope entered.
void leave_dump_scope();
/// Whether `cell` is in its own marked call on this thread (its inner call runs plainly).
bool in_dump_scope(const void* cell);
/// Resets the eager call count of `cell` (set_dump(cell, false)).
void forget_dump_cell(const void* cell);

/// The scope of one call of a marked cell (enter_dump_scope .. leave_dump_scope).
class DumpScopeGuard {
 public:
  /// Enters the scope of `cell` named `name` (an `eager` call counts as an iteration).
  DumpScopeGuard(const void* cell, const std::string& name, bool eager)
      : call(enter_dump_scope(cell, name, eager)) {}
  ~DumpScopeGuard() { leave_dump_scope(); }
  DumpScopeGuard(const DumpScopeGuard&) = delete;
  DumpScopeGuard& operator=(const DumpScopeGuard&) = delete;
  /// The cell's eager call number (its iteration).
  const std::int64_t call;
};

}  // namespace ms::compiler::detail
