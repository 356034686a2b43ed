// GptGenerator of ms/nn/generation.hpp: the prefill and increment graphs over a
// preallocated key/value cache, and the reference path without a cache.
#include "ms/nn/generation.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <utility>

#include "ms/ops/layout.hpp"
#include "ms/ops/random.hpp"

namespace ms::nn {

namespace {

constexpr std::string_view kApi = "GptGenerator::generate";

using Prefill = std::function<std::pair<Tensor, std::vector<Tensor>>(const Tensor&, const Tensor&,
                                                                     const Tensor&)>;
using Increment = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&)>;

// The caches of all layers as one flat list (key, value of layer 0, then 1, ...).
std::vector<Tensor> flatten_caches(const std::vector<KvCache>& caches) {
  std::vector<Tensor> flat;
  for (const KvCache& c : caches) {
    flat.push_back(c.key);
    flat.push_back(c.value);
  }
  return flat;
}

std::vector<KvCache> unflatten_caches(const std::vector<Tensor>& flat) {
  std::vector<KvCache> caches;
  for (std::size_t i = 0; i + 1 < flat.size(); i += 2) caches.push_back({flat[i], flat[i + 1]});
  return caches;
}

void check_args(const std::vector<std::vector<std::int64_t>>& prompts, const GenerateOptions& o,
                const GptConfig& c) {
  MS_CHECK(!prompts.empty(), ValueError, kApi, ": prompts must hold at least 1 prompt, got 0");
  MS_CHECK(o.tokens >= 0, ValueError, kApi, ": tokens must be >= 0, got ", o.tokens);
  MS_CHECK(o.greedy || (o.temperature > 0 && std::isfinite(o.temperature)), ValueError, kApi,
           ": temperature must be finite and > 0 (or greedy = true), got ", o.temperature);
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    const auto n = static_cast<std::int64_t>(prompts[b].size());
    MS_CHECK(n >= 1 && n <= c.block_size, ValueError, kApi, ": prompt ", b,
             " must hold 1 to block_size = ", c.block_size, " tokens, got ", n);
    for (std::int64_t id : prompts[b])
      MS_CHECK(id >= 0 && id < c.vocab_size, ValueError, kApi, ": prompt ", b, " holds token id ",
               id, ", expected ids in [0, vocab_size = ", c.vocab_size, ")");
  }
}

// The next token from one row of logits: argmax, or the inverse of the
// cumulative softmax(logits / temperature) at `u` in [0, 1).
std::int64_t pick(const float* logits, std::int64_t v, const GenerateOptions& o, double u) {
  if (o.greedy) return static_cast<std::int64_t>(std::max_element(logits, logits + v) - logits);
  const double top = *std::max_element(logits, logits + v);
  std::vector<double> p(static_cast<std::size_t>(v));
  double total = 0;
  for (std::int64_t i = 0; i < v; ++i)
    total += p[static_cast<std::size_t>(i)] = std::exp((logits[i] - top) / o.temperature);
  double acc = 0;
  for (std::int64_t i = 0; i < v; ++i) {
    acc += p[static_cast<std::size_t>(i)] / total;
    if (u < acc) return i;
  }
  return v - 1;
}

// One step's tokens: row b from logits [B, V] (contiguous floats), with draw u[b].
std::vector<std::int64_t> pick_all(const Tensor& logits, const GenerateOptions& o, Generator& gen) {
  const std::int64_t b = logits.dim(0), v = logits.dim(1);
  const std::vector<double> u = o.greedy
                                    ? std::vector<double>(static_cast<std::size_t>(b))
                                    : uniform(Shape{b}, 0.0, 1.0, gen, float64).to_vector<double>();
  const std::vector<float> l = logits.to(float32).to_vector<float>();
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < b; ++i)
    out.push_back(pick(l.data() + i * v, v, o, u[static_cast<std::size_t>(i)]));
  return out;
}

// The prefill's config: `cfg` with one generalized graph for every batch
// size and prompt length (ids, positions and padding mask are [B, P]).
JitConfig prefill_config(JitConfig cfg, std::int64_t block_size) {
  const Dim rows("rows", 1), slots("slots", 1, block_size);
  cfg.input_signature = {TensorSpec({rows, slots}, int64), TensorSpec({rows, slots}, int64),
                         TensorSpec({rows, slots}, bool_)};
  return cfg;
}

