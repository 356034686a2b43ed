// bench/bm_conv.cpp — conv2d, ms::conv2d against torch::conv2d, float32 NCHW.
//
//   BM_Conv2d_Ms/nt:N     x [64, 32, 28, 28] * w [64, 32, 3, 3], padding 1, no bias
//   BM_Conv2d_Torch/nt:N  the same with torch::conv2d (LibTorch picks its algorithm)
//
// items_per_second is flop/s (2 * N * O * OH * OW * C * KH * KW per call).
#include "bench_common.hpp"
#include "ms/ops/nn.hpp"

namespace {

constexpr std::int64_t kN = 64, kC = 32, kH = 28, kW = 28, kO = 64, kK = 3;
constexpr std::int64_t kFlops = 2 * kN * kO * kH * kW * kC * kK * kK;  // padding 1: OH = H

void BM_Conv2d_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const ms::Tensor x = bench::random_tensor({kN, kC, kH, kW}, 1),
                   w = bench::random_tensor({kO, kC, kK, kK}, 2);
  const ms::Conv2dOptions opts{.padding = {1, 1}};
  for (auto _ : state) {
    ms::Tensor y = ms::conv2d(x, w, std::nullopt, opts);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kFlops);
}

#if MS_BENCH_TORCH
void BM_Conv2d_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const ms::Tensor mx = bench::random_tensor({kN, kC, kH, kW}, 1),
                   mw = bench::random_tensor({kO, kC, kK, kK}, 2);
  const torch::Tensor x = bench::to_torch(mx), w = bench::to_torch(mw);
  if (!bench::check_same(state, ms::conv2d(mx, mw, std::nullopt, {.padding = {1, 1}}),
                         torch::conv2d(x, w, {}, 1, 1), 1e-4))
    return;
  for (auto _ : state) {
    torch::Tensor y = torch::conv2d(x, w, {}, /*stride=*/1, /*padding=*/1);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * kFlops);
}
#endif

void register_all() {
  for (std::int64_t nt : {1, 2}) {
    benchmark::RegisterBenchmark("BM_Conv2d_Ms", BM_Conv2d_Ms)
        ->ArgName("nt")
        ->Arg(nt)
        ->UseRealTime();
#if MS_BENCH_TORCH
    benchmark::RegisterBenchmark("BM_Conv2d_Torch", BM_Conv2d_Torch)
        ->ArgName("nt")
        ->Arg(nt)
        ->UseRealTime();
#endif
  }
}

const int registered = (register_all(), 0);

}  // namespace

MS_BENCH_MAIN()
