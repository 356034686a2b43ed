// ms/nn/generation.hpp — text generation with an ms::nn::Gpt: a prefill graph
// and an increment graph over a preallocated key/value cache.
//
// Stage: nn (above jit: it compiles its two graphs with ms::jit).
//
//   ms::nn::Gpt gpt({.vocab_size = 256, .block_size = 128});
//   ms::nn::GptGenerator gen(gpt);
//   std::vector<std::int64_t> next = gen.generate({72, 105}, {.tokens = 100, .temperature = 0.8});
//
// Design. Each row has S = block_size cache slots per layer (KvCache: key and
// value [B, H, S, head_dim]), allocated at the first prefill of a batch size
// and never resized:
// - prefill graph: the prompts, left-padded to a common length P, run through
//   Gpt::forward_cached over their P slots (causal, the pad slots hidden by a
//   key padding mask); it returns the logits of every slot (the next-token
//   logits are those of slot P - 1) and the keys and values of the P slots,
//   which are copied into the first P slots of the caches. It is compiled
//   once, for every batch size and length, with the batch and the length as
//   symbols (JitConfig::input_signature); each new (B, P) binds that graph
//   to its sizes (a restart always prefills S / 2 slots: one binding).
// - increment graph: one token per row, written into slot `used` of every
//   cache (ms::index_copy along the slots), attending over all S slots with
//   a [B, S] key padding mask that hides the pad slots and the slots not yet
//   written; `used` is an ms::mutable_ scalar, so it is a graph input, not a
//   constant. The generator keeps the caches of each batch size (contiguous,
//   never reallocated; the prefill's caches are copied into them), and the
//   increment graph captures them and assigns its new caches to them
//   (copy_): the jit runs that index_copy in place, so a step writes one slot
//   per cache instead of copying the caches.
// Every argument of the increment has a fixed shape for a given batch size,
// so a whole generation compiles exactly two graphs, whatever the prompt
// lengths and however many tokens: no auto-dynamic recompiles (with
// JitConfig::dynamic the increment is still compiled once under both
// policies), and every step is a plain cache hit with no per-size binding.
// The alternative, a cache that grows by one position a step (the increment
// concatenating the new key onto [B, H, L, head_dim], the caches passed as an
// ms::mutable_ sequence so auto-dynamic may generalize them), changes an
// input shape every step. Measured over 256 increments: all_dims compiled 3
// graphs (2 static, then one generalized with every dim -1; 15 traces in
// all), changed_dims 2 (4 traces), and each new length still gets its own
// concrete binding of the generalized graph. Its attention reads L keys
// instead of S, but for the short contexts of this model (S <= a few
// hundred) that saving is small next to the growing design's per-step
// concatenation copy, its binding per new length and its extra compiles, so
// the preallocated cache compiles least and, by this reasoning (the two were
// not benchmarked against each other), runs fastest. The prefill reads the
// prompt's P slots only: a prefill over all S slots (one static graph) cost
// a full block's forward for a 3-byte prompt and for every restart, a third
// of a 256-token generation of char_lm (bench/char_lm_twin.sh).
//
// Positions: with left padding, slot s of a row with p pad slots has position
// s - p, so each row sees exactly what it would see alone (batched generation
// equals per-prompt generation). When the S slots are full, the cache is
// restarted: the last S / 2 slots (at least 1) are prefilled again, and
// generation continues from them. Without the cache (use_cache = false) the
// same rule applies to each row's own context (its last S / 2 tokens when it
// would exceed S), so the two paths pick the same tokens; with several rows
// the cached path restarts all rows together, when the longest fills S.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ms/jit/jit.hpp"
#include "ms/nn/transformer.hpp"

namespace ms::nn {

/// The options of GptGenerator::generate: `{.tokens = 100, .temperature = 0.8, .seed = 1}`.
struct GenerateOptions {
  /// The number of new tokens per prompt (>= 0).
  std::int64_t tokens = 64;
  /// The logits are divided by it before sampling (> 0; unused with greedy).
  double temperature = 1.0;
  /// Take the most likely token (argmax) instead of sampling.
  bool greedy = false;
  /// Seed of the ms::Generator the samples are drawn from: each step draws one
  /// uniform number per prompt (ms::uniform of [B] values) and takes the
  /// token where the cumulative probability first exceeds it.
  std::uint64_t seed = 0;
  /// Run the two compiled graphs over the key/value cache (true), or run the
  /// whole context through Gpt::construct for every token (false, eager; the
  /// reference the cached path is tested against).
  bool use_cache = true;
};

/// Generates tokens with a Gpt (see the header's design note). It holds the
/// two compiled graphs, so later generate() calls with the same batch size
/// compile nothing. The Gpt runs in evaluation mode during generate() (its
/// mode is restored after) and must outlive the generator. It keeps one set
/// of full-size key/value caches ([B, n_head, block_size, head_dim] per layer)
/// for each batch size B it has generated for, until it is destroyed.
class GptGenerator {
 public:
  /// Compiles with `config` (e.g. {.dynamic = 1} for auto-dynamic shapes:
  /// the increment's fixed shapes make it compile the same two graphs; the
  /// prefill's input_signature is set by the generator).
  explicit GptGenerator(Gpt& gpt, JitConfig config = {});
  ~GptGenerator();
  GptGenerator(const GptGenerator&) = delete;
  GptGenerator& operator=(const GptGenerator&) = delete;

  /// The `tokens` new tokens after `prompt` (1 to block_size ids in [0, vocab_size)).
  /// ValueError naming GptGenerator::generate, the argument, expected vs given
  /// for an empty or too long prompt, an id out of range, tokens < 0, or a
  /// temperature that is not > 0 (without greedy).
  std::vector<std::int64_t> generate(const std::vector<std::int64_t>& prompt,
                                     const GenerateOptions& options = {});
  /// The new tokens after each of `prompts` (of any lengths, left-padded
  /// into one batch), with the checks of the single-prompt form for each.
  std::vector<std::vector<std::int64_t>> generate(
      const std::vector<std::vector<std::int64_t>>& prompts, const GenerateOptions& options = {});
  /// Graphs the prefill compiled so far (one graph serves all batch sizes and lengths).
  int prefill_compile_count() const;
  /// Graphs the increment compiled so far (one per batch size).
  int increment_compile_count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ms::nn
