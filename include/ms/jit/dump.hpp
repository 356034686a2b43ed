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
// A dump configuration (MindSpore's MINDSPORE_DUMP_CONFIG file) chooses more:
// which ops (every op, the listed kernels, or what set_dump marked, including
// cells: ms::set_dump(cell) in ms/nn/cell.hpp), which iterations (the n-th run
// of a compiled graph, the n-th call of an eager cell), inputs and/or outputs,
// and the directory (<path>/<net_name>). It is read from $MS_DUMP_CONFIG (or
// $MINDSPORE_DUMP_CONFIG) at first use, or given with ms::set_dump_config:
//
//   {"common_dump_settings": {"dump_mode": 1, "path": "/tmp/dump", "net_name": "Net",
//                             "iteration": "0|5-8", "input_output": 2,
//                             "kernels": ["matmul"], "saved_data": "tensor"}}
//
// The files are written by the io stage through the active ms::io::FileSystem
// (ms/io/file_system.hpp: POSIX unless an application registered another), each
// one atomically as ms::io::save_npy writes it. The jit stage sits below io, so
// io installs the writer (compiler::detail::set_dump_writer) when libms is loaded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ms/core/std_parts.hpp"
#include "ms/core/tensor.hpp"
#include "ms/jit/dump_scope.hpp"

namespace ms {

/// Marks (or unmarks) the op named `target` (an op-table name) for dumping.
/// ValueError when there is no such op.
void set_dump(std::string_view target, bool enabled = true);
/// True when the op `target` is dumped in compiled graphs: marked by set_dump
/// (without a configuration, or with dump_mode 2), every op (dump_mode 0), or
/// named in `kernels` (dump_mode 1).
bool dump_enabled(std::string_view target);
/// Where dumps go: `dir` (created when needed, through ms::io::file_system()). Default:
/// $MS_DUMP_DIR, else ./ms_dump. A dump configuration's `path / net_name` comes first.
void set_dump_dir(const std::filesystem::path& dir);
/// The directory dumps are written to (see set_dump_dir).
std::filesystem::path dump_dir();

/// Which tensors of a dumped op or cell are written (MindSpore's input_output).
enum class DumpInputOutput : std::uint8_t {
  Both = 0,    ///< inputs and outputs
  Input = 1,   ///< inputs only
  Output = 2,  ///< outputs only
};

/// The part of MindSpore's dump configuration ms maps (`common_dump_settings`;
/// other keys, such as support_device or op_debug_mode, are accepted and ignored).
struct DumpConfig {
  /// 0: every op of compiled graphs; 1: the ops named in `kernels`; 2: only
  /// what set_dump marked (ops and cells).
  int dump_mode = 0;
  std::filesystem::path path;                            ///< files go to `path / net_name`
  std::string net_name = "Net";                          ///< the subdirectory of `path`
  std::string iteration = "all";                         ///< "all", or ranges: "0|5-8|100-120"
  DumpInputOutput input_output = DumpInputOutput::Both;  ///< what is written
  std::vector<std::string> kernels;                      ///< dump_mode 1: op-table names ("matmul")
  /// Whether iteration `it` (0-based) is dumped.
  bool iteration_selected(std::int64_t it) const;
};

/// Parses a dump configuration from JSON text; `source` names it in errors (a
/// file path, or "set_dump_config"). ValueError naming the source, the key,
/// what was expected and what was given.
DumpConfig parse_dump_config(std::string_view json, std::string_view source);
/// Uses the configuration in the file `path_or_json`, or the JSON text itself
/// when it starts with '{'; an empty string removes the configuration (back to
/// plain set_dump). Graphs compiled before recompile.
///   ms::set_dump_config("/etc/dump.json");
void set_dump_config(const std::string& path_or_json);
/// The configuration in use: set_dump_config's, else the file named by
/// $MS_DUMP_CONFIG or $MINDSPORE_DUMP_CONFIG (read at first use), else none.
std::optional<DumpConfig> dump_config();

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
