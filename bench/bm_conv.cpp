// bench/bm_conv.cpp — conv2d, ms against LibTorch, float32 NCHW, and each of
// ms's convolution algorithms on the Fashion-MNIST CNN's convolutions.
//
//   BM_Conv2d_Ms/nt:N     x [64, 32, 28, 28] * w [64, 32, 3, 3], padding 1, no bias
//   BM_Conv2d_Torch/nt:N  the same with torch::conv2d (LibTorch picks its algorithm)
//
//   BM_Conv<Pass>_<Algo>/layer:L/nt:N  one pass (Fwd, GradIn, GradW) of the CNN's
//       layer L (1: x [64, 1, 28, 28] * w [32, 1, 3, 3]; 2: x [64, 32, 14, 14] *
//       w [64, 32, 3, 3]; both padding 1) on the kernels directly, with the
//       algorithm forced (Direct, Winograd, Im2col; skipped where it does not
//       apply) or chosen (Auto), and LibTorch's (Torch: conv2d, or
//       at::convolution_backward for one gradient);
//   BM_Conv<Pass>_Bf16<Algo>/layer:L/nt:N  the same pass on bfloat16 x, w and gy
//       (conv2d_bf16, conv2d_grad_input_bf16, conv2d_grad_weight_bf16: float32
//       sums, bfloat16 results) with the algorithm forced (Direct: libxsmm's
//       bf16 kernels; Im2col: gemm_bf16) or chosen (Auto, labelled with the
//       choice; skipped where the bfloat16 kernels do not take the pass);
//   BM_ConvFwd_Bf16Op/layer:L/nt:N  ms::conv2d on bfloat16 tensors: what a
//       user gets, the conversions to and from float32 included where the
//       bfloat16 kernels do not take the shape.
//   BM_Conv<Pass>_Floor/layer:L/nt:N  no arithmetic: only the memory traffic no
//       algorithm of the pass can skip, each input read once and the output
//       written once (forward: x, w -> y; input gradient: gy, w -> dx; weight
//       gradient: x, gy -> dw), split over N threads. Its rate, counted in the
//       pass's flops like the others, is the most any kernel of the pass can
//       reach on this machine: conv1's passes move 6.4 MB of gy or y for 29
//       MFLOP.
//   BM_Peak_Fma/nt:N  the FMA peak of the same process.
//
// items_per_second is flop/s counted as direct convolution (2 * N * O * OH *
// OW * C * KH * KW per pass, also for Winograd), `of_peak` that over the FMA
// peak of N threads measured in this process (best of 20 runs at start).
#include <algorithm>
#include <array>
#include <chrono>
#include <utility>

#include "bench_common.hpp"
#include "ms/kernels/conv.hpp"
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

// ---------------------------------------------------------------- the CNN's layers, per algorithm

using ms::kernels::ConvAlgo;
using ms::kernels::ConvPass;

using bench::fma_peak;

// Layer 1 or 2 of the CNN at batch 64 (padding 1, "same").
ms::kernels::Conv2dGeometry cnn_layer(std::int64_t layer) {
  const std::int64_t c = layer == 1 ? 1 : 32, o = layer == 1 ? 32 : 64, hw = layer == 1 ? 28 : 14;
  return {.n = 64,
          .c = c,
          .h = hw,
          .w = hw,
          .o = o,
          .kh = 3,
          .kw = 3,
          .oh = hw,
          .ow = hw,
          .ph = 1,
          .pw = 1};
}

double conv_flops(const ms::kernels::Conv2dGeometry& g) {
  return 2.0 * double(g.n * g.o * g.oh * g.ow) * double(g.c / g.groups * g.kh * g.kw);
}

const char* algo_name(ConvAlgo a) {
  return a == ConvAlgo::Direct ? "direct" : a == ConvAlgo::Winograd ? "winograd" : "im2col";
}

void set_rate(benchmark::State& state, double per, int nt) {
  state.SetItemsProcessed(static_cast<std::int64_t>(double(state.iterations()) * per));
  state.counters["of_peak"] = benchmark::Counter(double(state.iterations()) * per / fma_peak(nt),
                                                 benchmark::Counter::kIsRate);
}

// A pass's operands (random x, w and gy, fixed seeds, in `dtype`) and its
// output: y for the forward, dx for the input gradient, dw for the weight gradient.
struct PassTensors {
  ms::Tensor x, w, gy, out;
  PassTensors(const ms::kernels::Conv2dGeometry& g, ConvPass pass, ms::DType dtype = ms::float32)
      : x(bench::random_tensor({g.n, g.c, g.h, g.w}, 1).to(dtype)),
        w(bench::random_tensor({g.o, g.c, g.kh, g.kw}, 2).to(dtype)),
        gy(bench::random_tensor({g.n, g.o, g.oh, g.ow}, 3).to(dtype)),
        out(ms::empty(pass == ConvPass::Forward     ? gy.shape()
                      : pass == ConvPass::GradInput ? x.shape()
                                                    : w.shape(),
                      dtype)) {}
};

