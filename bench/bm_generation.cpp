// bench/bm_generation.cpp — text generation with a char_lm-sized ms::nn::Gpt
// (vocabulary 256, 4 layers, d_model 192, 6 heads, random weights from seed
// 1; context 288, the smallest that holds the 16-token prompt and 256 new
// tokens without the generator's window restart, 512, and char_lm's 128),
// greedy, one prompt; with LibTorch, its twin (bench/gpt_torch.hpp) too.
//
//   BM_Generate/cached/ctx:C/tokens:N/nt:T     ms::nn::GptGenerator (prefill
//                                              graph + increment graph over a
//                                              preallocated key/value cache)
//   BM_Generate/cached_dyn/ctx:C/tokens:N/nt:T the same generator compiled
//                                              with JitConfig{.dynamic = 1}
//   BM_Generate/nocache/ctx:C/tokens:256/nt:T  no cache: every new token runs
//                                              the whole context through the
//                                              jitted Gpt::construct
//                                              (JitConfig{.dynamic = 1}, so
//                                              auto-dynamic may generalize the
//                                              growing length)
//   BM_Generate/nocache_pos/ctx:C/tokens:256/nt:T
//                                              the same through
//                                              Gpt::forward_cached without a
//                                              cache slot (a prefill), the
//                                              positions an input instead of
//                                              a running count over the ids
//   BM_Generate/cached_batch8/ctx:C/tokens:256/nt:T
//                                              GptGenerator on 8 prompts at
//                                              once (the prompt's first 9 to
//                                              16 bytes, left-padded);
//                                              tokens_per_s counts all rows
//   BM_Generate/torch/ctx:C/tokens:256/nt:T    the LibTorch twin
//                                              (bench/gpt_torch.hpp) with the
//                                              same weights: eager, over its
//                                              own per-layer key/value cache,
//                                              with the generator's restart
//                                              rule (-Dtorch=enabled builds)
//   BM_Generate/read_floor/ctx:C/tokens:256/nt:1
//                                              no generation: each token's
//                                              unavoidable reads (the
//                                              weights, the cache slots in
//                                              use) at one core's bandwidth,
//                                              the floor of any batch-1
//                                              generation on 1 thread
//   BM_Increment/cached/ctx:288/graphs:G/nt:T  the time of 64 increments
//   BM_Increment/cached_dyn/ctx:288/graphs:G/nt:T
//                                              (see BM_Increment), static and
//                                              auto-dynamic, after 1 or 8
//                                              increment graphs compiled
//
// Context 128 is char_lm's: 256 tokens after the prompt restart the window
// three times (each a prefill of 64 slots), as bench/char_lm_twin.sh's
// generation does; the cached and torch sides have that row.
//
// One iteration generates N tokens after the prompt. Before timing, one
// untimed generation of the same length compiles everything, so the loop
// times cache hits (the no-cache side still binds its generalized graph to
// each new length: 256 lengths do not fit its 64 kept bindings, so every
// iteration binds them again, as a long generation does).
//
// Counters: tokens_per_s; compiles (prefill_compiles and increment_compiles
// of the generator; nocache_compiles and nocache_traces of the jitted Gpt
// after the whole run, nocache_traces_first after the untimed generation: a
// length its generalized graph does not serve is traced on its own: traces
// beyond nocache_traces_first were made inside the timed loop); same_tokens (no-cache and torch
// rows: how many leading tokens agree with the cached generator's, out of N; random weights give
// close logits, so float differences may flip a late argmax).
//
// The increment's time per token comes from rows of different N:
// (time(N = 65) - time(N = 1)) / 64 for the first 64 tokens (N = 1 runs the
// prefill only) and (time(N = 256) - time(N = 192)) / 64 for the last 64;
// bench/transformer_table.sh computes them.
#include "bench_common.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#if MS_BENCH_TORCH
#include "gpt_torch.hpp"
#endif

