// bench/openblas_core.hpp — OpenBLAS (LibTorch's BLAS, and ms's optional
// "openblas" GEMM backend) on the kernels this CPU runs best.
//
// OpenBLAS picks its kernels by CPU model when it loads, or by the
// environment's OPENBLAS_CORETYPE, and either can leave LibTorch far below
// what the CPU runs. Debian 12's 0.3.21 does not know every model: on an
// Intel Xeon of model 207 (Emerald Rapids, AVX-512 and AVX512_BF16) it falls
// back to its generic "Prescott" (SSE3) kernels, and torch::mm runs at 0.10
// of the FMA peak (bench/gemm_table.sh). On AMD's Zen it runs its AVX2
// "Haswell" kernels, also what an environment with OPENBLAS_CORETYPE=Haswell
// asks for: on a Zen 5 with full-width AVX-512 torch::mm then reaches 0.45
// of the peak at 256..1024, against 0.85-0.89 with the SkylakeX kernels and
// 0.87-0.90 with Cooperlake's (bm_gemm's BM_Sgemm_Torch, one run each).
// Either anchor flatters ms. Every bench binary that runs LibTorch or a
// training step (MS_BENCH_MAIN's, bm_attention, bm_generation, char_lm_torch,
// train_epoch and train_epoch_torch) calls use_best_openblas() first: when
// the kernels OpenBLAS runs are older than the newest ones the CPU's
// instruction set runs, it re-executes itself with OPENBLAS_CORETYPE naming
// those (a Haswell or Prescott from the environment is replaced too).
// MS_BENCH_OPENBLAS_CORETYPE=<name> makes it run <name>'s kernels instead,
// whatever the CPU (e.g. Haswell, to compare with a table measured so).
// (0.3.21 does not find the name "Cooperlake" in its list, an off-by-one
// fixed in 0.3.22, and then runs its own feature test, which picks Cooperlake
// on a CPU with AVX512_BF16: the name still gets those kernels, and names
// them on later versions.)
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

// OpenBLAS's x86-64 kernel families from oldest to newest; -1: a name not
// in this list (then the bench keeps what OpenBLAS chose).
inline int openblas_core_rank(const std::string& name) {
  if (name == "Prescott") return 0;
  if (name == "Haswell" || name == "Zen") return 1;  // Zen: the Haswell kernels
  if (name == "SkylakeX") return 2;
  if (name == "Cooperlake" || name == "SapphireRapids") return 3;
  return -1;
}

/// The newest OpenBLAS kernels this CPU's instruction set runs (nullptr:
/// none of the three).
inline const char* best_openblas_core() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512bf16")) return "Cooperlake";
  if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return nullptr;
}

/// See the file comment. Returns only if nothing needs changing or the
/// re-execution failed (then it says so on stderr).
inline void use_best_openblas(char** argv) {
  const std::string core = openblas_core();
  if (core == "none") return;
  const char* forced = std::getenv("MS_BENCH_OPENBLAS_CORETYPE");
  const char* want = forced != nullptr && *forced != '\0' ? forced : best_openblas_core();
  if (want == nullptr) return;
  // Asked for already: this is the re-executed process (OpenBLAS may name
  // the kernels it runs otherwise, see the file comment).
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  if (set != nullptr && std::string(set) == want) return;
  if (want != forced &&
      (openblas_core_rank(core) < 0 || openblas_core_rank(core) >= openblas_core_rank(want)))
    return;
  if (setenv("OPENBLAS_CORETYPE", want, 1) != 0) return;
  execv("/proc/self/exe", argv);
  std::fprintf(stderr,
               "bench: OpenBLAS runs its %s kernels on this CPU; re-running with "
               "OPENBLAS_CORETYPE=%s failed, so LibTorch's GEMMs are slower than they can be\n",
               core.c_str(), want);
  if (set != nullptr)
    setenv("OPENBLAS_CORETYPE", set, 1);
  else
    unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace bench
