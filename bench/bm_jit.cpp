// bench/bm_jit.cpp — ms::jit (traced, optimized, cached graphs) against
// LibTorch eager (and TorchScript for the small chain), in the same binary.
//
//   BM_JitChain20_Ms/nt:N       cache hit of ms::jit(chain20) on two 32x32 floats
//   BM_JitChain20_MsEager/nt:N  the same 20 ops as one eager ms expression (no jit)
//   BM_JitChain20_Torch/nt:N    the same 20 ops, LibTorch eager (InferenceMode)
//   BM_JitChain20_Script/nt:N   the same 20 ops as a TorchScript function
//   BM_Mlp_Ms/nt:N              cache hit of the jitted MLP 784-512-256-10, batch 1
//   BM_Mlp_MsEager/nt:N         the same MLP, eager ms ops (no jit)
//   BM_Mlp_TorchAddmm/nt:N      addmm(b, x, w) then relu_ in place, LibTorch eager
//   BM_Mlp_TorchLinear/nt:N     linear(x, w^T, b) then relu_ in place (weights [out, in])
//   BM_Mlp_TorchAddmv/nt:N      addmv(b, w^T, x) then relu_ in place (x as a vector: gemv)
//   BM_Mlp_ReadWeights/nt:1     one pass reading the MLP's weights (the floor of batch 1)
//   BM_EagerShape8_Ms/nt:1      eight eager shape ops (views) on a [4, 6, 32] tensor:
//                               what calling an op costs beyond its work
//   BM_EagerShape8_Torch/nt:1   the same eight ops, LibTorch eager (InferenceMode)
//   BM_JitChain_Ms/nt:N         ms::jit(relu(a * b + c) * 0.5) on 16M floats (GB/s)
//   BM_JitChain_MsInto/nt:N     the same pass assigned into an existing y (no fresh result)
//   BM_JitChain_Torch/nt:N      the same, 4 LibTorch eager ops
//   BM_JitChainVsTriad_Ms/nt:N, BM_JitChainVsTriad_MsInto/nt:N  the two jitted chains timed
//                               in pairs with the triad over their own buffers: counter
//                               vs_triad (bench::versus_triad; bench/chain_vs_triad.sh)
//   BM_FreshPages/nt:1          aligned_alloc + first touch + free of 64 MiB (page-fault cost)
//   BM_Stream_Triad/nt:N        the bandwidth reference (bench_common.hpp)
//   BM_JitCompile_Mlp/nt:N      the first call of a fresh ms::jit of the MLP:
//                               trace + optimize + first run (report only)
//   BM_Dispatch_Ms/nt:2         an empty ms::kernels::parallel_for of 2 chunks (what
//                               sharing one op over the threads costs at least)
//   BM_Dispatch_Torch/nt:2      the same with at::parallel_for (LibTorch's OpenMP)
//   BM_Dispatch_Omp/nt:2        a bare `#pragma omp parallel` of 2 threads (libgomp)
//
// Each jitted benchmark warms up (first call compiles and records, the second
// plans the arena) and checks after its loop that the function compiled
// exactly once, so the loop measures cache hits only. Results are checked
// against the eager ms form and, in the LibTorch twins, against LibTorch.
#include <array>
#include <cstdlib>
#include <cstring>

#include "bench_common.hpp"

#if MS_BENCH_TORCH
#include <torch/jit.h>
#endif

