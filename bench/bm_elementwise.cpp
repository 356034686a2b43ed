// bench/bm_elementwise.cpp — elementwise maths, ms expression templates
// against LibTorch eager, with the STREAM triad bandwidth measured in the same
// binary.
//
//   BM_Chain_Ms/nt:N        ms::Tensor y = ms::relu(a * b + c) * 0.5f;  16M floats, one fused pass
//   BM_Chain_MsInto/nt:N    the same expression assigned into an existing y (no allocation)
//   BM_Chain_Torch/nt:N     torch::relu(a * b + c) * 0.5;  four eager ops, four results
//   BM_Chain_TorchInto/nt:N mul_out into an existing y, then add_, relu_, mul_ in place
//   BM_ChainBf16_Ms/nt:N    the chain on bfloat16 a, b, c (computed in float32 registers,
//                           rounded to bfloat16 on store), fresh result
//   BM_ChainBf16_MsInto/nt:N the same into an existing bfloat16 y
//   BM_Stream_Triad/nt:N    a[i] = b[i] + s * c[i], a plain loop (the bandwidth reference)
//   BM_ChainVsTriad_Ms/nt:N, BM_ChainVsTriad_MsInto/nt:N  the chain (fresh, into) timed in pairs
//                           with the triad over its own buffers: counter vs_triad
//                           (bench::versus_triad; bench/chain_vs_triad.sh)
//   BM_SmallChain20_*/nt:N  20 elementwise ops on 32x32 (one ms expression vs 20 eager ops)
//   BM_SmallAdd_*/nt:N      one 32x32 add
//   BM_ColumnSum_*/nt:N     sum over the rows of [4096, 768] (a bias gradient of char_lm's
//                           MLP: batch 32 x context 128 rows), keepdim
//   BM_RowSum_*/nt:N        sum over the columns of the same tensor
//   BM_RowSum32_*/nt:N      the same floats as [98304, 32], summed over rows of 32 (the row
//                           sums of attention's backward in char_lm: head size 32)
//   BM_Gelu_*/nt:N          gelu (erf form) of [4096, 768] (char_lm's MLP activation)
//   BM_GeluGrad_*/nt:N      its gradient, ms::gelu_grad(g, x) against at::gelu_backward
//   BM_SoftmaxXent_*/nt:N   per-row softmax cross-entropy of [4096, 256] logits (char_lm's
//                           loss), ms::softmax_cross_entropy against at::cross_entropy_loss
//                           (reduction None)
//   BM_LayerNorm_*/nt:N     layer_norm over rows of 192 of [4096, 192] (char_lm's), ms::layer_norm
//                           against at::layer_norm; bytes: x, y
//   BM_LayerNormSmall_*/nt:N the same over [256, 192] (in cache: the rows' statistics, not the
//                           memory, set its speed)
//   BM_LayerNormGrad_*/nt:N layer_norm's gradients (dx, dgamma, dbeta) over rows of 192 of
//                           [4096, 192] (char_lm's), the layer_norm_grad op against
//                           at::native_layer_norm_backward (which reads the forward's saved
//                           mean and rstd; ms recomputes them); bytes: x, dy, dx
//   BM_StridedColumn_*/nt:N a * b over [2^20, 1] with b every other row of a [2^21, 1] tensor
//                           (a strided input over an output whose last dim is 1); bytes: a, b, y
//
// bytes_per_second of the chain counts 3 reads + 1 write of 4 bytes per element
// (2 bytes for bfloat16: the data a fused pass must move), whatever each
// library actually moves.
#include "bench_common.hpp"