// Restores a cell's training mode when it goes out of scope.
class EvalMode {
 public:
  explicit EvalMode(CellBase& c) : cell_(c), was_(c.training()) { cell_.set_train(false); }
  ~EvalMode() {
    if (was_) cell_.set_train(true);
  }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

 private:
  CellBase& cell_;
  bool was_;
};

}  // namespace

struct GptGenerator::Impl {
  Gpt& gpt;
  // The caches of each batch size (flat, as flatten_caches), contiguous and
  // never reallocated: the increment graph captures them and writes its slot
  // into them in place.
  std::map<std::int64_t, std::vector<Tensor>> stores;
  Jitted<Prefill> prefill;
  Jitted<Increment> increment;

  Impl(Gpt& g, const JitConfig& cfg)
      : gpt(g),
        prefill(ms::jit(Prefill([this](const Tensor& ids, const Tensor& pos, const Tensor& kpm) {
                          std::vector<KvCache> caches;
                          Tensor logits =
                              gpt.forward_cached(ids, pos, caches, std::nullopt,
                                                 {.key_padding_mask = kpm, .is_causal = true});
                          return std::pair(logits, flatten_caches(caches));
                        }),
                        prefill_config(cfg, g.config.block_size))),
        increment(ms::jit(Increment([this](const Tensor& ids, const Tensor& pos, const Tensor& kpm,
                                           const Tensor& at) {
                            std::vector<Tensor>& store = stores.at(ids.dim(0));
                            std::vector<KvCache> caches = unflatten_caches(store);
                            Tensor logits =
                                gpt.forward_cached(ids, pos, caches, at, {.key_padding_mask = kpm});
                            const std::vector<Tensor> flat = flatten_caches(caches);
                            for (std::size_t i = 0; i < flat.size(); ++i) store[i].copy_(flat[i]);
                            return logits;
                          }),
                          cfg)) {}

  // The first slots of the caches of batch size `b` set to the prefill's
  // `caches` ([B, H, P, head_dim]); the caches hold all S slots.
  void store_caches(std::int64_t b, const std::vector<Tensor>& caches) {
    std::vector<Tensor>& store = stores[b];
    if (store.empty())
      for (const Tensor& c : caches) {
        Shape full = c.shape();
        full[2] = gpt.config.block_size;
        store.push_back(zeros(full, c.dtype()));
      }
    for (std::size_t i = 0; i < caches.size(); ++i)
      store[i].slice(2, 0, caches[i].dim(2)).copy_(caches[i]);
  }

  std::vector<std::vector<std::int64_t>> cached(
      const std::vector<std::vector<std::int64_t>>& prompts, const GenerateOptions& o);
  std::vector<std::vector<std::int64_t>> uncached(
      const std::vector<std::vector<std::int64_t>>& prompts, const GenerateOptions& o);
};

namespace {

// The cache slots of each row: its tokens, after -1 for each pad slot.
using Slots = std::vector<std::vector<std::int64_t>>;

struct Batch {
  Tensor ids, positions, pad_mask;  // [B, P] each (pad_mask: Bool, true = hidden)
  std::vector<std::int64_t> pad;    // pad slots per row
};

// The prefill's inputs for `slots` (rows of equal length); the mask hides the
// pad slots.
Batch prefill_inputs(const Slots& slots) {
  const auto b = static_cast<std::int64_t>(slots.size());
  std::vector<std::int64_t> ids, pos;
  std::vector<std::uint8_t> mask;
  Batch out;
  const auto n = static_cast<std::int64_t>(slots[0].size());
  for (const auto& row : slots) {
    const auto pad = static_cast<std::int64_t>(std::count(row.begin(), row.end(), -1));
    out.pad.push_back(pad);
    for (std::int64_t j = 0; j < n; ++j) {
      ids.push_back(std::max<std::int64_t>(row[static_cast<std::size_t>(j)], 0));
      pos.push_back(std::max<std::int64_t>(j - pad, 0));
      mask.push_back(j < pad ? 1 : 0);
    }
  }
  out.ids = from_vector(ids, Shape{b, n});
  out.positions = from_vector(pos, Shape{b, n});
  out.pad_mask = from_vector(mask, Shape{b, n}).to(bool_);
  return out;
}

}  // namespace