namespace {

enum Side : std::int64_t {
  kCached = 0,
  kCachedDyn = 1,
  kNoCache = 2,
  kNoCachePos = 3,
  kTorch = 4,
  kCachedBatch = 5,
  kReadFloor = 6
};
const char* const kSideNames[] = {"cached", "cached_dyn",    "nocache",   "nocache_pos",
                                  "torch",  "cached_batch8", "read_floor"};
constexpr std::int64_t kBatchPrompts = 8;

/// The 16-byte prompt "Q: Why did the c".
std::vector<std::int64_t> prompt() {
  const std::string text = "Q: Why did the c";
  return {text.begin(), text.end()};
}

/// The char_lm model's sizes at block size `context`.
ms::nn::GptConfig gpt_config(std::int64_t context) {
  return {.vocab_size = 256, .block_size = context, .n_layer = 4, .n_head = 6, .n_embd = 192};
}

/// Greedy generation of `tokens` tokens without a cache: the whole context
/// through `forward` (the jitted Gpt: ids [1, n] and positions 0 .. n - 1)
/// for every token.
template <class Fwd>
std::vector<std::int64_t> generate_nocache(Fwd& forward, std::int64_t tokens) {
  std::vector<std::int64_t> ctx = prompt(), out, pos;
  for (std::int64_t i = 0; i < tokens; ++i) {
    const auto n = static_cast<std::int64_t>(ctx.size());
    while (static_cast<std::int64_t>(pos.size()) < n) pos.push_back(std::int64_t(pos.size()));
    const ms::Tensor logits =
        forward(ms::from_vector(ctx, ms::Shape{1, n}), ms::from_vector(pos, ms::Shape{1, n}))
            .contiguous();
    const float* last = logits.data<float>() + (n - 1) * logits.dim(2);
    const auto next = std::max_element(last, last + logits.dim(2)) - last;
    out.push_back(next);
    ctx.push_back(next);
  }
  return out;
}

double leading_agreement(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  const auto n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return double(i);
}

/// How many leading tokens of `tokens_of_side` agree with GptGenerator's
/// greedy generation of as many tokens.
double same_as_cached(ms::nn::Gpt& gpt, const std::vector<std::int64_t>& tokens_of_side,
                      std::int64_t tokens) {
  ms::nn::GptGenerator gen(gpt);
  return leading_agreement(tokens_of_side,
                           gen.generate(prompt(), {.tokens = tokens, .greedy = true}));
}

void run_cached(benchmark::State& state, ms::nn::Gpt& gpt, bool dynamic, std::int64_t tokens,
                std::int64_t rows) {
  ms::nn::GptGenerator gen(gpt, ms::JitConfig{.dynamic = dynamic ? 1 : 0});
  const ms::nn::GenerateOptions opts{.tokens = tokens, .greedy = true};
  std::vector<std::vector<std::int64_t>> prompts;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::int64_t> p = prompt();
    p.resize(p.size() - static_cast<std::size_t>(rows - 1 - r));
    prompts.push_back(p);
  }
  (void)gen.generate(prompts, opts);
  for (auto _ : state) {
    auto out = gen.generate(prompts, opts);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["prefill_compiles"] = gen.prefill_compile_count();
  state.counters["increment_compiles"] = gen.increment_compile_count();
}

/// The read_floor side: for each of `tokens` tokens, one pass with
/// bench::FloatReader over what an increment cannot help reading: every
/// parameter it multiplies by or adds (all but the position table, of which
/// it gathers one row) and the keys and values of the cache slots in use,
/// whose number follows GptGenerator's schedule (the prompt, one more a
/// token, back to block_size / 2 when the block_size slots are full). Every
/// other token reads them last to first (as BM_Mlp_ReadWeights). The counter
/// bytes_per_token is the mean.
void run_read_floor(benchmark::State& state, ms::nn::Gpt& gpt, std::int64_t tokens) {
  const ms::nn::GptConfig& c = gpt.config;
  std::vector<ms::Tensor> weights;
  for (const auto& [name, p] : gpt.parameters_and_names())
    if (name.rfind("wpe.", 0) != 0) weights.push_back(p.contiguous());
  const std::int64_t head = c.n_embd / c.n_head;
  // Per layer, the key and value caches [1, n_head, block_size, head_dim].
  std::vector<ms::Tensor> caches;
  for (std::int64_t i = 0; i < 2 * c.n_layer; ++i)
    caches.push_back(ms::ones(ms::Shape{1, c.n_head, c.block_size, head}));
  std::int64_t bytes = 0;
  for (auto _ : state) {
    bytes = 0;
    std::int64_t slots = static_cast<std::int64_t>(prompt().size());
    for (std::int64_t t = 0; t < tokens; ++t) {
      if (slots == c.block_size) slots = std::max<std::int64_t>(c.block_size / 2, 1);
      const bool back = t % 2 == 1;
      bench::FloatReader reader;
      for (const ms::Tensor& w : weights) bytes += reader.read(w.data<float>(), w.numel(), back);
      for (const ms::Tensor& kv : caches)
        for (std::int64_t h = 0; h < c.n_head; ++h)
          bytes += reader.read(kv.data<float>() + h * c.block_size * head, slots * head, back);
      reader.keep();
      ++slots;
    }
  }
  state.counters["bytes_per_token"] = double(bytes) / double(tokens);
}

/// The jitted Gpt of a no-cache side: Gpt::construct (`positions` unused:
/// it makes them itself), or the positions given as an input through
/// Gpt::forward_cached without write_at (a prefill; its caches are dropped).
auto nocache_forward(ms::nn::Gpt& gpt, bool positions_input) {
  return ms::jit(
      [&gpt, positions_input](const ms::Tensor& ids, const ms::Tensor& positions) {
        if (!positions_input) return gpt(ids);
        std::vector<ms::nn::KvCache> caches;
        return gpt.forward_cached(ids, positions, caches, std::nullopt, {.is_causal = true});
      },
      ms::JitConfig{.dynamic = 1});
}

void run_nocache(benchmark::State& state, ms::nn::Gpt& gpt, bool positions_input,
                 std::int64_t tokens) {
  auto forward = nocache_forward(gpt, positions_input);
  const std::vector<std::int64_t> first = generate_nocache(forward, tokens);
  state.counters["nocache_traces_first"] = forward.trace_count();
  for (auto _ : state) {
    auto out = generate_nocache(forward, tokens);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["nocache_compiles"] = forward.compile_count();
  state.counters["nocache_traces"] = forward.trace_count();
  state.counters["same_tokens"] = same_as_cached(gpt, first, tokens);
}

#if MS_BENCH_TORCH
void run_torch(benchmark::State& state, ms::nn::Gpt& gpt, std::int64_t tokens) {
  ms::io::SafetensorsFile weights;
  weights.tensors = gpt.state_dict();
  const ms::nn::GptConfig& c = gpt.config;
  bench::GptTorch twin({c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd});
  twin.load(weights, "the ms model's weights");
  const std::vector<std::int64_t> first = twin.generate_greedy(prompt(), tokens);
  for (auto _ : state) {
    auto out = twin.generate_greedy(prompt(), tokens);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["same_tokens"] = same_as_cached(gpt, first, tokens);
}
#endif

void BM_Generate(benchmark::State& state, Side side) {
  const std::int64_t context = state.range(0), tokens = state.range(1);
  bench::set_threads(state.range(2));
  ms::manual_seed(1);  // the random weights
  ms::nn::Gpt gpt(gpt_config(context));
  gpt.set_train(false);
  if (side == kNoCache || side == kNoCachePos)
    run_nocache(state, gpt, side == kNoCachePos, tokens);
  else if (side == kReadFloor)
    run_read_floor(state, gpt, tokens);
#if MS_BENCH_TORCH
  else if (side == kTorch)
    run_torch(state, gpt, tokens);
#endif
  else
    run_cached(state, gpt, side == kCachedDyn, tokens, side == kCachedBatch ? kBatchPrompts : 1);
  const double rows = side == kCachedBatch ? double(kBatchPrompts) : 1.0;
  state.counters["tokens_per_s"] = benchmark::Counter(
      double(state.iterations()) * double(tokens) * rows, benchmark::Counter::kIsRate);
}

/// BM_Increment/<cached|cached_dyn>/ctx:C/graphs:G/nt:T: the time of 64
/// increments, each iteration timing a generation of 65 tokens and one of 1
/// token (the prefill and its pick) back to back: t65 - t1 as the iteration's
/// manual time. Before timing, generations at batch sizes G .. 1
/// compile the static generator's G increment graphs (one per batch size; the
/// auto-dynamic one generalizes them), so graphs:1 against graphs:8 shows
/// whether more compiled graphs slow the increment down, and cached against
/// cached_dyn whether a dynamic graph runs as fast as a static one.
void BM_Increment(benchmark::State& state, bool dynamic) {
  using Clock = std::chrono::steady_clock;
  const std::int64_t context = state.range(0), graphs = state.range(1);
  bench::set_threads(state.range(2));
  ms::manual_seed(1);
  ms::nn::Gpt gpt(gpt_config(context));
  gpt.set_train(false);
  ms::nn::GptGenerator gen(gpt, ms::JitConfig{.dynamic = dynamic ? 1 : 0});
  for (std::int64_t b = graphs; b >= 1; --b)
    (void)gen.generate(
        std::vector<std::vector<std::int64_t>>(static_cast<std::size_t>(b), prompt()),
        {.tokens = 2, .greedy = true});
  const ms::nn::GenerateOptions many{.tokens = 65, .greedy = true},
      one{.tokens = 1, .greedy = true};
  (void)gen.generate(prompt(), many);
  for (auto _ : state) {
    const auto t0 = Clock::now();
    auto a = gen.generate(prompt(), many);
    const auto t1 = Clock::now();
    auto b = gen.generate(prompt(), one);
    const auto t2 = Clock::now();
    benchmark::DoNotOptimize(a.data());
    benchmark::DoNotOptimize(b.data());
    state.SetIterationTime(
        std::max(std::chrono::duration<double>((t1 - t0) - (t2 - t1)).count(), 0.0));
  }
  state.counters["prefill_compiles"] = gen.prefill_compile_count();
  state.counters["increment_compiles"] = gen.increment_compile_count();
}

void register_all() {
  for (std::int64_t side :
       {kCached, kCachedDyn, kNoCache, kNoCachePos, kTorch, kCachedBatch, kReadFloor}) {
    if (side == kTorch && !MS_BENCH_TORCH) continue;
    const std::string name = std::string("BM_Generate/") + kSideNames[side];
    auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_Generate, Side(side));
    b->ArgNames({"ctx", "tokens", "nt"})->UseRealTime()->Unit(benchmark::kMillisecond);
    for (std::int64_t nt : {1, 2}) {
      if (side == kReadFloor && nt == 2) continue;  // one thread reads
      if (side == kCached || side == kTorch || side == kReadFloor) b->Args({128, 256, nt});
      if (side == kTorch || side == kCachedBatch || side == kReadFloor) {
        b->Args({288, 256, nt});
        continue;
      }
      for (std::int64_t ctx : {288, 512}) {
        if (side >= kNoCache) {
          b->Args({ctx, 256, nt});
          continue;
        }
        for (std::int64_t tokens : {1, 65, 192, 256}) b->Args({ctx, tokens, nt});
      }
    }
  }
  for (const bool dynamic : {false, true}) {
    const std::string name = std::string("BM_Increment/") + (dynamic ? "cached_dyn" : "cached");
    auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_Increment, dynamic);
    b->ArgNames({"ctx", "graphs", "nt"})->UseManualTime()->Unit(benchmark::kMillisecond);
    for (std::int64_t nt : {1, 2})
      for (std::int64_t graphs : {1, 8}) b->Args({288, graphs, nt});
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::use_best_openblas(argv);
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  bench::add_context();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