namespace {

constexpr std::int64_t kBig = std::int64_t{1} << 24;  // 16M floats, 64 MiB per tensor
constexpr std::int64_t kSmall = 32;

void chain_bytes(benchmark::State& state) {
  state.SetBytesProcessed(state.iterations() * kBig * 4 * std::int64_t(sizeof(float)));
  state.SetItemsProcessed(state.iterations() * kBig);
}

// ---------------------------------------------------------------- fused chain, 16M

/// Evaluates `fn` once and drops its result, before a benchmark's loop. Each
/// repetition runs the benchmark function anew, and its set-up (three fresh
/// 64 MiB inputs) pushes the 64 MiB blocks of earlier cases out of ms's
/// per-thread block cache (128 MiB): without this call the first timed
/// iteration of every repetition mapped a fresh result (16384 page faults when
/// the kernel has no huge page at hand, ~0.3 s), and the fresh-result chain
/// measured 0.04-1.37x the triad from one repetition to the next in the same
/// process, with or without LibTorch's cases in it. A loop in a program pays
/// that mapping once, on its first call.
template <class F>
void fresh_result_warmup(F&& fn) {
  ms::Tensor y = fn();
  benchmark::DoNotOptimize(y.raw_data());
}

void BM_Chain_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const ms::Tensor a = bench::random_tensor({kBig}, 1), b = bench::random_tensor({kBig}, 2),
                   c = bench::random_tensor({kBig}, 3);
  // One call before the loop, as a program's second call: its result block is
  // then in ms's cache, as in any loop (see fresh_result_warmup).
  fresh_result_warmup([&] { return ms::relu(a * b + c) * 0.5f; });
  for (auto _ : state) {
    ms::Tensor y = ms::relu(a * b + c) * 0.5f;
    benchmark::DoNotOptimize(y.raw_data());
  }
  chain_bytes(state);
}

// The same pass into a preallocated result: the kernel's own speed, without
// the cost of a fresh 64 MiB allocation (page faults) per call.
void BM_Chain_MsInto(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const ms::Tensor a = bench::random_tensor({kBig}, 1), b = bench::random_tensor({kBig}, 2),
                   c = bench::random_tensor({kBig}, 3);
  ms::Tensor y = ms::zeros({kBig});
  for (auto _ : state) {
    ms::assign(y, ms::relu(a * b + c) * 0.5f);
    benchmark::DoNotOptimize(y.raw_data());
    benchmark::ClobberMemory();
  }
  chain_bytes(state);
}

// The chain and the triad over the same buffers, pass by pass
// (bench::versus_triad): the ratio bench/chain_vs_triad.sh reports.
void chain_vs_triad(benchmark::State& state, bool into) {
  bench::set_threads(state.range(0));
  const ms::Tensor a = bench::random_tensor({kBig}, 1), b = bench::random_tensor({kBig}, 2),
                   c = bench::random_tensor({kBig}, 3);
  fresh_result_warmup([&] { return ms::relu(a * b + c) * 0.5f; });
  const std::int64_t bytes = kBig * 4 * std::int64_t(sizeof(float));
  if (into) {
    ms::Tensor y = ms::zeros({kBig});
    bench::versus_triad(
        state, a, b,
        [&] {
          ms::assign(y, ms::relu(a * b + c) * 0.5f);
          return y;
        },
        bytes);
  } else {
    bench::versus_triad(
        state, a, b, [&] { return ms::Tensor(ms::relu(a * b + c) * 0.5f); }, bytes);
  }
}
void BM_ChainVsTriad_Ms(benchmark::State& state) { chain_vs_triad(state, false); }
void BM_ChainVsTriad_MsInto(benchmark::State& state) { chain_vs_triad(state, true); }

// ---------------------------------------------------------------- the chain on bfloat16

void BM_ChainBf16(benchmark::State& state, bool into) {
  bench::set_threads(state.range(0));
  const ms::Tensor a = bench::random_tensor({kBig}, 1).to(ms::bfloat16),
                   b = bench::random_tensor({kBig}, 2).to(ms::bfloat16),
                   c = bench::random_tensor({kBig}, 3).to(ms::bfloat16);
  ms::Tensor y = ms::zeros({kBig}, ms::bfloat16);
  if (!into) fresh_result_warmup([&] { return ms::relu(a * b + c) * 0.5f; });
  for (auto _ : state) {
    if (into) {
      ms::assign(y, ms::relu(a * b + c) * 0.5f);
      benchmark::DoNotOptimize(y.raw_data());
      benchmark::ClobberMemory();
    } else {
      ms::Tensor r = ms::relu(a * b + c) * 0.5f;
      benchmark::DoNotOptimize(r.raw_data());
    }
  }
  state.SetBytesProcessed(state.iterations() * kBig * 4 * 2);
  state.SetItemsProcessed(state.iterations() * kBig);
}
void BM_ChainBf16_Ms(benchmark::State& state) { BM_ChainBf16(state, false); }
void BM_ChainBf16_MsInto(benchmark::State& state) { BM_ChainBf16(state, true); }

