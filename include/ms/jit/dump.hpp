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
//
// The files are written by the io stage through the active ms::io::FileSystem
// (ms/io/file_system.hpp: POSIX unless an application registered another), each
// one atomically as ms::io::save_npy writes it. The jit stage sits below io, so
// io installs the writer (compiler::detail::set_dump_writer) when libms is loaded.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "ms/core/std_parts.hpp"
#include "ms/core/tensor.hpp"

namespace ms {

/// Marks (or unmarks) the op named `target` (an op-table name) for dumping.
/// ValueError when there is no such op.
void set_dump(std::string_view target, bool enabled = true);
/// True when `target` is marked.
bool dump_enabled(std::string_view target);
/// Where dumps go: `dir` (created when needed, through ms::io::file_system()). Default:
/// $MS_DUMP_DIR, else ./ms_dump.
void set_dump_dir(const std::filesystem::path& dir);
/// The directory dumps are written to (see set_dump_dir).
std::filesystem::path dump_dir();

namespace compiler::detail {
/// Writes `t` as `<dump_dir>/<name>.npy` (float16/bfloat16 as float32, int4 as int8)
/// with the installed DumpWriter; ValueError naming the file when it fails or when
/// no writer is installed.
void dump_tensor(const Tensor& t, const std::string& name);

/// Writes one dump file: creates the directory `dir` when missing and writes the
/// tensor as .npy at `path` (inside `dir`).
using DumpWriter =
    std::function<void(const std::string& dir, const std::string& path, const Tensor& t)>;
/// Installs `w` as the dump writer and returns the previous one. The io stage
/// installs one writing through ms::io::file_system() when libms is loaded. Thread-safe.
/// Example: `auto prev = ms::compiler::detail::set_dump_writer(my_writer);`
DumpWriter set_dump_writer(DumpWriter w);
}  // namespace compiler::detail

}  // namespace ms
