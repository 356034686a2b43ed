// Incremental generation with ms::nn::GptGenerator: the cached logits against
// Gpt::construct, cached against uncached tokens (greedy and sampled, past the
// window restart), the number of graphs compiled under each dynamic policy,
// batched prompts of different lengths against one prompt at a time, the LM
// loss of a tiny corpus going down, and the errors of bad arguments.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <ms/cell.hpp>
#include <ms/nn/generation.hpp>
#include <set>
#include <string>
#include <vector>

#include "nn/max_diff.hpp"

namespace {

using ms::Tensor;
using Tokens = std::vector<std::int64_t>;

using ms_test::max_diff;

// A tiny model's sizes.
ms::nn::GptConfig tiny(std::int64_t block) {
  return {.vocab_size = 13, .block_size = block, .n_layer = 2, .n_head = 2, .n_embd = 16};
}

// Weights drawn larger than the default initialization, so that the logits
// spread over O(1) and greedy choices have clear margins.
void scale_up(ms::nn::Gpt& gpt, std::uint64_t seed = 3) {
  ms::Generator g(seed);
  for (auto& p : gpt.trainable_params())
    if (p.rank() == 2) p.set_data(ms::normal(p.shape(), 0.0, 0.5, g));
}

Tokens ramp(std::int64_t n, std::int64_t start) {
  Tokens t;
  for (std::int64_t i = 0; i < n; ++i) t.push_back((start + 5 * i) % 13);
  return t;
}

}  // namespace