// One pass of layer `layer` on ms's kernels with algorithm `algo`.
void BM_Conv_Ms(benchmark::State& state, ConvPass pass, ConvAlgo algo) {
  const int nt = static_cast<int>(state.range(1));
  ms::kernels::Conv2dGeometry g = cnn_layer(state.range(0));
  g.algo = algo;
  const ConvAlgo ran = ms::kernels::conv2d_algorithm(g, pass);
  if (algo != ConvAlgo::Auto && ran != algo) {
    state.SkipWithError("the algorithm does not apply to this shape in this build");
    return;
  }
  fma_peak(nt);
  bench::set_threads(nt);
  const auto [x, w, gy, out] = PassTensors(g, pass);
  for (auto _ : state) {
    if (pass == ConvPass::Forward)
      ms::kernels::conv2d<float>(x.data<float>(), w.data<float>(), nullptr, out.data<float>(), g);
    else if (pass == ConvPass::GradInput)
      ms::kernels::conv2d_grad_input<float>(gy.data<float>(), w.data<float>(), out.data<float>(),
                                            g);
    else
      ms::kernels::conv2d_grad_weight<float>(x.data<float>(), gy.data<float>(), out.data<float>(),
                                             g);
    benchmark::DoNotOptimize(out.raw_data());
    benchmark::ClobberMemory();
  }
  set_rate(state, conv_flops(g), nt);
  state.SetLabel(algo_name(ran));
}

// One pass of layer `layer` on bfloat16 operands with algorithm `algo`
// (skipped where the bfloat16 kernels do not run it).
void BM_Conv_Bf16(benchmark::State& state, ConvPass pass, ConvAlgo algo) {
  const int nt = static_cast<int>(state.range(1));
  ms::kernels::Conv2dGeometry g = cnn_layer(state.range(0));
  g.algo = algo;
  const ConvAlgo ran = ms::kernels::conv2d_bf16_algorithm(g, pass);
  if (ran == ConvAlgo::Auto || (algo != ConvAlgo::Auto && ran != algo)) {
    state.SkipWithError("the bfloat16 kernels do not run this pass with this algorithm here");
    return;
  }
  fma_peak(nt);
  bench::set_threads(nt);
  const auto [x, w, gy, out] = PassTensors(g, pass, ms::bfloat16);
  const ms::Tensor bias = ms::zeros({g.o});
  using B = ms::bfloat16_t;
  for (auto _ : state) {
    if (pass == ConvPass::Forward)
      ms::kernels::conv2d_bf16(x.data<B>(), w.data<B>(), bias.data<float>(), out.data<B>(), g);
    else if (pass == ConvPass::GradInput)
      ms::kernels::conv2d_grad_input_bf16(gy.data<B>(), w.data<B>(), out.data<B>(), g);
    else
      ms::kernels::conv2d_grad_weight_bf16(x.data<B>(), gy.data<B>(), out.data<B>(), g);
    benchmark::DoNotOptimize(out.raw_data());
    benchmark::ClobberMemory();
  }
  set_rate(state, conv_flops(g), nt);
  state.SetLabel(algo_name(ran));
}