#if MS_BENCH_TORCH
void BM_Chain_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const ms::Tensor ma = bench::random_tensor({kBig}, 1), mb = bench::random_tensor({kBig}, 2),
                   mc = bench::random_tensor({kBig}, 3);
  const torch::Tensor a = bench::to_torch(ma), b = bench::to_torch(mb), c = bench::to_torch(mc);
  {
    const ms::Tensor ym = ms::relu(ma * mb + mc) * 0.5f;
    if (!bench::check_same(state, ym, torch::relu(a * b + c) * 0.5, 1e-6)) return;
  }
  for (auto _ : state) {
    torch::Tensor y = torch::relu(a * b + c) * 0.5;
    benchmark::DoNotOptimize(y.data_ptr());
  }
  chain_bytes(state);
}

// LibTorch's best eager form without allocation: into an existing result,
// then in place (still four passes over memory).
void BM_Chain_TorchInto(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const torch::Tensor a = bench::to_torch(bench::random_tensor({kBig}, 1)),
                      b = bench::to_torch(bench::random_tensor({kBig}, 2)),
                      c = bench::to_torch(bench::random_tensor({kBig}, 3));
  torch::Tensor y = torch::zeros({kBig});
  for (auto _ : state) {
    torch::mul_out(y, a, b);
    y.add_(c).relu_().mul_(0.5);
    benchmark::DoNotOptimize(y.data_ptr());
    benchmark::ClobberMemory();
  }
  chain_bytes(state);
}
#endif

// ---------------------------------------------------------------- 20 ops on 32x32

// The 20 ops: bench::chain20 (bench_common.hpp), four rounds of add, mul, sub,
// relu, tanh: one fused ms expression, 20 eager LibTorch ops.
using bench::chain20;

void BM_SmallChain20_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const ms::Tensor a = bench::random_tensor({kSmall, kSmall}, 4),
                   b = bench::random_tensor({kSmall, kSmall}, 5);
  for (auto _ : state) {
    ms::Tensor y = chain20(a, b);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * 20 * kSmall * kSmall);
}

#if MS_BENCH_TORCH
void BM_SmallChain20_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const ms::Tensor ma = bench::random_tensor({kSmall, kSmall}, 4),
                   mb = bench::random_tensor({kSmall, kSmall}, 5);
  const torch::Tensor a = bench::to_torch(ma), b = bench::to_torch(mb);
  if (!bench::check_same(state, chain20(ma, mb), chain20(a, b), 1e-5)) return;
  for (auto _ : state) {
    torch::Tensor y = chain20(a, b);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * 20 * kSmall * kSmall);
}
#endif

// ---------------------------------------------------------------- one 32x32 add

void BM_SmallAdd_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const ms::Tensor a = bench::random_tensor({kSmall, kSmall}, 6),
                   b = bench::random_tensor({kSmall, kSmall}, 7);
  for (auto _ : state) {
    ms::Tensor c = a + b;
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kSmall * kSmall);
}

#if MS_BENCH_TORCH
void BM_SmallAdd_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const ms::Tensor ma = bench::random_tensor({kSmall, kSmall}, 6),
                   mb = bench::random_tensor({kSmall, kSmall}, 7);
  const torch::Tensor a = bench::to_torch(ma), b = bench::to_torch(mb);
  if (!bench::check_same(state, ma + mb, a + b, 0)) return;
  for (auto _ : state) {
    torch::Tensor c = a + b;
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * kSmall * kSmall);
}
#endif

// ---------------------------------------------------------------- sums of [4096, 768]

constexpr std::int64_t kSumRows = 4096, kSumCols = 768;

void sum_bytes(benchmark::State& state) {
  state.SetBytesProcessed(state.iterations() * kSumRows * kSumCols * std::int64_t(sizeof(float)));
}

// The kSumRows x kSumCols floats as [kSumRows kSumCols / cols, cols].
ms::Shape sum_shape(std::int64_t cols) { return {kSumRows * kSumCols / cols, cols}; }

