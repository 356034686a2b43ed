// bench/openblas_core.hpp — OpenBLAS (LibTorch's BLAS, and ms's optional
// "openblas" GEMM backend) on the kernels this CPU runs best.
//
// OpenBLAS picks its kernels by CPU model when it loads. Debian 12's 0.3.21
// does not know every model: on an Intel Xeon of model 207 (Emerald Rapids,
// AVX-512 and AVX512_BF16) it falls back to its generic "Prescott" (SSE3)
// kernels, and torch::mm runs at 0.10 of the FMA peak (bench/gemm_table.sh),
// an anchor that flatters ms. Every bench binary that runs LibTorch or a
// training step (MS_BENCH_MAIN's, bm_attention, bm_generation, char_lm_torch,
// train_epoch and train_epoch_torch) calls use_best_openblas() first: when
// OpenBLAS chose Prescott and OPENBLAS_CORETYPE is unset, it re-executes
// itself with OPENBLAS_CORETYPE naming the newest kernels the CPU's
// instruction set runs. An OPENBLAS_CORETYPE the user set is kept. (0.3.21
// does not find the name "Cooperlake" in its list, an off-by-one fixed in
// 0.3.22, and then runs its own feature test, which picks Cooperlake on a CPU
// with AVX512_BF16: the name still gets those kernels, and names them on
// later versions.)
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace bench {

/// The kernels OpenBLAS runs in this process ("none" without OpenBLAS).
inline std::string openblas_core() {
  using Corename = char* (*)();
  const auto corename = reinterpret_cast<Corename>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return corename != nullptr ? std::string(corename()) : std::string("none");
}

/// See the file comment. Returns only if nothing needs changing or the
/// re-execution failed (then it says so on stderr).
inline void use_best_openblas(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || openblas_core() != "Prescott") return;
  const char* best = nullptr;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512bf16"))
    best = "Cooperlake";
  else if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    best = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    best = "Haswell";
#endif
  if (best == nullptr) return;
  if (setenv("OPENBLAS_CORETYPE", best, 1) != 0) return;
  execv("/proc/self/exe", argv);
  std::fprintf(stderr,
               "bench: OpenBLAS runs its generic Prescott kernels on this CPU; re-running with "
               "OPENBLAS_CORETYPE=%s failed, so LibTorch's GEMMs are slower than they can be\n",
               best);
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace bench
