// bench/bm_gemm.cpp — sgemm n x n x n, ms::matmul against torch::mm, with the
// FMA peak of this machine measured in the same binary; bfloat16 ms::matmul
// against the float32 one; and each GEMM backend of this build
// (ms::kernels::gemm_on) on square and training shapes.
//
//   BM_Sgemm_Ms/n:512/nt:2     ms::matmul(a, b), float32, 2 threads
//   BM_Sgemm_Torch/n:512/nt:2  torch::mm(a, b) on the same numbers
//   BM_Bmatmul_Ms/n:512/nt:1   ms::matmul on bfloat16 copies of a and b
//   BM_Bmatmul_Torch/n:512/nt:1  torch::mm on the same bfloat16 numbers
//   BM_Peak_Fma/nt:2           the AVX-512 (or AVX2) FMA peak of 2 threads
//   BM_Sgemm_libxsmm/m:64/n:512/k:784/ta:0/tb:1/nt:1
//                              gemm_on("libxsmm", ...) on raw buffers (also
//                              _eigen); beta 1 (ac:1) accumulates into C
//   BM_Bgemm/m:512/n:512/k:512/ta:0/tb:0/nt:1
//                              gemm_bf16 (bfloat16 A and B, float32 C) on
//                              the process's backend (the label)
//   BM_FewRows_Ms/m:4/n:576/k:192/nt:1
//                              ms::matmul(x, w.transpose(0, 1)), x [m, k],
//                              w [n, k] (Dense's layout) for a few rows (a
//                              batch of prompts, a short prompt); `w_GBps`:
//                              w's bytes read per second (each product reads
//                              w once); _Torch: torch::mm(x, w.t())
//   BM_Stream_Triad/nt:1       the memory bandwidth of a streaming pass
//
// items_per_second is flop/s (2 m n k per product, bfloat16 too): GFLOP/s =
// items/s / 1e9. Every GEMM row also reports `of_peak`: its flop/s over the
// float32 FMA peak of the same thread count, measured once in the process
// (best of 20 runs of bench::fma_kernel) when the first such row starts.
// bench/gemm_table.sh runs the rows and prints the table of docs/benchmarks.md.
#include "bench_common.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>
#include "ms/ops/linalg.hpp"

