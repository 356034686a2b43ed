// ms/jit/dump.hpp — dumping the tensors of marked ops in compiled graphs.
//
// Stage: jit. As MindSpore's `set_dump`: ops marked with
// `ms::set_dump("matmul")` write their inputs and outputs as .npy files, one
// set per call, into the dump directory, when they run inside a compiled graph.
// Marking bumps the hook version, so graphs compiled before recompile; marked
// ops are never fused (each keeps its own tensors to write).
//
//   ms::set_dump_dir("/tmp/dump");
//   ms::set_dump("matmul");        // MatMul.<node>.<call>.input.0.npy, ... .output.0.npy
//   f(x);
//   ms::set_dump("matmul", false);
#pragma once

#include <filesystem>
#include <string_view>

#include "ms/core/tensor.hpp"

namespace ms {

/// Marks (or unmarks) the op named `target` (an op-table name) for dumping.
/// ValueError when there is no such op.
void set_dump(std::string_view target, bool enabled = true);
/// True when `target` is marked.
bool dump_enabled(std::string_view target);
/// Where dumps go: `dir` (created when needed). Default: $MS_DUMP_DIR, else ./ms_dump.
void set_dump_dir(const std::filesystem::path& dir);
/// The directory dumps are written to (see set_dump_dir).
std::filesystem::path dump_dir();

namespace compiler::detail {
/// Writes `t` as `<dump_dir>/<name>.npy` (float16/bfloat16 as float32, int4 as int8).
void dump_tensor(const Tensor& t, const std::string& name);
}  // namespace compiler::detail

}  // namespace ms