void BM_Sum_Ms(benchmark::State& state, std::int64_t axis, std::int64_t cols = kSumCols) {
  bench::set_threads(state.range(0));
  const ms::Tensor x = bench::random_tensor(sum_shape(cols), 8);
  for (auto _ : state) {
    ms::Tensor y = ms::sum(x, {axis}, true);
    benchmark::DoNotOptimize(y.raw_data());
  }
  sum_bytes(state);
}
void BM_ColumnSum_Ms(benchmark::State& state) { BM_Sum_Ms(state, 0); }
void BM_RowSum_Ms(benchmark::State& state) { BM_Sum_Ms(state, 1); }
void BM_RowSum32_Ms(benchmark::State& state) { BM_Sum_Ms(state, 1, 32); }

#if MS_BENCH_TORCH
void BM_Sum_Torch(benchmark::State& state, std::int64_t axis, std::int64_t cols = kSumCols) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const ms::Tensor mx = bench::random_tensor(sum_shape(cols), 8);
  const torch::Tensor x = bench::to_torch(mx);
  if (!bench::check_same(state, ms::sum(mx, {axis}, true), x.sum({axis}, true), 1e-3)) return;
  for (auto _ : state) {
    torch::Tensor y = x.sum({axis}, true);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  sum_bytes(state);
}
void BM_ColumnSum_Torch(benchmark::State& state) { BM_Sum_Torch(state, 0); }
void BM_RowSum_Torch(benchmark::State& state) { BM_Sum_Torch(state, 1); }
void BM_RowSum32_Torch(benchmark::State& state) { BM_Sum_Torch(state, 1, 32); }
#endif

// ---------------------------------------------------------------- gelu of [4096, 768]

// Times y = fn(); fn returns a tensor, not an ms expression (which would be
// evaluated by nobody). Bytes: `floats` float32 values read or written per call.
template <class F>
void result_case(benchmark::State& state, std::int64_t floats, F&& fn) {
  for (auto _ : state) {
    auto y = fn();
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * floats * std::int64_t(sizeof(float)));
}

// Times y = fn() on [4096, 768] inputs, `tensors` of them read or written.
template <class F>
void gelu_case(benchmark::State& state, int tensors, F&& fn) {
  result_case(state, tensors * kSumRows * kSumCols, std::forward<F>(fn));
}

// x and g of the gelu cases, the same values on both sides.
ms::Tensor gelu_x() { return bench::random_tensor({kSumRows, kSumCols}, 9); }
ms::Tensor gelu_g() { return bench::random_tensor({kSumRows, kSumCols}, 10); }

void BM_Gelu_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const ms::Tensor x = gelu_x();
  gelu_case(state, 2, [&]() -> ms::Tensor { return ms::gelu(x); });
}

void BM_GeluGrad_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const ms::Tensor x = gelu_x(), g = gelu_g();
  gelu_case(state, 3, [&]() -> ms::Tensor { return ms::gelu_grad(g, x); });
}

#if MS_BENCH_TORCH
void BM_Gelu_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const ms::Tensor mx = gelu_x();
  const torch::Tensor x = bench::to_torch(mx);
  if (!bench::check_same(state, ms::gelu(mx), torch::gelu(x), 1e-5)) return;
  gelu_case(state, 2, [&] { return torch::gelu(x); });
}

void BM_GeluGrad_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const ms::Tensor mx = gelu_x(), mg = gelu_g();
  const torch::Tensor x = bench::to_torch(mx), g = bench::to_torch(mg);
  if (!bench::check_same(state, ms::gelu_grad(mg, mx), at::gelu_backward(g, x), 1e-5)) return;
  gelu_case(state, 3, [&] { return at::gelu_backward(g, x); });
}
#endif

// ------------------------------------- softmax cross-entropy of [4096, 256] logits

constexpr std::int64_t kXentRows = 4096,
                       kXentClasses = 256;  // char_lm: batch x context rows, 256 byte classes

ms::Tensor xent_logits() { return bench::random_tensor({kXentRows, kXentClasses}, 11); }
ms::Tensor xent_labels() {
  std::vector<std::int64_t> v(static_cast<std::size_t>(kXentRows));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int64_t>(i * 7 % kXentClasses);
  return ms::from_vector(v, ms::Shape{kXentRows});
}