namespace {

std::int64_t flops(std::int64_t n) { return 2 * n * n * n; }

using bench::fma_peak;

// flop/s over the FMA peak of nt threads, as a rate counter.
benchmark::Counter of_peak(const benchmark::State& state, double flop_per_iter, int nt) {
  return benchmark::Counter(double(state.iterations()) * flop_per_iter / fma_peak(nt),
                            benchmark::Counter::kIsRate);
}

// ms::matmul on n x n inputs of `dtype` (float32, or bfloat16 copies).
void matmul_case(benchmark::State& state, ms::DType dtype) {
  const std::int64_t n = state.range(0);
  const int nt = static_cast<int>(state.range(1));
  fma_peak(nt);
  bench::set_threads(nt);
  const ms::Tensor a = bench::random_tensor({n, n}, 1).to(dtype),
                   b = bench::random_tensor({n, n}, 2).to(dtype);
  for (auto _ : state) {
    ms::Tensor c = ms::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * flops(n));
  state.counters["of_peak"] = of_peak(state, double(flops(n)), nt);
  state.SetLabel(ms::kernels::gemm_backend().name);
}

void BM_Sgemm_Ms(benchmark::State& state) { matmul_case(state, ms::float32); }
void BM_Bmatmul_Ms(benchmark::State& state) { matmul_case(state, ms::bfloat16); }

#if MS_BENCH_TORCH
// torch::mm on the numbers of matmul_case (bfloat16: converted by LibTorch
// from the same float32 values, so both round alike).
void torch_case(benchmark::State& state, bool bf16) {
  const std::int64_t n = state.range(0);
  const int nt = static_cast<int>(state.range(1));
  fma_peak(nt);
  bench::set_threads(nt);
  c10::InferenceMode guard;
  const ms::Tensor ma = bench::random_tensor({n, n}, 1), mb = bench::random_tensor({n, n}, 2);
  torch::Tensor a = bench::to_torch(ma), b = bench::to_torch(mb);
  if (bf16) {
    a = a.to(torch::kBFloat16);
    b = b.to(torch::kBFloat16);
  } else if (!bench::check_same(state, ms::matmul(ma, mb), torch::mm(a, b), 1e-4)) {
    return;
  }
  for (auto _ : state) {
    torch::Tensor c = torch::mm(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * flops(n));
  state.counters["of_peak"] = of_peak(state, double(flops(n)), nt);
}
void BM_Sgemm_Torch(benchmark::State& state) { torch_case(state, false); }
void BM_Bmatmul_Torch(benchmark::State& state) { torch_case(state, true); }
#endif

// One backend on C[m, n] = op(A) op(B) (+ C when ac, as a gradient
// accumulates), random values.
void BM_Sgemm_Backend(benchmark::State& state, const char* backend) {
  const std::int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  const float beta = state.range(5) != 0 ? 1.f : 0.f;
  const int nt = static_cast<int>(state.range(6));
  const double peak = fma_peak(nt);
  bench::set_threads(nt);
  const ms::Tensor a = bench::random_tensor({m * k}, 1), b = bench::random_tensor({k * n}, 2);
  std::vector<float> c(static_cast<std::size_t>(m * n));
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  if (!ms::kernels::gemm_on(backend, ta, tb, m, n, k, 1.f, pa, ta ? m : k, pb, tb ? k : n, 0.f,
                            c.data(), n)) {
    state.SkipWithError("backend not available in this build or on this CPU");
    return;
  }
  for (auto _ : state) {
    ms::kernels::gemm_on(backend, ta, tb, m, n, k, 1.f, pa, ta ? m : k, pb, tb ? k : n, beta,
                         c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  const double per = 2.0 * double(m) * double(n) * double(k);
  state.SetItemsProcessed(static_cast<std::int64_t>(double(state.iterations()) * per));
  state.counters["of_peak"] =
      benchmark::Counter(double(state.iterations()) * per / peak, benchmark::Counter::kIsRate);
}

// gemm_bf16 on the process's backend (bfloat16 A and B, float32 C): compare
// with BM_Sgemm_<backend> of the same shape.
void BM_Bgemm(benchmark::State& state) {
  const std::int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  const int nt = static_cast<int>(state.range(5));
  const double peak = fma_peak(nt);
  bench::set_threads(nt);
  const ms::Tensor a = bench::random_tensor({m * k}, 1).to(ms::bfloat16),
                   b = bench::random_tensor({k * n}, 2).to(ms::bfloat16);
  std::vector<float> c(static_cast<std::size_t>(m * n));
  const auto* pa = a.data<ms::bfloat16_t>();
  const auto* pb = b.data<ms::bfloat16_t>();
  for (auto _ : state) {
    ms::kernels::gemm_bf16(ta, tb, m, n, k, 1.f, pa, ta ? m : k, pb, tb ? k : n, 0.f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  const double per = 2.0 * double(m) * double(n) * double(k);
  state.SetItemsProcessed(static_cast<std::int64_t>(double(state.iterations()) * per));
  state.counters["of_peak"] =
      benchmark::Counter(double(state.iterations()) * per / peak, benchmark::Counter::kIsRate);
  state.SetLabel(ms::kernels::gemm_backend().name);
}

// x [m, k] times w^T, w [n, k]: ms::matmul on the transposed view (what
// Dense runs), or torch::mm(x, w.t()).
void few_rows(benchmark::State& state, bool torch_side) {
  const std::int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const int nt = static_cast<int>(state.range(3));
  fma_peak(nt);
  bench::set_threads(nt);
  const ms::Tensor x = bench::random_tensor({m, k}, 1), w = bench::random_tensor({n, k}, 2);
  if (torch_side) {
#if MS_BENCH_TORCH
    c10::InferenceMode guard;
    const torch::Tensor tx = bench::to_torch(x), tw = bench::to_torch(w);
    if (!bench::check_same(state, ms::matmul(x, w.transpose(0, 1)), torch::mm(tx, tw.t()), 1e-4))
      return;
    for (auto _ : state) {
      torch::Tensor c = torch::mm(tx, tw.t());
      benchmark::DoNotOptimize(c.data_ptr());
    }
#endif
  } else {
    for (auto _ : state) {
      ms::Tensor c = ms::matmul(x, w.transpose(0, 1));
      benchmark::DoNotOptimize(c.raw_data());
    }
  }
  const double per = 2.0 * double(m) * double(n) * double(k);
  state.SetItemsProcessed(static_cast<std::int64_t>(double(state.iterations()) * per));
  state.counters["of_peak"] = of_peak(state, per, nt);
  state.counters["w_GBps"] =
      benchmark::Counter(double(state.iterations()) * double(n) * double(k) * sizeof(float) / 1e9,
                         benchmark::Counter::kIsRate);
}
void BM_FewRows_Ms(benchmark::State& state) { few_rows(state, false); }
#if MS_BENCH_TORCH
void BM_FewRows_Torch(benchmark::State& state) { few_rows(state, true); }
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
      if (n == 256) continue;
      benchmark::RegisterBenchmark("BM_Bmatmul_Ms", BM_Bmatmul_Ms)
          ->ArgNames({"n", "nt"})
          ->Args({n, nt})
          ->UseRealTime();
#if MS_BENCH_TORCH
      benchmark::RegisterBenchmark("BM_Bmatmul_Torch", BM_Bmatmul_Torch)
          ->ArgNames({"n", "nt"})
          ->Args({n, nt})
          ->UseRealTime();
#endif
    }
    // m, n, k, ta, tb, ac: square products; MLP 784-512-256-10 at batch 64
    // (fc1 forward x W^T, input gradient dY W, weight gradient dY^T X
    // accumulated, and X^T dY); 256x512x256 plain, B^T and accumulated A^T;
    // fc1's forward at batch 16 and 256; char_lm's MLP at 4096 tokens (the
    // up projection 192 -> 768 forward x W^T and input gradient dY W, the
    // weight gradients dY^T X of both projections and of the 192 -> 576
    // attention in-projection).
    const std::int64_t shapes[][6] = {
        {256, 256, 256, 0, 0, 0},  {512, 512, 512, 0, 0, 0},  {1024, 1024, 1024, 0, 0, 0},
        {64, 512, 784, 0, 1, 0},   {64, 784, 512, 0, 0, 0},   {512, 784, 64, 1, 0, 1},
        {784, 512, 64, 1, 0, 0},   {256, 512, 256, 0, 0, 0},  {256, 512, 256, 0, 1, 0},
        {256, 512, 256, 1, 0, 1},  {16, 512, 784, 0, 1, 0},   {256, 512, 784, 0, 1, 0},
        {4096, 768, 192, 0, 1, 0}, {4096, 192, 768, 0, 0, 0}, {768, 192, 4096, 1, 0, 0},
        {192, 768, 4096, 1, 0, 0}, {576, 192, 4096, 1, 0, 0}};
    for (const auto& sh : shapes)
      for (const char* backend : {"libxsmm", "eigen"})
        benchmark::RegisterBenchmark((std::string("BM_Sgemm_") + backend).c_str(), BM_Sgemm_Backend,
                                     backend)
            ->ArgNames({"m", "n", "k", "ta", "tb", "ac", "nt"})
            ->Args({sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], nt})
            ->UseRealTime();
    for (const auto& sh : shapes)
      benchmark::RegisterBenchmark("BM_Bgemm", BM_Bgemm)
          ->ArgNames({"m", "n", "k", "ta", "tb", "nt"})
          ->Args({sh[0], sh[1], sh[2], sh[3], sh[4], nt})
          ->UseRealTime();
    // A few rows against char_lm's in-projection (576 x 192, in cache) and a
    // 16 MB weight (4096 x 1024, streamed from memory).
    benchmark::RegisterBenchmark("BM_Stream_Triad", bench::BM_Stream_Triad)
        ->ArgName("nt")
        ->Arg(nt)
        ->UseRealTime();
    for (const std::int64_t m : {2, 4, 8})
      for (const auto& [n, k] : {std::pair<std::int64_t, std::int64_t>{576, 192}, {4096, 1024}}) {
        benchmark::RegisterBenchmark("BM_FewRows_Ms", BM_FewRows_Ms)
            ->ArgNames({"m", "n", "k", "nt"})
            ->Args({m, n, k, nt})
            ->UseRealTime();
#if MS_BENCH_TORCH
        benchmark::RegisterBenchmark("BM_FewRows_Torch", BM_FewRows_Torch)
            ->ArgNames({"m", "n", "k", "nt"})
            ->Args({m, n, k, nt})
            ->UseRealTime();
#endif
      }
  }
}

const int registered = (register_all(), 0);

}  // namespace

MS_BENCH_MAIN()
