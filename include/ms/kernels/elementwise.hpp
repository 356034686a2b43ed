// ms/kernels/elementwise.hpp — the fused tile loop for elementwise programs.
//
// Stage: kernels. An elementwise expression (eager, from ms/expr, or a fused
// region of a compiled graph) is lowered into an EwProgram: a short list of
// instructions over registers, each register one tile (kTile elements) of one
// compute type. The output is produced tile by tile, each tile running the
// whole program while its intermediates stay in L1, with Eigen packets (SIMD)
// inside every instruction. One pass over memory: read the inputs, write the
// output. Tiles are split over the thread pool in fixed chunks, so results are
// bitwise identical for any thread count. A float32 program of exact
// instructions (EwExact) runs instead as AVX-512 code generated for it, every
// value in a vector register from load to store, over the same chunks and
// with the same results (ew_codegen_available).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/kernels/ew_instructions.hpp"

namespace ms::kernels {

/// Elements per tile: 2 KiB of float32 (register slots are sized for 8-byte
/// types, 4 KiB each), so a program's registers and the tiles of its inputs
/// and output stay in L1 together: the 4-op chain relu(a * b + c) * 0.5 on
/// 16M floats runs ~12% faster than with 2048 (BM_Chain_MsInto in
/// bench/bm_elementwise.cpp).
inline constexpr std::int64_t kTile = 512;
/// Elements per tile when a run streams from memory (more than kStreamBytes
/// of inputs and output, both counted over the whole run): short bursts per
/// stream keep every stream in flight. The 4-op chain above on 16M floats
/// moves 0.92-0.98x the STREAM triad's bandwidth with 128 (64 and 96 alike),
/// 0.64-0.73x with 512 (bench/chain_vs_triad.sh); programs on data in cache
/// lose up to 20% per element with 128, so they keep kTile.
inline constexpr std::int64_t kStreamTile = 128;
/// Total bytes of a run's inputs and output above which it streams (uses kStreamTile).
inline constexpr std::int64_t kStreamBytes = std::int64_t{8} << 20;
/// Outputs of at least this many bytes are written with non-temporal stores
/// (past the caches, without reading the lines first): larger than the
/// last-level cache of most CPUs, so whatever reads them next could not have
/// found them cached. The chain above, 2 threads: 1.05-1.12x the triad with
/// them, 0.89-0.96x without (bench/chain_vs_triad.sh).
inline constexpr std::int64_t kStreamOutBytes = std::int64_t{32} << 20;
/// Highest rank a fused program's inputs may have.
inline constexpr int kMaxEwRank = 16;

/// One instruction of an elementwise program.
struct EwInstr {
  /// What the instruction does.
  enum class Kind : std::uint8_t {
    Load,     ///< reg = input tensor `leaf` (broadcast to the output shape), converted to `type`
    Const,    ///< reg = the constant `value` in `type`
    Convert,  ///< reg = convert(reg a) to `type`
    Apply,    ///< reg = op(a[, b[, c]]) computed in the operands' register type
  };
  /// What the instruction does.
  Kind kind = Kind::Load;
  DType type =
      DType::Float32;    ///< register type of the result (bool, int32, int64, float32, float64)
  std::int16_t op = -1;  ///< EwInstructions id for Apply
  /// The register it writes.
  std::int16_t dst = 0;
  /// @{
  /// The operand registers (-1: unused).
  std::int16_t a = -1, b = -1, c = -1;
  /// @}
  std::int32_t leaf = -1;  ///< index into the program's inputs for Load
  Scalar value = 0;        ///< for Const
};

/// A lowered elementwise computation. Build it with EwBuilder.
struct EwProgram {
  /// The instructions, run in order for each tile.
  std::vector<EwInstr> instrs;
  /// The number of registers the instructions use.
  int num_regs = 0;
  int result = -1;               ///< register holding the result
  Shape shape;                   ///< output shape (broadcast of every input)
  DType dtype = DType::Float32;  ///< output dtype
};

/// The register type an elementwise computation in `t` uses: float16 and
/// bfloat16 -> float32; bool, small and unsigned integers -> int32 or int64.
/// TypeError naming `op` for complex and int4.
DType ew_register_type(DType t, std::string_view op);

/// Result of dtype inference for one elementwise op application.
struct EwTypes {
  DType out;      ///< dtype of the op's value (what a user sees)
  DType compute;  ///< register type the op computes in
  DType operand;  ///< register type its operands are converted to (cond of `where`: bool)
};

/// One operand as seen by type inference: a tensor value of `dtype`, or a C++
/// number (weak: it only lifts the kind, as PyTorch's Python scalars).
struct EwOperand {
  /// The tensor's dtype (unused for a number).
  DType dtype = DType::Float32;
  /// True for a C++ number.
  bool is_scalar = false;
  /// The number's kind (for a number).
  ScalarKind kind = ScalarKind::Float;
};

/// Dtype inference of the op `op_id` (EwInstructions id).
EwTypes ew_infer_types(int op_id, std::span<const EwOperand> operands);

/// Builds EwPrograms; registers are allocated as instructions are emitted.
class EwBuilder {
 public:
  /// Adds an input (index into the `inputs` given to ew_run); returns its register.
  int load(int leaf, DType reg_type);
  /// Adds the constant `v` in `reg_type`; returns its register.
  int constant(const Scalar& v, DType reg_type);
  /// Converts register `r` (of type `from`) to `to`; returns r when equal.
  int convert(int r, DType from, DType to);
  /// Adds op `op_id` (EwInstructions id) on registers a[, b[, c]], computed in
  /// `result_type`; returns the result's register.
  int apply(int op_id, DType result_type, int a, int b = -1, int c = -1);
  /// The program whose value is register `result`, of output `shape` and `dtype`.
  EwProgram finish(int result, Shape shape, DType dtype);

