// bench/bm_gemm.cpp — sgemm n x n x n, ms::matmul against torch::mm, with the
// FMA peak of this machine measured in the same binary.
//
//   BM_Sgemm_Ms/n:512/nt:2     ms::matmul(a, b), float32, 2 threads
//   BM_Sgemm_Torch/n:512/nt:2  torch::mm(a, b) on the same numbers
//   BM_Peak_Fma/nt:2           the AVX-512 (or AVX2) FMA peak of 2 threads
//
// items_per_second is flop/s (2 n^3 per product): GFLOP/s = items/s / 1e9.
#include "bench_common.hpp"
#include "ms/ops/linalg.hpp"

namespace {

std::int64_t flops(std::int64_t n) { return 2 * n * n * n; }

void BM_Sgemm_Ms(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  bench::set_threads(state.range(1));
  const ms::Tensor a = bench::random_tensor({n, n}, 1), b = bench::random_tensor({n, n}, 2);
  for (auto _ : state) {
    ms::Tensor c = ms::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * flops(n));
}

#if MS_BENCH_TORCH
void BM_Sgemm_Torch(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  bench::set_threads(state.range(1));
  c10::InferenceMode guard;
  const ms::Tensor ma = bench::random_tensor({n, n}, 1), mb = bench::random_tensor({n, n}, 2);
  const torch::Tensor a = bench::to_torch(ma), b = bench::to_torch(mb);
  if (!bench::check_same(state, ms::matmul(ma, mb), torch::mm(a, b), 1e-4)) return;
  for (auto _ : state) {
    torch::Tensor c = torch::mm(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * flops(n));
}
#endif

// Interleaved registration: for each (n, threads), ms then LibTorch.
void register_all() {
  for (std::int64_t nt : {1, 2}) {
    benchmark::RegisterBenchmark("BM_Peak_Fma", bench::BM_Peak_Fma)
        ->ArgName("nt")
        ->Arg(nt)
        ->UseRealTime();
    for (std::int64_t n : {256, 512, 1024}) {
      benchmark::RegisterBenchmark("BM_Sgemm_Ms", BM_Sgemm_Ms)
          ->ArgNames({"n", "nt"})
          ->Args({n, nt})
          ->UseRealTime();
#if MS_BENCH_TORCH
      benchmark::RegisterBenchmark("BM_Sgemm_Torch", BM_Sgemm_Torch)
          ->ArgNames({"n", "nt"})
          ->Args({n, nt})
          ->UseRealTime();
#endif
    }
  }
}

const int registered = (register_all(), 0);

}  // namespace

MS_BENCH_MAIN()