namespace {

constexpr std::int64_t kSmall = 32;
constexpr std::int64_t kBig = std::int64_t{1} << 24;  // 16M floats, 64 MiB per tensor

using bench::chain20;

/// Fails the benchmark unless `f` compiled exactly once (the loop ran cache hits).
template <class F>
void check_cache_hits(benchmark::State& state, const F& f) {
  if (f.compile_count() != 1)
    state.SkipWithError(("expected 1 compile, got " + std::to_string(f.compile_count())).c_str());
}

// ---------------------------------------------------------------- 20 ops on 32x32

struct Chain20Inputs {
  ms::Tensor a = bench::random_tensor({kSmall, kSmall}, 4);
  ms::Tensor b = bench::random_tensor({kSmall, kSmall}, 5);
};

auto make_jit_chain20() {
  return ms::jit([](const auto& a, const auto& b) { return chain20(a, b); });
}

void chain20_items(benchmark::State& state) {
  state.SetItemsProcessed(state.iterations() * 20 * kSmall * kSmall);
}

void BM_JitChain20_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const Chain20Inputs in;
  auto f = make_jit_chain20();
  {
    const ms::Tensor want = chain20(in.a, in.b);
    if (!bench::check_same(state, f(in.a, in.b), want, 1e-6, "jit vs eager ms")) return;
    if (!bench::check_same(state, f(in.a, in.b), want, 1e-6, "jit (planned) vs eager ms")) return;
  }
  for (auto _ : state) {
    ms::Tensor y = f(in.a, in.b);
    benchmark::DoNotOptimize(y.raw_data());
  }
  check_cache_hits(state, f);
  chain20_items(state);
}

void BM_JitChain20_MsEager(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const Chain20Inputs in;
  for (auto _ : state) {
    ms::Tensor y = chain20(in.a, in.b);
    benchmark::DoNotOptimize(y.raw_data());
  }
  chain20_items(state);
}

#if MS_BENCH_TORCH
void BM_JitChain20_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const Chain20Inputs in;
  const torch::Tensor a = bench::to_torch(in.a), b = bench::to_torch(in.b);
  {
    auto f = make_jit_chain20();
    if (!bench::check_same(state, f(in.a, in.b), chain20(a, b), 1e-5)) return;
  }
  for (auto _ : state) {
    torch::Tensor y = chain20(a, b);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  chain20_items(state);
}

// The same chain as TorchScript (profiling executor; warmed up past its
// profiling runs before the loop).
void BM_JitChain20_Script(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const Chain20Inputs in;
  const torch::Tensor a = bench::to_torch(in.a), b = bench::to_torch(in.b);
  const std::shared_ptr<torch::jit::CompilationUnit> cu = torch::jit::compile(R"JIT(
def round5(x, a, b):
    return torch.tanh(torch.relu((x + b) * b - a))

def chain20(a, b):
    return round5(round5(round5(round5(a, a, b), a, b), a, b), a, b)
)JIT");
  torch::jit::Function& fn = cu->get_function("chain20");
  torch::Tensor y;
  for (int i = 0; i < 20; ++i) y = fn({a, b}).toTensor();
  {
    auto f = make_jit_chain20();
    if (!bench::check_same(state, f(in.a, in.b), y, 1e-5)) return;
  }
  for (auto _ : state) {
    torch::Tensor r = fn({a, b}).toTensor();
    benchmark::DoNotOptimize(r.data_ptr());
  }
  chain20_items(state);
}
#endif

// ---------------------------------------------------------------- eager shape ops

/// Eight shape ops, each a view of its input (`T`: ms::Tensor or torch::Tensor):
/// no data moves, so the time is the cost of calling them.
template <class T>
std::pair<T, T> shape8(const T& x) {
  const T rows = x.reshape({24, kSmall}).unsqueeze(0).squeeze(0);
  const T part = rows.transpose(0, 1).slice(1, 0, 12).select(0, 3);
  const T moved = x.permute({2, 0, 1}).select(0, 5);
  return {part, moved};
}

void BM_EagerShape8_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const ms::Tensor x = bench::random_tensor({4, 6, kSmall}, 6);
  for (auto _ : state) {
    auto [a, b] = shape8(x);
    benchmark::DoNotOptimize(a.raw_data());
    benchmark::DoNotOptimize(b.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * 8);
}

#if MS_BENCH_TORCH
void BM_EagerShape8_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const ms::Tensor xm = bench::random_tensor({4, 6, kSmall}, 6);
  const torch::Tensor x = bench::to_torch(xm);
  {
    const auto [a, b] = shape8(xm);
    const auto [ta, tb] = shape8(x);
    if (!bench::check_same(state, a, ta, 0) || !bench::check_same(state, b, tb, 0)) return;
  }
  for (auto _ : state) {
    auto [a, b] = shape8(x);
    benchmark::DoNotOptimize(a.data_ptr());
    benchmark::DoNotOptimize(b.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * 8);
}
#endif