// ms::conv2d on bfloat16 tensors (layer `layer`'s forward, padding 1).
void BM_ConvFwd_Bf16Op(benchmark::State& state) {
  const int nt = static_cast<int>(state.range(1));
  const ms::kernels::Conv2dGeometry g = cnn_layer(state.range(0));
  fma_peak(nt);
  bench::set_threads(nt);
  const PassTensors t(g, ConvPass::Forward, ms::bfloat16);
  for (auto _ : state) {
    ms::Tensor y = ms::conv2d(t.x, t.w, std::nullopt, {.padding = {1, 1}});
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_rate(state, conv_flops(g), nt);
  const ConvAlgo ran = ms::kernels::conv2d_bf16_algorithm(g, ConvPass::Forward);
  state.SetLabel(ran == ConvAlgo::Auto ? "float32" : algo_name(ran));
}

// The memory floor of one pass of layer `layer` (see the file comment): the
// inputs read with bench::FloatReader and the output filled, each thread
// taking its share of every buffer.
void BM_Conv_Floor(benchmark::State& state, ConvPass pass) {
  const int nt = static_cast<int>(state.range(1));
  const ms::kernels::Conv2dGeometry g = cnn_layer(state.range(0));
  fma_peak(nt);
  bench::set_threads(nt);
  const PassTensors t(g, pass);
  const std::array<ms::Tensor, 2> in = pass == ConvPass::Forward     ? std::array{t.x, t.w}
                                       : pass == ConvPass::GradInput ? std::array{t.gy, t.w}
                                                                     : std::array{t.x, t.gy};
  float* const out = t.out.data<float>();
  for (auto _ : state) {
#pragma omp parallel num_threads(nt)
    {
      const std::int64_t th = omp_get_thread_num();
      const auto share = [&](const ms::Tensor& b) {
        const std::int64_t n = b.numel();
        return std::pair(n * th / nt, n * (th + 1) / nt);
      };
      bench::FloatReader reader;
      for (const ms::Tensor& b : in) {
        const auto [i0, i1] = share(b);
        reader.read(b.data<float>() + i0, i1 - i0, false);
      }
      reader.keep();
      const auto [o0, o1] = share(t.out);
      std::fill(out + o0, out + o1, 1.0f);
    }
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  set_rate(state, conv_flops(g), nt);
}

#if MS_BENCH_TORCH
// The same pass in LibTorch (its own choice of algorithm).
void BM_Conv_Torch(benchmark::State& state, ConvPass pass) {
  const int nt = static_cast<int>(state.range(1));
  const ms::kernels::Conv2dGeometry g = cnn_layer(state.range(0));
  fma_peak(nt);
  bench::set_threads(nt);
  c10::InferenceMode guard;
  const PassTensors t(g, pass);
  const torch::Tensor x = bench::to_torch(t.x), w = bench::to_torch(t.w),
                      gy = bench::to_torch(t.gy);
  const std::array<bool, 3> mask = {pass == ConvPass::GradInput, pass == ConvPass::GradWeight,
                                    false};
  for (auto _ : state) {
    if (pass == ConvPass::Forward) {
      torch::Tensor y = torch::conv2d(x, w, {}, 1, 1);
      benchmark::DoNotOptimize(y.data_ptr());
    } else {
      auto r = at::convolution_backward(gy, x, w, c10::nullopt, {1, 1}, {1, 1}, {1, 1}, false,
                                        {0, 0}, 1, mask);
      benchmark::DoNotOptimize(std::get<0>(r).defined() ? std::get<0>(r).data_ptr()
                                                        : std::get<1>(r).data_ptr());
    }
  }
  set_rate(state, conv_flops(g), nt);
}
#endif

void register_layers() {
  const std::pair<const char*, ConvPass> passes[] = {
      {"Fwd", ConvPass::Forward}, {"GradIn", ConvPass::GradInput}, {"GradW", ConvPass::GradWeight}};
  const std::pair<const char*, ConvAlgo> algos[] = {{"Auto", ConvAlgo::Auto},
                                                    {"Direct", ConvAlgo::Direct},
                                                    {"Winograd", ConvAlgo::Winograd},
                                                    {"Im2col", ConvAlgo::Im2col}};
  const std::pair<const char*, ConvAlgo> bf16_algos[] = {
      {"Auto", ConvAlgo::Auto}, {"Direct", ConvAlgo::Direct}, {"Im2col", ConvAlgo::Im2col}};
  for (std::int64_t nt : {1, 2}) {
    benchmark::RegisterBenchmark("BM_Peak_Fma", bench::BM_Peak_Fma)->ArgName("nt")->Arg(nt);
    for (std::int64_t layer : {1, 2}) {
      for (const auto& [pname, pass] : passes) {
        for (const auto& [aname, algo] : algos)
          benchmark::RegisterBenchmark(
              (std::string("BM_Conv") + pname + "_" + aname).c_str(),
              [pass, algo](benchmark::State& s) { BM_Conv_Ms(s, pass, algo); })
              ->ArgNames({"layer", "nt"})
              ->Args({layer, nt})
              ->UseRealTime();
        benchmark::RegisterBenchmark((std::string("BM_Conv") + pname + "_Floor").c_str(),
                                     [pass](benchmark::State& s) { BM_Conv_Floor(s, pass); })
            ->ArgNames({"layer", "nt"})
            ->Args({layer, nt})
            ->UseRealTime();
#if MS_BENCH_TORCH
        benchmark::RegisterBenchmark((std::string("BM_Conv") + pname + "_Torch").c_str(),
                                     [pass](benchmark::State& s) { BM_Conv_Torch(s, pass); })
            ->ArgNames({"layer", "nt"})
            ->Args({layer, nt})
            ->UseRealTime();
#endif
      }
      for (const auto& [pname, pass] : passes)
        for (const auto& [aname, algo] : bf16_algos)
          benchmark::RegisterBenchmark(
              (std::string("BM_Conv") + pname + "_Bf16" + aname).c_str(),
              [pass, algo](benchmark::State& s) { BM_Conv_Bf16(s, pass, algo); })
              ->ArgNames({"layer", "nt"})
              ->Args({layer, nt})
              ->UseRealTime();
      benchmark::RegisterBenchmark("BM_ConvFwd_Bf16Op", BM_ConvFwd_Bf16Op)
          ->ArgNames({"layer", "nt"})
          ->Args({layer, nt})
          ->UseRealTime();
    }
  }
}

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

const int registered = (register_all(), register_layers(), 0);

}  // namespace

MS_BENCH_MAIN()