std::vector<std::vector<std::int64_t>> GptGenerator::Impl::cached(
    const std::vector<std::vector<std::int64_t>>& prompts, const GenerateOptions& o) {
  const std::int64_t s = gpt.config.block_size, keep = std::max<std::int64_t>(s / 2, 1);
  const auto b = static_cast<std::int64_t>(prompts.size());
  std::size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  Slots slots;
  for (const auto& p : prompts) {
    slots.emplace_back(longest - p.size(), -1);
    slots.back().insert(slots.back().end(), p.begin(), p.end());
  }
  Generator gen(o.seed);
  std::vector<std::vector<std::int64_t>> out(prompts.size());
  Tensor logits;  // [B, V]: the next token's
  std::vector<std::int64_t> pad;
  auto run_prefill = [&] {
    Batch in = prefill_inputs(slots);
    auto [all, c] = prefill(in.ids, in.positions, in.pad_mask);
    logits = all.select(1, static_cast<std::int64_t>(slots[0].size()) - 1);
    store_caches(b, c);
    pad = std::move(in.pad);
  };
  run_prefill();
  for (std::int64_t i = 0; i < o.tokens; ++i) {
    const std::vector<std::int64_t> next = pick_all(logits, o, gen);
    for (std::size_t r = 0; r < next.size(); ++r) {
      out[r].push_back(next[r]);
      slots[r].push_back(next[r]);
    }
    if (i + 1 == o.tokens) break;
    const auto used = static_cast<std::int64_t>(slots[0].size()) - 1;  // slots before `next`
    if (used == s) {  // full: restart from the last `keep` slots
      for (auto& row : slots) row.erase(row.begin(), row.end() - keep);
      run_prefill();
      continue;
    }
    std::vector<std::int64_t> pos;
    std::vector<std::uint8_t> mask;
    for (std::int64_t r = 0; r < b; ++r) {
      pos.push_back(used - pad[static_cast<std::size_t>(r)]);
      for (std::int64_t j = 0; j < s; ++j)
        mask.push_back(j < pad[static_cast<std::size_t>(r)] || j > used ? 1 : 0);
    }
    logits = increment(from_vector(next, Shape{b, 1}), from_vector(pos, Shape{b, 1}),
                       from_vector(mask, Shape{b, s}).to(bool_), ms::mutable_(used))
                 .select(1, 0);
  }
  return out;
}

std::vector<std::vector<std::int64_t>> GptGenerator::Impl::uncached(
    const std::vector<std::vector<std::int64_t>>& prompts, const GenerateOptions& o) {
  const std::int64_t s = gpt.config.block_size, keep = std::max<std::int64_t>(s / 2, 1);
  Generator gen(o.seed);
  std::vector<std::vector<std::int64_t>> ctx = prompts, out(prompts.size());
  for (std::int64_t i = 0; i < o.tokens; ++i) {
    std::vector<Tensor> rows;
    for (auto& c : ctx) {
      if (static_cast<std::int64_t>(c.size()) > s) c.erase(c.begin(), c.end() - keep);
      const Tensor l = gpt(from_vector(c, Shape{1, static_cast<std::int64_t>(c.size())}));
      rows.push_back(l.select(1, -1));
    }
    const std::vector<std::int64_t> next = pick_all(concat(rows, 0), o, gen);
    for (std::size_t r = 0; r < next.size(); ++r) {
      out[r].push_back(next[r]);
      ctx[r].push_back(next[r]);
    }
  }
  return out;
}

GptGenerator::GptGenerator(Gpt& gpt, JitConfig config)
    : impl_(std::make_unique<Impl>(gpt, config)) {}

GptGenerator::~GptGenerator() = default;

std::vector<std::int64_t> GptGenerator::generate(const std::vector<std::int64_t>& prompt,
                                                 const GenerateOptions& options) {
  return generate(std::vector<std::vector<std::int64_t>>{prompt}, options)[0];
}

std::vector<std::vector<std::int64_t>> GptGenerator::generate(
    const std::vector<std::vector<std::int64_t>>& prompts, const GenerateOptions& options) {
  check_args(prompts, options, impl_->gpt.config);
  EvalMode eval(impl_->gpt);
  return options.use_cache ? impl_->cached(prompts, options) : impl_->uncached(prompts, options);
}

int GptGenerator::prefill_compile_count() const { return impl_->prefill.compile_count(); }

int GptGenerator::increment_compile_count() const { return impl_->increment.compile_count(); }

}  // namespace ms::nn