// ---------------------------------------------------------------- MLP 784-512-256-10, batch 1

/// The MLP's parameters (uniform in +-1/sqrt(fan_in), fixed seeds) and input.
struct Mlp {
  ms::Tensor w1 = bench::random_tensor({784, 512}, 11, -0.0357f, 0.0357f);
  ms::Tensor b1 = bench::random_tensor({512}, 12, -0.0357f, 0.0357f);
  ms::Tensor w2 = bench::random_tensor({512, 256}, 13, -0.0442f, 0.0442f);
  ms::Tensor b2 = bench::random_tensor({256}, 14, -0.0442f, 0.0442f);
  ms::Tensor w3 = bench::random_tensor({256, 10}, 15, -0.0625f, 0.0625f);
  ms::Tensor b3 = bench::random_tensor({10}, 16, -0.0625f, 0.0625f);
  ms::Tensor x = bench::random_tensor({1, 784}, 17);

  /// The forward pass; eager on ms::Tensor, traced under ms::jit.
  template <class T>
  ms::Tensor forward(const T& in) const {
    ms::Tensor h1 = ms::relu(ms::matmul(in, w1) + b1);
    ms::Tensor h2 = ms::relu(ms::matmul(h1, w2) + b2);
    return ms::matmul(h2, w3) + b3;
  }
  auto jitted() const {
    return ms::jit([this](const auto& in) { return forward(in); });
  }
};

void mlp_items(benchmark::State& state) {
  // Multiply-adds of the three layers, as flops.
  state.SetItemsProcessed(state.iterations() * 2 * (784 * 512 + 512 * 256 + 256 * 10));
}