void BM_SoftmaxXent_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const ms::Tensor x = xent_logits(), y = xent_labels();
  result_case(state, kXentRows * kXentClasses,
              [&]() -> ms::Tensor { return ms::softmax_cross_entropy(x, y); });
}

#if MS_BENCH_TORCH
void BM_SoftmaxXent_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const ms::Tensor mx = xent_logits(), my = xent_labels();
  const torch::Tensor x = bench::to_torch(mx);
  const torch::Tensor y = torch::from_blob(const_cast<std::int64_t*>(my.data<std::int64_t>()),
                                           {kXentRows}, torch::kInt64)
                              .clone();
  if (!bench::check_same(state, ms::softmax_cross_entropy(mx, my),
                         at::cross_entropy_loss(x, y, {}, at::Reduction::None), 1e-5))
    return;
  result_case(state, kXentRows * kXentClasses,
              [&] { return at::cross_entropy_loss(x, y, {}, at::Reduction::None); });
}
#endif

// ---------------------------------------------- layer_norm's gradients, [4096, 192]

constexpr std::int64_t kNormRows = 4096, kNormCols = 192;  // char_lm: batch x context, d_model

std::vector<ms::Tensor> norm_inputs() {
  return {bench::random_tensor({kNormRows, kNormCols}, 12), bench::random_tensor({kNormCols}, 13),
          bench::random_tensor({kNormRows, kNormCols}, 14)};  // x, gamma, dy
}

// layer_norm(x, gamma, beta) over `rows` rows of kNormCols.
void layer_norm_ms(benchmark::State& state, std::int64_t rows) {
  bench::set_threads(state.range(0));
  const ms::Tensor x = bench::random_tensor({rows, kNormCols}, 12),
                   gamma = bench::random_tensor({kNormCols}, 13),
                   beta = bench::random_tensor({kNormCols}, 14);
  result_case(state, 2 * rows * kNormCols, [&] { return ms::layer_norm(x, gamma, beta); });
}
void BM_LayerNorm_Ms(benchmark::State& state) { layer_norm_ms(state, kNormRows); }
void BM_LayerNormSmall_Ms(benchmark::State& state) { layer_norm_ms(state, 256); }

#if MS_BENCH_TORCH
void layer_norm_torch(benchmark::State& state, std::int64_t rows) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const ms::Tensor x = bench::random_tensor({rows, kNormCols}, 12),
                   gamma = bench::random_tensor({kNormCols}, 13),
                   beta = bench::random_tensor({kNormCols}, 14);
  const torch::Tensor tx = bench::to_torch(x), tg = bench::to_torch(gamma),
                      tb = bench::to_torch(beta);
  const auto run = [&] { return at::layer_norm(tx, {kNormCols}, tg, tb, 1e-5); };
  if (!bench::check_same(state, ms::layer_norm(x, gamma, beta), run(), 1e-4)) return;
  result_case(state, 2 * rows * kNormCols, run);
}
void BM_LayerNorm_Torch(benchmark::State& state) { layer_norm_torch(state, kNormRows); }
void BM_LayerNormSmall_Torch(benchmark::State& state) { layer_norm_torch(state, 256); }
#endif

void BM_LayerNormGrad_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const std::vector<ms::Tensor> in = norm_inputs();
  const ms::ops::OpDef& grad = ms::ops::op("layer_norm_grad");
  result_case(state, 3 * kNormRows * kNormCols, [&] { return ms::ops::call(grad, in); });
}

#if MS_BENCH_TORCH
void BM_LayerNormGrad_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const std::vector<ms::Tensor> in = norm_inputs();
  const torch::Tensor x = bench::to_torch(in[0]), gamma = bench::to_torch(in[1]),
                      dy = bench::to_torch(in[2]), beta = torch::zeros_like(gamma);
  const auto [y, mean, rstd] = at::native_layer_norm(x, {kNormCols}, gamma, beta, 1e-5);
  const auto grads = [&] {
    return at::native_layer_norm_backward(dy, x, {kNormCols}, mean, rstd, gamma, beta,
                                          {true, true, true});
  };
  const std::vector<ms::Tensor> ms_grads = ms::ops::call(ms::ops::op("layer_norm_grad"), in);
  if (!bench::check_same(state, ms_grads[0], std::get<0>(grads()), 1e-4)) return;
  result_case(state, 3 * kNormRows * kNormCols, grads);
}
#endif