TEST_SUITE("nn.generation") {
  TEST_CASE("Gpt::forward_cached: prefill and increments give construct's logits") {
    ms::nn::Gpt gpt(tiny(10));
    scale_up(gpt);
    const Tokens seq = ramp(7, 2);
    const Tensor full = gpt(ms::from_vector(seq, ms::Shape{1, 7}));
    // Prefill the first 4 tokens into 10 slots (filled with 0), then feed 3 one by one.
    Tokens ids(10, 0), pos(10, 0);
    for (std::int64_t i = 0; i < 10; ++i) pos[static_cast<std::size_t>(i)] = i;
    for (std::size_t i = 0; i < 4; ++i) ids[i] = seq[i];
    std::vector<ms::nn::KvCache> caches;
    const Tensor pre = gpt.forward_cached(ms::from_vector(ids, ms::Shape{1, 10}),
                                          ms::from_vector(pos, ms::Shape{1, 10}), caches,
                                          std::nullopt, {.is_causal = true});
    CHECK(caches.size() == 2);
    CHECK(caches[0].key.shape() == ms::Shape({1, 2, 10, 8}));
    CHECK(max_diff(pre.slice(1, 0, 4), full.slice(1, 0, 4)) < 1e-4);
    for (std::int64_t t = 4; t < 7; ++t) {
      CAPTURE(t);
      std::vector<std::uint8_t> hide(10);
      for (std::int64_t j = 0; j < 10; ++j) hide[static_cast<std::size_t>(j)] = j > t;
      const Tensor l = gpt.forward_cached(
          ms::from_vector(Tokens{seq[static_cast<std::size_t>(t)]}, ms::Shape{1, 1}),
          ms::from_vector(Tokens{t}, ms::Shape{1, 1}), caches, ms::tensor(t, ms::int64),
          {.key_padding_mask = ms::from_vector(hide, ms::Shape{1, 10}).to(ms::bool_)});
      CHECK(max_diff(l, full.slice(1, t, t + 1)) < 1e-4);
    }
    CHECK_THROWS_WITH_AS(
        gpt.forward_cached(ms::zeros({1, 2}, ms::int64), ms::zeros({1, 2}, ms::int64), caches,
                           ms::tensor(3, ms::int64), {}),
        doctest::Contains("MultiheadAttention::attention_cached: an increment (write_at given) "
                          "takes one position"),
        ms::ShapeError);
  }

  TEST_CASE(
      "Gpt under auto-dynamic shapes: a growing sequence generalizes, not one trace per length") {
    ms::nn::Gpt gpt(tiny(48));
    scale_up(gpt);
    auto forward =
        ms::jit([&gpt](const Tensor& ids) { return gpt(ids); }, ms::JitConfig{.dynamic = 1});
    for (std::int64_t t = 3; t <= 44; ++t) {
      const Tensor ids = ms::from_vector(ramp(t, 1), ms::Shape{1, t});
      CAPTURE(t);
      CHECK(max_diff(forward(ids), gpt(ids)) < 1e-5);
    }
    // Two static graphs, then one with T symbolic (MindSpore's policy). The
    // generalized graph is re-traced a few times as its size bindings grow,
    // but the positions must not pin T: that would trace every length anew.
    CHECK(forward.compile_count() <= 3);
    CHECK(forward.trace_count() <= 8);
  }

  TEST_CASE("GptGenerator: the cache gives the uncached tokens, greedy and sampled") {
    ms::nn::Gpt gpt(tiny(12));
    scale_up(gpt);
    ms::nn::GptGenerator gen(gpt);
    const Tokens prompt = ramp(5, 1);
    // 30 tokens after 5 run past the 12 slots: the window restarts several times.
    for (bool greedy : {true, false}) {
      CAPTURE(greedy);
      ms::nn::GenerateOptions o{.tokens = 30, .temperature = 0.9, .greedy = greedy, .seed = 11};
      const Tokens cached = gen.generate(prompt, o);
      o.use_cache = false;
      const Tokens plain = gen.generate(prompt, o);
      CHECK(cached.size() == 30);
      CHECK(cached == plain);
      CHECK(std::set<std::int64_t>(cached.begin(), cached.end()).size() >= 3);  // not one token
    }
    // Another seed samples other tokens; the same seed the same ones.
    const ms::nn::GenerateOptions a{.tokens = 30, .seed = 1}, b{.tokens = 30, .seed = 2};
    CHECK(gen.generate(prompt, a) == gen.generate(prompt, a));
    CHECK(gen.generate(prompt, a) != gen.generate(prompt, b));
    CHECK(gen.generate(prompt, {.tokens = 0}).empty());
    CHECK(gen.prefill_compile_count() == 1);
    CHECK(gen.increment_compile_count() == 1);
    CHECK_FALSE(gpt.training());
  }

  TEST_CASE("GptGenerator: 256 tokens compile one increment graph under every dynamic policy") {
    ms::nn::Gpt gpt(tiny(264));
    scale_up(gpt);
    gpt.set_train(true);
    for (int dynamic : {0, 1}) {
      for (const char* policy : {"all_dims", "changed_dims"}) {
        CAPTURE(dynamic);
        CAPTURE(policy);
        std::vector<std::string> log;
        ms::JitConfig cfg;
        cfg.dynamic = dynamic;
        cfg.dynamic_policy = ms::parse_dynamic_policy(policy);
        cfg.on_recompile = [&](const std::string& line) { log.push_back(line); };
        ms::nn::GptGenerator gen(gpt, cfg);
        const Tokens out = gen.generate(ramp(6, 4), {.tokens = 256, .seed = 5});
        CHECK(out.size() == 256);
        // MindSpore's auto-dynamic bound is 3 (all_dims) and 2 (changed_dims);
        // the fixed-shape cache needs 1.
        CHECK(gen.increment_compile_count() == 1);
        CHECK(gen.prefill_compile_count() == 1);
        // Another prompt length and a restart past the 264 slots compile nothing new.
        gen.generate(ramp(3, 0), {.tokens = 270, .greedy = true});
        CHECK(gen.increment_compile_count() == 1);
        CHECK(gen.prefill_compile_count() == 1);
        // One "compile #" line per compile (the two graphs); the prefill's
        // generalized graph adds a line saying how often it was traced.
        CHECK(std::count_if(log.begin(), log.end(), [](const std::string& line) {
                return line.starts_with("compile #");
              }) == 2);
      }
    }
    CHECK(gpt.training());  // generate restores the mode
  }

  TEST_CASE("GptGenerator: batched prompts of different lengths equal one prompt at a time") {
    ms::nn::Gpt gpt(tiny(32));
    scale_up(gpt);
    ms::nn::GptGenerator gen(gpt);
    const std::vector<Tokens> prompts{ramp(1, 3), ramp(7, 2), ramp(4, 9)};
    const ms::nn::GenerateOptions greedy{.tokens = 20, .greedy = true};
    const auto batched = gen.generate(prompts, greedy);
    REQUIRE(batched.size() == 3);
    for (std::size_t b = 0; b < prompts.size(); ++b) {
      CAPTURE(b);
      CHECK(batched[b] == gen.generate(prompts[b], greedy));
      ms::nn::GenerateOptions plain = greedy;
      plain.use_cache = false;
      CHECK(batched[b] == gen.generate(prompts[b], plain));
    }
    // Sampled: the batch draws one number per row per step, cached or not.
    ms::nn::GenerateOptions sampled{.tokens = 20, .temperature = 1.2, .seed = 4};
    const auto s1 = gen.generate(prompts, sampled);
    sampled.use_cache = false;
    CHECK(s1 == gen.generate(prompts, sampled));
    // An increment graph per batch size (3 rows and 1 row); one prefill graph
    // for both sizes and every prompt length.
    CHECK(gen.increment_compile_count() == 2);
    CHECK(gen.prefill_compile_count() == 1);
  }

  TEST_CASE("Gpt: the LM loss of a tiny corpus goes down (AdamW, warm-up, clipping, jit)") {
    const std::string text = "the cat sat on the mat. the dog sat on the log. ";
    ms::manual_seed(1);
    ms::nn::Gpt gpt({.vocab_size = 128, .block_size = 16, .n_layer = 1, .n_head = 2, .n_embd = 32});
    gpt.set_train(true);
    ms::optim::AdamW opt(gpt.trainable_params(), {.lr = 1e-2});
    ms::optim::WarmupCosineLR sched(opt, 5, 40);
    auto step = ms::jit([&](const Tensor& x, const Tensor& y) {
      auto loss_fn = [&](const Tensor& a, const Tensor& b) {
        return ms::nn::cross_entropy(gpt(a), b);
      };
      auto [loss, grads] = ms::value_and_grad(
          loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
      opt.apply(ms::nn::clip_grad_norm(grads, 1.0).grads);
      return loss;
    });
    Tokens xs, ys;
    for (std::size_t b = 0; b < 4; ++b)
      for (std::size_t t = 0; t < 16; ++t) {
        xs.push_back(text[b * 7 + t]);
        ys.push_back(text[b * 7 + t + 1]);
      }
    const Tensor x = ms::from_vector(xs, ms::Shape{4, 16}),
                 y = ms::from_vector(ys, ms::Shape{4, 16});
    std::vector<double> losses;
    for (int i = 0; i < 40; ++i) {
      losses.push_back(step(x, y).item<double>());
      sched.step();
    }
    CHECK(losses.front() > 4.0);  // about log(128)
    CHECK(losses.back() < 0.5 * losses.front());
    CHECK(step.compile_count() == 1);
  }

  TEST_CASE("GptGenerator: bad arguments name the API, the argument, expected and given") {
    ms::nn::Gpt gpt(tiny(8));
    scale_up(gpt);
    ms::nn::GptGenerator gen(gpt);
    CHECK_THROWS_WITH_AS(
        gen.generate(ramp(9, 0)),
        doctest::Contains("GptGenerator::generate: prompt 0 must hold 1 to block_size = 8 "
                          "tokens, got 9"),
        ms::ValueError);
    CHECK_THROWS_WITH_AS(gen.generate(Tokens{}),
                         doctest::Contains("prompt 0 must hold 1 to block_size = 8 tokens, got 0"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(gen.generate(Tokens{1}, {.tokens = -1}),
                         doctest::Contains("GptGenerator::generate: tokens must be >= 0, got -1"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(
        gen.generate(Tokens{1}, {.temperature = 0.0}),
        doctest::Contains(
            "GptGenerator::generate: temperature must be finite and > 0 (or greedy = true), got 0"),
        ms::ValueError);
    CHECK_THROWS_WITH_AS(gen.generate(std::vector<Tokens>{{1}, {2, 13}}),
                         doctest::Contains("GptGenerator::generate: prompt 1 holds token id 13, "
                                           "expected ids in [0, vocab_size = 13)"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(gen.generate(std::vector<Tokens>{}),
                         doctest::Contains("prompts must hold at least 1 prompt, got 0"),
                         ms::ValueError);
    CHECK(gen.generate(Tokens{1}, {.tokens = 3, .temperature = 0.0, .greedy = true}).size() == 3);
  }
}