void BM_Mlp_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const Mlp m;
  auto f = m.jitted();
  {
    const ms::Tensor want = m.forward(m.x);
    if (!bench::check_same(state, f(m.x), want, 1e-5, "jit vs eager ms")) return;
    if (!bench::check_same(state, f(m.x), want, 1e-5, "jit (planned) vs eager ms")) return;
  }
  for (auto _ : state) {
    ms::Tensor y = f(m.x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  check_cache_hits(state, f);
  mlp_items(state);
}

void BM_Mlp_MsEager(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const Mlp m;
  for (auto _ : state) {
    ms::Tensor y = m.forward(m.x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  mlp_items(state);
}

#if MS_BENCH_TORCH
/// LibTorch copies of the MLP: weights [in, out] for addmm, [out, in]
/// (contiguous) for linear.
struct TorchMlp {
  torch::Tensor w1, b1, w2, b2, w3, b3, x, w1t, w2t, w3t;
  explicit TorchMlp(const Mlp& m)
      : w1(bench::to_torch(m.w1)),
        b1(bench::to_torch(m.b1)),
        w2(bench::to_torch(m.w2)),
        b2(bench::to_torch(m.b2)),
        w3(bench::to_torch(m.w3)),
        b3(bench::to_torch(m.b3)),
        x(bench::to_torch(m.x)),
        w1t(w1.t().contiguous()),
        w2t(w2.t().contiguous()),
        w3t(w3.t().contiguous()) {}
  torch::Tensor addmm() const {
    torch::Tensor h1 = torch::addmm(b1, x, w1).relu_();
    torch::Tensor h2 = torch::addmm(b2, h1, w2).relu_();
    return torch::addmm(b3, h2, w3);
  }
  torch::Tensor linear() const {
    torch::Tensor h1 = torch::linear(x, w1t, b1).relu_();
    torch::Tensor h2 = torch::linear(h1, w2t, b2).relu_();
    return torch::linear(h2, w3t, b3);
  }
  /// Batch 1 as matrix-vector products (BLAS gemv: no packing of the weights).
  torch::Tensor addmv() const {
    torch::Tensor h1 = torch::addmv(b1, w1t, x.view({784})).relu_();
    torch::Tensor h2 = torch::addmv(b2, w2t, h1).relu_();
    return torch::addmv(b3, w3t, h2);
  }
  enum class Form { Addmm, Linear, Addmv };
  torch::Tensor forward(Form f) const {
    return f == Form::Addmm ? addmm() : f == Form::Linear ? linear() : addmv();
  }
};

template <TorchMlp::Form kForm>
void BM_Mlp_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const Mlp m;
  const TorchMlp t(m);
  {
    auto f = m.jitted();
    if (!bench::check_same(state, f(m.x), t.forward(kForm), 1e-5)) return;
  }
  for (auto _ : state) {
    torch::Tensor y = t.forward(kForm);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  mlp_items(state);
}
#endif

/// BM_Mlp_ReadWeights: one pass reading the MLP's weights (2.1 MB: a little
/// more than one core's 2 MB L2) with bench::FloatReader: the floor of any
/// batch-1 forward pass that multiplies by them, whatever its arithmetic.
/// Every other pass reads them last to first, as ms's batch-1 products do
/// (src/kernels/gemm.cpp, scan_backward): a scan in the same order every pass
/// finds little of them still in L2.
void BM_Mlp_ReadWeights(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const Mlp m;
  const std::array<const ms::Tensor*, 3> weights{&m.w1, &m.w2, &m.w3};
  std::int64_t bytes = 0;
  bool back = false;
  for (auto _ : state) {
    bench::FloatReader reader;
    bytes = 0;
    for (const ms::Tensor* w : weights)  // each size is a multiple of 128: all of it is read
      bytes += reader.read(w->data<float>(), w->numel(), back);
    back = !back;
    reader.keep();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

// ---------------------------------------------------------------- trace + compile of the MLP

// The first call of a fresh jit object: trace, optimize, build the
// executable, run once (recording its allocations). Weights are made once,
// outside the loop.
void BM_JitCompile_Mlp(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const Mlp m;
  const ms::Tensor want = m.forward(m.x);
  ms::Tensor y;
  for (auto _ : state) {
    auto f = m.jitted();
    y = f(m.x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  bench::check_same(state, y, want, 1e-5, "jit vs eager ms");
}

// ---------------------------------------------------------------- fused chain, 16M floats

struct BigInputs {
  ms::Tensor a = bench::random_tensor({kBig}, 1);
  ms::Tensor b = bench::random_tensor({kBig}, 2);
  ms::Tensor c = bench::random_tensor({kBig}, 3);
};

auto make_jit_chain() {
  return ms::jit(
      [](const auto& a, const auto& b, const auto& c) { return ms::relu(a * b + c) * 0.5f; });
}

// The same pass assigned into `y` (a side effect of the graph; the function
// returns a 1-element slice).
auto make_jit_chain_into(ms::Tensor& y) {
  return ms::jit([&y](const auto& a, const auto& b, const auto& c) {
    ms::assign(y, ms::relu(a * b + c) * 0.5f);
    return a.slice(0, 0, 1);
  });
}

void chain_bytes(benchmark::State& state) {
  // 3 reads + 1 write of 4 bytes per element: what one fused pass must move.
  state.SetBytesProcessed(state.iterations() * kBig * 4 * std::int64_t(sizeof(float)));
  state.SetItemsProcessed(state.iterations() * kBig);
}

void BM_JitChain_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const BigInputs in;
  auto f = make_jit_chain();
  {
    const ms::Tensor want = ms::relu(in.a * in.b + in.c) * 0.5f;
    if (!bench::check_same(state, f(in.a, in.b, in.c), want, 0, "jit vs eager ms")) return;
    if (!bench::check_same(state, f(in.a, in.b, in.c), want, 0, "jit (planned) vs eager ms"))
      return;
  }
  for (auto _ : state) {
    ms::Tensor y = f(in.a, in.b, in.c);
    benchmark::DoNotOptimize(y.raw_data());
  }
  check_cache_hits(state, f);
  chain_bytes(state);
}

// The same fused pass assigned into an existing y (make_jit_chain_into): no
// fresh 64 MiB result per call, so no page faults.
void BM_JitChain_MsInto(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const BigInputs in;
  ms::Tensor y = ms::zeros({kBig});
  auto f = make_jit_chain_into(y);
  {
    const ms::Tensor want = ms::relu(in.a * in.b + in.c) * 0.5f;
    f(in.a, in.b, in.c);
    if (!bench::check_same(state, y, want, 0, "jit into y vs eager ms")) return;
    y.fill_(0.f);
    f(in.a, in.b, in.c);
    if (!bench::check_same(state, y, want, 0, "jit (planned) into y vs eager ms")) return;
  }
  for (auto _ : state) {
    ms::Tensor r = f(in.a, in.b, in.c);
    benchmark::DoNotOptimize(r.raw_data());
    benchmark::ClobberMemory();
  }
  check_cache_hits(state, f);
  chain_bytes(state);
}

// The jitted chains and the triad over the same buffers, pass by pass
// (bench::versus_triad): the ratio bench/chain_vs_triad.sh reports.
void BM_JitChainVsTriad_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const BigInputs in;
  auto f = make_jit_chain();
  const ms::Tensor want = ms::relu(in.a * in.b + in.c) * 0.5f;
  if (!bench::check_same(state, f(in.a, in.b, in.c), want, 0, "jit vs eager ms") ||
      !bench::check_same(state, f(in.a, in.b, in.c), want, 0, "jit (planned) vs eager ms"))
    return;
  bench::versus_triad(
      state, in.a, in.b, [&] { return f(in.a, in.b, in.c); },
      kBig * 4 * std::int64_t(sizeof(float)));
  check_cache_hits(state, f);
}

void BM_JitChainVsTriad_MsInto(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const BigInputs in;
  ms::Tensor y = ms::zeros({kBig});
  auto f = make_jit_chain_into(y);
  f(in.a, in.b, in.c);
  f(in.a, in.b, in.c);  // the second call plans the arena
  if (!bench::check_same(state, y, ms::relu(in.a * in.b + in.c) * 0.5f, 0, "jit into y vs eager"))
    return;
  bench::versus_triad(
      state, in.a, in.b,
      [&] {
        f(in.a, in.b, in.c);
        return y;
      },
      kBig * 4 * std::int64_t(sizeof(float)));
  check_cache_hits(state, f);
}

/// BM_FreshPages: what a fresh 64 MiB result costs before any arithmetic on
/// this machine: aligned_alloc (glibc mmaps blocks this large), one write
/// per 4 KiB page (the first-touch page faults), free (munmap).
void BM_FreshPages(benchmark::State& state) {
  const std::size_t bytes = std::size_t(kBig) * sizeof(float);
  for (auto _ : state) {
    auto* p = static_cast<char*>(std::aligned_alloc(64, bytes));
    if (p == nullptr) {
      state.SkipWithError("aligned_alloc failed");
      return;
    }
    for (std::size_t i = 0; i < bytes; i += 4096) p[i] = 1;
    benchmark::DoNotOptimize(p);
    benchmark::ClobberMemory();
    std::free(p);
  }
  state.SetBytesProcessed(state.iterations() * std::int64_t(bytes));
}

#if MS_BENCH_TORCH
void BM_JitChain_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  c10::InferenceMode guard;
  const BigInputs in;
  const torch::Tensor a = bench::to_torch(in.a), b = bench::to_torch(in.b),
                      c = bench::to_torch(in.c);
  {
    auto f = make_jit_chain();
    if (!bench::check_same(state, f(in.a, in.b, in.c), torch::relu(a * b + c) * 0.5, 1e-6)) return;
  }
  for (auto _ : state) {
    torch::Tensor y = torch::relu(a * b + c) * 0.5;
    benchmark::DoNotOptimize(y.data_ptr());
  }
  chain_bytes(state);
}
#endif

// ---------------------------------------------------------------- dispatch of 2 chunks

// Each chunk adds its length to its own slot (no shared line written twice).
struct alignas(64) Slot {
  std::int64_t v = 0;
};

void BM_Dispatch_Ms(benchmark::State& state) {
  bench::set_threads(state.range(0));
  Slot slots[2];
  for (auto _ : state)
    ms::kernels::parallel_for(2, 1, [&](std::int64_t b, std::int64_t e) { slots[b].v += e - b; });
  if (slots[0].v + slots[1].v != 2 * state.iterations()) state.SkipWithError("chunks lost");
}

void BM_Dispatch_Omp(benchmark::State& state) {
  bench::set_threads(state.range(0));
  Slot slots[2];
  const int nt = static_cast<int>(state.range(0));
  for (auto _ : state) {
#pragma omp parallel num_threads(nt)
    slots[omp_get_thread_num()].v += 1;
  }
  if (slots[0].v + slots[1].v != 2 * state.iterations()) state.SkipWithError("chunks lost");
}

#if MS_BENCH_TORCH
void BM_Dispatch_Torch(benchmark::State& state) {
  bench::set_threads(state.range(0));
  Slot slots[2];
  for (auto _ : state)
    at::parallel_for(0, 2, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) slots[i].v += 1;
    });
  if (slots[0].v + slots[1].v != 2 * state.iterations()) state.SkipWithError("chunks lost");
}
#endif

// ---------------------------------------------------------------- registration

void reg(const char* name, void (*fn)(benchmark::State&), std::int64_t nt) {
  benchmark::RegisterBenchmark(name, fn)->ArgName("nt")->Arg(nt)->UseRealTime();
}

void register_all() {
  for (std::int64_t nt : {1, 2}) {
    reg("BM_JitChain20_Ms", BM_JitChain20_Ms, nt);
    reg("BM_JitChain20_MsEager", BM_JitChain20_MsEager, nt);
#if MS_BENCH_TORCH
    reg("BM_JitChain20_Torch", BM_JitChain20_Torch, nt);
    reg("BM_JitChain20_Script", BM_JitChain20_Script, nt);
#endif
    reg("BM_Mlp_Ms", BM_Mlp_Ms, nt);
    reg("BM_Mlp_MsEager", BM_Mlp_MsEager, nt);
    if (nt == 1) {
      reg("BM_Mlp_ReadWeights", BM_Mlp_ReadWeights, nt);
      reg("BM_EagerShape8_Ms", BM_EagerShape8_Ms, nt);
#if MS_BENCH_TORCH
      reg("BM_EagerShape8_Torch", BM_EagerShape8_Torch, nt);
#endif
    }
#if MS_BENCH_TORCH
    reg("BM_Mlp_TorchAddmm", BM_Mlp_Torch<TorchMlp::Form::Addmm>, nt);
    reg("BM_Mlp_TorchLinear", BM_Mlp_Torch<TorchMlp::Form::Linear>, nt);
    reg("BM_Mlp_TorchAddmv", BM_Mlp_Torch<TorchMlp::Form::Addmv>, nt);
#endif
    reg("BM_JitCompile_Mlp", BM_JitCompile_Mlp, nt);
    reg("BM_Stream_Triad", bench::BM_Stream_Triad, nt);
    reg("BM_JitChain_Ms", BM_JitChain_Ms, nt);
    reg("BM_JitChain_MsInto", BM_JitChain_MsInto, nt);
    reg("BM_JitChainVsTriad_Ms", BM_JitChainVsTriad_Ms, nt);
    reg("BM_JitChainVsTriad_MsInto", BM_JitChainVsTriad_MsInto, nt);
#if MS_BENCH_TORCH
    reg("BM_JitChain_Torch", BM_JitChain_Torch, nt);
#endif
  }
  reg("BM_FreshPages", BM_FreshPages, 1);
  reg("BM_Dispatch_Ms", BM_Dispatch_Ms, 2);
#if MS_BENCH_TORCH
  reg("BM_Dispatch_Torch", BM_Dispatch_Torch, 2);
#endif
  reg("BM_Dispatch_Omp", BM_Dispatch_Omp, 2);
}

const int registered = (register_all(), 0);

}  // namespace

MS_BENCH_MAIN()