 private:
  int new_reg();
  EwProgram p_;
};

/// Runs `prog` over `inputs` into `out` (which has prog.shape and prog.dtype;
/// it may be non-contiguous). Inputs are broadcast to the output shape; an
/// input may alias the output only elementwise (same index).
void ew_run(const EwProgram& prog, std::span<const Tensor* const> inputs, const Tensor& out);

/// ew_run into the dense `out`, and in the same pass each element of `out`,
/// once stored, converted into `also` (dense, out's shape, any dtype):
/// `also` ends equal to cast(out, also.dtype()). `out`'s dtype must be a
/// register type (bool, int32, int64, float32, float64): TypeError otherwise,
/// ShapeError when either is not dense or the shapes differ.
void ew_run_also(const EwProgram& prog, std::span<const Tensor* const> inputs, const Tensor& out,
                 const Tensor& also);

/// True when this build and CPU can run straight float32 programs of exact
/// instructions (EwExact) as generated code: AVX-512 machine code per program,
/// each value in a vector register from load to store, instead of the tile
/// loop (a build with xbyak, compiled for and running on an AVX-512 CPU).
bool ew_codegen_available() noexcept;
/// Turns that code generation on or off for the process (on by default where
/// available; the environment variable MS_EW_CODEGEN=0 starts it off);
/// returns the previous setting. Results are the same either way.
bool set_ew_codegen(bool on) noexcept;
/// What code generation has done in this process so far.
struct EwCodegenStats {
  std::int64_t compiled = 0;  ///< programs compiled to machine code
  std::int64_t runs = 0;      ///< programs run (ew_run calls) on generated code
};
/// The counts above.
EwCodegenStats ew_codegen_stats() noexcept;

/// Allocates the output (the only allocation) and runs the program.
Tensor ew_eval(const EwProgram& prog, std::span<const Tensor* const> inputs);

/// The dense kernel of one op (EwInstructions id) on `arity` buffers of the
/// register type t: fn(in, out, n) computes out[i] = op(in[0][i], ...) for
/// i < n, the values ew_run computes (the same kernel). Null when the op has
/// none for t (bool, int32, int64, float32 or float64) or t is no register type.
using EwDenseFn = void (*)(const void* const* in, void* out, std::int64_t n);
/// The kernel described above for op `op_id` and register type `t` (null when none).
EwDenseFn ew_dense_kernel(int op_id, DType t) noexcept;

}  // namespace ms::kernels