// ------------------------------------ a strided input over [2^20, 1]

constexpr std::int64_t kColumnRows = std::int64_t{1} << 20;

// a [2^20, 1] and every other row of a [2^21, 1] tensor.
std::pair<ms::Tensor, ms::Tensor> column_inputs() {
  return {bench::random_tensor({kColumnRows, 1}, 15),
          bench::random_tensor({2 * kColumnRows, 1}, 16).slice(0, 0, 2 * kColumnRows, 2)};
}

void BM_StridedColumn_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const auto [a, b] = column_inputs();
  result_case(state, 3 * kColumnRows, [&]() -> ms::Tensor { return a * b; });
}

#if MS_BENCH_TORCH
void BM_StridedColumn_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const auto [ma, mb] = column_inputs();
  const torch::Tensor a = bench::to_torch(ma),
                      b = bench::to_torch(mb.contiguous()).reshape({kColumnRows, 1});
  const torch::Tensor full = torch::empty({2 * kColumnRows, 1});
  full.slice(0, 0, 2 * kColumnRows, 2).copy_(b);
  const torch::Tensor bs = full.slice(0, 0, 2 * kColumnRows, 2);
  if (!bench::check_same(state, ms::Tensor(ma * mb), a * bs, 0)) return;
  result_case(state, 3 * kColumnRows, [&] { return a * bs; });
}
#endif

// Interleaved registration: for each case and thread count, ms then LibTorch.
void reg(const char* name, void (*fn)(benchmark::State&), std::int64_t nt) {
  benchmark::RegisterBenchmark(name, fn)->ArgName("nt")->Arg(nt)->UseRealTime();
}

// BM_<case>_Ms, then BM_<case>_Torch when LibTorch is built in.
#if MS_BENCH_TORCH
#define MS_REG_PAIR(name, nt)              \
  do {                                     \
    reg(#name "_Ms", name##_Ms, nt);       \
    reg(#name "_Torch", name##_Torch, nt); \
  } while (false)
#else
#define MS_REG_PAIR(name, nt) reg(#name "_Ms", name##_Ms, nt)
#endif

void register_all() {
  for (std::int64_t nt : {1, 2}) {
    reg("BM_Stream_Triad", bench::BM_Stream_Triad, nt);
    reg("BM_Chain_Ms", BM_Chain_Ms, nt);
    reg("BM_Chain_MsInto", BM_Chain_MsInto, nt);
    reg("BM_ChainVsTriad_Ms", BM_ChainVsTriad_Ms, nt);
    reg("BM_ChainVsTriad_MsInto", BM_ChainVsTriad_MsInto, nt);
    reg("BM_ChainBf16_Ms", BM_ChainBf16_Ms, nt);
    reg("BM_ChainBf16_MsInto", BM_ChainBf16_MsInto, nt);
#if MS_BENCH_TORCH
    reg("BM_Chain_Torch", BM_Chain_Torch, nt);
    reg("BM_Chain_TorchInto", BM_Chain_TorchInto, nt);
#endif
    MS_REG_PAIR(BM_SmallChain20, nt);
    MS_REG_PAIR(BM_SmallAdd, nt);
    MS_REG_PAIR(BM_ColumnSum, nt);
    MS_REG_PAIR(BM_RowSum, nt);
    MS_REG_PAIR(BM_RowSum32, nt);
    MS_REG_PAIR(BM_Gelu, nt);
    MS_REG_PAIR(BM_GeluGrad, nt);
    MS_REG_PAIR(BM_SoftmaxXent, nt);
    MS_REG_PAIR(BM_LayerNorm, nt);
    MS_REG_PAIR(BM_LayerNormSmall, nt);
    MS_REG_PAIR(BM_LayerNormGrad, nt);
    MS_REG_PAIR(BM_StridedColumn, nt);
  }
}

const int registered = (register_all(), 0);

}  // namespace

MS_BENCH_MAIN()
