// scaled_dot_product_attention (ms/ops/attention.hpp) against the naive
// composition matmul -> softmax -> matmul written here, in float64: masks,
// the causal band (Tq == Tk and Tq < Tk), odd sizes across the kernel's
// blocks, float32 and float64; gradients by central differences and against
// the composition's gradients; eager == ms::jit (also with dynamic shapes and
// with ms::grad inside); 1 and 2 threads bitwise; fully masked rows; dropout;
// bad inputs; the gradient of a floating mask for each broadcast shape;
// bfloat16 and float16 inputs; second derivatives.
#include <doctest/doctest.h>
#include <algorithm>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <ms/autodiff/gradcheck.hpp>
#include <ms/kernels/attention.hpp>
#include <ms/ms.hpp>

#include "ops_test_util.hpp"
#include "random.hpp"
#include "thread_guard.hpp"

using namespace ms;
using ms::test::random_tensor;

namespace {

using ms_test::kInf;

// The naive composition: scores [..., Tq, Tk] materialized, softmax, weights
// times v; a row that keeps no key gives 0. In the inputs' dtype.
Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  const std::int64_t e = q.shape().at(-1), tq = q.shape().at(-2), tk = k.shape().at(-2);
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(e));
  Tensor s = matmul(q, transpose(k, -2, -1)) * scale;
  if (o.mask && o.mask->dtype() == bool_) s = where(*o.mask, s, -kInf);
  if (o.mask && o.mask->dtype() != bool_) s = s + *o.mask;
  if (o.causal) s = where(tril(ones({tq, tk}, bool_), {.diagonal = tk - tq}), s, -kInf);
  const Tensor none = max(s, {-1}, true) == -kInf;
  const Tensor p = where(none, 0.0, softmax(where(none, 0.0, s), -1));
  return matmul(p, v);
}

struct AttentionCase {
  std::int64_t b, h, tq, tk, e, ev;
};

double tol(DType dt) { return dt == float64 ? 1e-12 : 3e-5; }

void check_against_reference(const AttentionCase& c, DType dt, const AttentionOptions& o,
                             unsigned seed) {
  CAPTURE(c.b);
  CAPTURE(c.h);
  CAPTURE(c.tq);
  CAPTURE(c.tk);
  CAPTURE(dt);
  const Tensor q = random_tensor(dt, {c.b, c.h, c.tq, c.e}, {-2, 2}, seed);
  const Tensor k = random_tensor(dt, {c.b, c.h, c.tk, c.e}, {-2, 2}, seed + 1);
  const Tensor v = random_tensor(dt, {c.b, c.h, c.tk, c.ev}, {-2, 2}, seed + 2);
  const Tensor got = scaled_dot_product_attention(q, k, v, o);
  REQUIRE(got.dtype() == dt);
  REQUIRE(got.shape() == Shape{c.b, c.h, c.tq, c.ev});
  AttentionOptions o64 = o;
  if (o.mask && o.mask->dtype() != bool_) o64.mask = o.mask->to(float64);
  const Tensor want = reference(q.to(float64), k.to(float64), v.to(float64), o64);
  CHECK(allclose(got.to(float64), want, tol(dt), tol(dt)));
}

Tensor bool_mask(const Shape& s, unsigned seed) {
  return random_tensor(float64, s, {0, 1}, seed) < 0.7;  // about 70% kept
}

const std::vector<AttentionCase>& cases() {
  static const std::vector<AttentionCase> cs = {
      {1, 1, 1, 1, 4, 4},  {2, 3, 7, 7, 8, 5},     {1, 2, 33, 33, 16, 16}, {2, 2, 129, 129, 8, 12},
      {1, 1, 7, 33, 5, 3}, {2, 1, 33, 129, 16, 8}, {1, 2, 1, 129, 8, 8}};
  return cs;
}

// A loss with fixed random weights on every output element.
Tensor weighted(const Tensor& y, const Tensor& w) { return sum(y * w); }

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("attention: against the naive composition, no mask, float32 and float64") {
    for (const DType dt : {float32, float64})
      for (const AttentionCase& c : cases()) check_against_reference(c, dt, {}, 1);
    const AttentionCase c{2, 2, 33, 33, 8, 8};
    check_against_reference(c, float64, {.scale = 0.3}, 2);
  }

  TEST_CASE("attention: Bool mask, float mask broadcast over heads, causal") {
    for (const DType dt : {float32, float64})
      for (const AttentionCase& c : cases()) {
        const Tensor bm = bool_mask({c.tq, c.tk}, 3);
        check_against_reference(c, dt, {.mask = bm}, 4);
        const Tensor fm = random_tensor(dt, {c.b, 1, c.tq, c.tk}, {-3, 3}, 5);
        check_against_reference(c, dt, {.mask = fm}, 6);
        check_against_reference(c, dt, {.causal = true}, 7);  // Tq == Tk and Tq < Tk
        check_against_reference(c, dt, {.mask = bm, .causal = true}, 8);
      }
  }

  TEST_CASE("attention: causal with Tq < Tk aligns the band to the end of the keys") {
    // q row i sees keys 0 .. i + (Tk - Tq): the last query row sees every key.
    const Tensor q = random_tensor(float64, {1, 3, 4}, {-1, 1}, 9);
    const Tensor k = random_tensor(float64, {1, 6, 4}, {-1, 1}, 10);
    const Tensor v = random_tensor(float64, {1, 6, 2}, {-1, 1}, 11);
    const Tensor got = scaled_dot_product_attention(q, k, v, {.causal = true});
    const Tensor band = tensor({{true, true, true, true, false, false},
                                {true, true, true, true, true, false},
                                {true, true, true, true, true, true}});
    CHECK(allclose(got, scaled_dot_product_attention(q, k, v, {.mask = band}), 0, 0));
    CHECK(allclose(got.select(1, 2), scaled_dot_product_attention(q, k, v).select(1, 2), 0, 0));
  }

  TEST_CASE("attention: a row that keeps no key gives 0, and no gradient") {
    const Tensor q = random_tensor(float64, {2, 3, 4}, {-1, 1}, 12);
    const Tensor k = random_tensor(float64, {2, 5, 4}, {-1, 1}, 13);
    const Tensor v = random_tensor(float64, {2, 5, 3}, {-1, 1}, 14);
    const Tensor m = tensor({{true, false, true, false, true},
                             {false, false, false, false, false},
                             {true, true, true, true, true}});
    const Tensor fm = Tensor(where(m, 0.0, -kInf)).to(float64);  // the same mask, additive
    for (const Tensor& mask : {m, fm}) {
      const Tensor y = scaled_dot_product_attention(q, k, v, {.mask = mask});
      CHECK(allclose(y.select(1, 1), zeros({2, 3}, float64), 0, 0));
      CHECK(allclose(y, reference(q, k, v, {.mask = mask}), 1e-12, 1e-12));
      const auto g = grad(
          [&](const Tensor& a, const Tensor& b, const Tensor& c) {
            return sum(scaled_dot_product_attention(a, b, c, {.mask = mask}));
          },
          {.position = {0, 1, 2}})(q, k, v);
      for (const Tensor& t : g) CHECK(allclose(t, t, 0, 0));  // no NaN
      CHECK(allclose(g[0].select(1, 1), zeros({2, 4}, float64), 0, 0));
    }
    // Tq > Tk with causal: the first Tq - Tk rows see no key.
    const Tensor y =
        scaled_dot_product_attention(q, k.slice(1, 0, 2), v.slice(1, 0, 2), {.causal = true});
    CHECK(allclose(y.select(1, 0), zeros({2, 3}, float64), 0, 0));
    CHECK(allclose(y.select(1, 1), v.select(1, 0), 1e-12, 1e-12));
  }

  TEST_CASE("attention: keys a Bool mask hides are not read: whole blocks, a block's tail") {
    // One query against three key blocks of cache slots, the last two
    // hidden, as in a decoding step: bitwise the attention over the first
    // block alone, and NaN in the hidden slots does not reach the output.
    constexpr std::int64_t kb = kernels::kAttentionKeyBlock, slots = 3 * kb;
    const Tensor q = random_tensor(float32, {2, 3, 1, 8}, {-1, 1}, 30);
    const Tensor k = random_tensor(float32, {2, 3, slots, 8}, {-1, 1}, 31);
    const Tensor v = random_tensor(float32, {2, 3, slots, 8}, {-1, 1}, 32);
    std::vector<std::uint8_t> keep(slots, 0);
    for (std::size_t j = 0; j < std::size_t{kb}; ++j) keep[j] = j % 5 != 3;
    const Tensor mask = from_vector(keep, Shape{1, 1, 1, slots}).to(bool_);
    const Tensor first = scaled_dot_product_attention(q, k.slice(2, 0, kb), v.slice(2, 0, kb),
                                                      {.mask = mask.slice(3, 0, kb)});
    const Tensor nan = full({2, 3, slots - kb, 8}, std::nan(""), float32);
    const Tensor kn = concat({k.slice(2, 0, kb), nan}, 2), vn = concat({v.slice(2, 0, kb), nan}, 2);
    CHECK(allclose(scaled_dot_product_attention(q, k, v, {.mask = mask}), first, 0, 0));
    CHECK(allclose(scaled_dot_product_attention(q, kn, vn, {.mask = mask}), first, 0, 0));

    // Keys 0 .. 36 of the first block kept, some of them hidden: the forward
    // reads the keys up to the next whole group of 16 (48) and no further, so
    // NaN from slot 48 on does not reach the output, which is bitwise that of
    // the first 48 slots alone.
    constexpr std::int64_t used = 37, group = 48;
    std::vector<std::uint8_t> head(slots, 0);
    for (std::size_t j = 0; j < std::size_t{used}; ++j) head[j] = j % 5 != 3;
    const Tensor tail_mask = from_vector(head, Shape{1, 1, 1, slots}).to(bool_);
    const Tensor tail_nan = full({2, 3, slots - group, 8}, std::nan(""), float32);
    const Tensor kt = concat({k.slice(2, 0, group), tail_nan}, 2);
    const Tensor vt = concat({v.slice(2, 0, group), tail_nan}, 2);
    const Tensor groups = scaled_dot_product_attention(
        q, k.slice(2, 0, group), v.slice(2, 0, group), {.mask = tail_mask.slice(3, 0, group)});
    CHECK(allclose(scaled_dot_product_attention(q, kt, vt, {.mask = tail_mask}), groups, 0, 0));
    CHECK(allclose(groups, reference(q, k, v, {.mask = tail_mask}), 3e-5, 3e-5));
  }

  TEST_CASE("attention: gradcheck of q, k, v (float64)") {
    const Tensor q = random_tensor(float64, {2, 2, 5, 3}, {-1, 1}, 20);
    const Tensor k = random_tensor(float64, {2, 2, 6, 3}, {-1, 1}, 21);
    const Tensor v = random_tensor(float64, {2, 2, 6, 4}, {-1, 1}, 22);
    const Tensor bm = bool_mask({5, 6}, 23);
    const Tensor fm = random_tensor(float64, {2, 1, 5, 6}, {-2, 2}, 24);
    const std::vector<AttentionOptions> opts = {
        {}, {.causal = true}, {.mask = bm}, {.mask = fm, .causal = true}, {.scale = 1.7}};
    for (std::size_t i = 0; i < opts.size(); ++i) {
      CAPTURE(i);
      const auto r = testing::gradcheck(
          [&](const std::vector<Tensor>& x) {
            return scaled_dot_product_attention(x[0], x[1], x[2], opts[i]);
          },
          {q, k, v});
      CHECK_MESSAGE(r.ok, r.message);
    }
  }

  TEST_CASE("attention: gradients across blocks equal the composition's") {
    // Tq 70 and Tk 129 span several row and key blocks of the backward kernel.
    const Tensor q = random_tensor(float64, {2, 2, 70, 8}, {-1, 1}, 30);
    const Tensor k = random_tensor(float64, {2, 2, 129, 8}, {-1, 1}, 31);
    const Tensor v = random_tensor(float64, {2, 2, 129, 6}, {-1, 1}, 32);
    const Tensor w = random_tensor(float64, {2, 2, 70, 6}, {-1, 1}, 33);
    const Tensor fm = random_tensor(float64, {2, 1, 70, 129}, {-2, 2}, 34);
    for (const AttentionOptions& o :
         {AttentionOptions{}, AttentionOptions{.mask = fm, .causal = true},
          AttentionOptions{.mask = bool_mask({70, 129}, 35)}}) {
      const GradOptions all{.position = {0, 1, 2}};
      const auto got = grad(
          [&](const Tensor& a, const Tensor& b, const Tensor& c) {
            return weighted(scaled_dot_product_attention(a, b, c, o), w);
          },
          all)(q, k, v);
      const auto want = grad([&](const Tensor& a, const Tensor& b,
                                 const Tensor& c) { return weighted(reference(a, b, c, o), w); },
                             all)(q, k, v);
      for (std::size_t i = 0; i < 3; ++i) CHECK(allclose(got[i], want[i], 1e-10, 1e-10));
    }
  }

  TEST_CASE("attention: eager == ms::jit, bitwise; the graph prints the op") {
    const Tensor q = random_tensor(float32, {2, 3, 33, 16}, {-2, 2}, 40);
    const Tensor k = random_tensor(float32, {2, 3, 70, 16}, {-2, 2}, 41);
    const Tensor v = random_tensor(float32, {2, 3, 70, 8}, {-2, 2}, 42);
    const Tensor m = bool_mask({33, 70}, 43);
    const auto fn = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
      return scaled_dot_product_attention(a, b, c, {.mask = m, .causal = true});
    };
    auto f = jit(fn);
    const Tensor want = fn(q, k, v);
    CHECK(ms::test::bitwise_equal(f(q, k, v), want));
    CHECK(ms::test::bitwise_equal(f(q, k, v), want));
    CHECK(f.compile_count() == 1);
    CHECK(f.dump().find("ScaledDotProductAttention(") != std::string::npos);
  }

  TEST_CASE("attention: ms::grad inside ms::jit equals eager ms::grad") {
    const Tensor q = random_tensor(float64, {2, 40, 8}, {-1, 1}, 50);
    const Tensor k = random_tensor(float64, {2, 70, 8}, {-1, 1}, 51);
    const Tensor v = random_tensor(float64, {2, 70, 4}, {-1, 1}, 52);
    const auto loss = [](const Tensor& a, const Tensor& b, const Tensor& c) {
      return sum(scaled_dot_product_attention(a, b, c, {.causal = true}) * c.slice(1, 0, 40));
    };
    const auto eager = grad(loss, {.position = {0, 1, 2}})(q, k, v);
    auto f = jit([&](const Tensor& a, const Tensor& b, const Tensor& c) {
      return grad(loss, {.position = {0, 1, 2}})(a, b, c);
    });
    const auto jitted = f(q, k, v);
    REQUIRE(jitted.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) CHECK(allclose(jitted[i], eager[i], 1e-12, 1e-12));
    CHECK(f.dump().find("ScaledDotProductAttentionGrad(") != std::string::npos);
  }

  TEST_CASE("attention: dynamic shapes: one generalized graph for every T") {
    const auto fn = [](const Tensor& q, const Tensor& k, const Tensor& v) {
      return scaled_dot_product_attention(q, k, v, {.causal = true});
    };
    auto f = jit(fn, JitConfig{.dynamic = 1, .verify = true});
    for (std::int64_t t : {4, 6, 9, 13, 40}) {
      CAPTURE(t);
      const auto seed = static_cast<unsigned>(t);
      const Tensor q = random_tensor(float32, {2, t, 8}, {-2, 2}, seed);
      const Tensor k = random_tensor(float32, {2, t, 8}, {-2, 2}, seed + 1);
      const Tensor v = random_tensor(float32, {2, t, 4}, {-2, 2}, seed + 2);
      CHECK(ms::test::bitwise_equal(f(q, k, v), fn(q, k, v)));
    }
    CHECK(f.compile_count() == 3);  // two static graphs, then one generalized
  }

  TEST_CASE("attention: 1 and 2 threads give bitwise the same forward and gradients") {
    const Tensor q = random_tensor(float32, {2, 3, 129, 16}, {-2, 2}, 60);
    const Tensor k = random_tensor(float32, {2, 3, 129, 16}, {-2, 2}, 61);
    const Tensor v = random_tensor(float32, {2, 3, 129, 16}, {-2, 2}, 62);
    const Tensor fm = random_tensor(float32, {2, 1, 129, 129}, {-2, 2}, 63);
    ms::test::check_thread_invariant(
        [&] { return scaled_dot_product_attention(q, k, v, {.mask = fm, .causal = true}); });
    ms::test::check_thread_invariant([&] {
      return grad(
          [&](const Tensor& a, const Tensor& b, const Tensor& c) {
            return sum(scaled_dot_product_attention(a, b, c, {.causal = true}) * a);
          },
          {.position = {0, 1, 2}})(q, k, v);
    });
  }

  TEST_CASE("attention: the backward by whole problems (dS kept) against one problem alone") {
    // Ten problems take the backward that keeps each problem's dS for dq; one
    // problem alone takes the one that computes dS again for dq. Both compute
    // the same values and sum them in the same order: the same bits. Tk spans
    // two key blocks, so dq also reads kept dS past the first.
    constexpr std::int64_t kb = kernels::kAttentionKeyBlock;
    for (const AttentionOptions& o : {AttentionOptions{.causal = true}, AttentionOptions{}}) {
      for (const auto& [tq, tk] :
           {std::pair<std::int64_t, std::int64_t>{kb + 22, kb + 22}, {45, kb + 72}}) {
        CAPTURE(o.causal);
        CAPTURE(tq);
        CAPTURE(tk);
        const Tensor q = random_tensor(float32, {2, 5, tq, 16}, {-2, 2}, 70);
        const Tensor k = random_tensor(float32, {2, 5, tk, 16}, {-2, 2}, 71);
        const Tensor v = random_tensor(float32, {2, 5, tk, 12}, {-2, 2}, 72);
        const Tensor w = random_tensor(float32, {2, 5, tq, 12}, {-1, 1}, 73);
        const auto grads = [&](const Tensor& a, const Tensor& b, const Tensor& c,
                               const Tensor& wt) {
          return grad(
              [&](const Tensor& x, const Tensor& y, const Tensor& z) {
                return weighted(scaled_dot_product_attention(x, y, z, o), wt);
              },
              {.position = {0, 1, 2}})(a, b, c);
        };
        const auto whole = grads(q, k, v, w);
        for (std::int64_t b = 0; b < 2; ++b) {
          for (std::int64_t h = 0; h < 5; ++h) {
            const auto one = [&](const Tensor& t) { return t.select(0, b).select(0, h); };
            const auto part = grads(one(q).contiguous(), one(k).contiguous(), one(v).contiguous(),
                                    one(w).contiguous());
            for (std::size_t i = 0; i < 3; ++i) {
              CAPTURE(i);
              CHECK(ms::test::bitwise_equal(part[i], one(whole[i]).contiguous()));
            }
          }
        }
      }
    }
  }

  TEST_CASE("attention: heads split out of [B, T, H, D] are read in place, bitwise as copies") {
    // q, k, v as a multi-head layer makes them: [B, T, H, D] seen as [B, H, T, D].
    const Tensor xq = random_tensor(float32, {2, 70, 3, 8}, {-2, 2}, 90);
    const Tensor xk = random_tensor(float32, {2, 70, 3, 8}, {-2, 2}, 91);
    const Tensor xv = random_tensor(float32, {2, 70, 3, 6}, {-2, 2}, 92);
    const Tensor w = random_tensor(float32, {2, 3, 70, 6}, {-1, 1}, 93);
    const Tensor fm = random_tensor(float32, {1, 3, 70, 70}, {-1, 1}, 94);
    const Tensor q = transpose(xq, 1, 2), k = transpose(xk, 1, 2), v = transpose(xv, 1, 2);
    REQUIRE_FALSE(q.is_contiguous());
    for (const AttentionOptions& o :
         {AttentionOptions{.causal = true}, AttentionOptions{.mask = fm}}) {
      const auto loss = [&](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& m) {
        AttentionOptions om = o;
        if (o.mask) om.mask = m;
        return weighted(scaled_dot_product_attention(a, b, c, om), w);
      };
      const Tensor out = scaled_dot_product_attention(q, k, v, o);
      CHECK(ms::test::bitwise_equal(
          out, scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(), o)));
      // The output keeps q's order of dims: merging the heads back is a view.
      CHECK(transpose(out, 1, 2).is_contiguous());
      const GradOptions all{.position = {0, 1, 2, 3}};
      const auto got = grad(loss, all)(q, k, v, fm);
      const auto want = grad(loss, all)(q.contiguous(), k.contiguous(), v.contiguous(), fm);
      for (std::size_t i = 0; i < 3; ++i) CHECK(ms::test::bitwise_equal(got[i], want[i]));
      if (o.mask) CHECK(ms::test::bitwise_equal(got[3], want[3]));
    }
    // Heads split out of one packed projection [B, T, 3, H, D] (rows of
    // 3 H D floats): the output comes out dense in [B, T, H, D] order, and
    // the three gradients in one buffer laid out as the projection, so
    // merging their heads back is a view too (and, in a compiled graph, so is
    // concatenating them: test_jit "concat of adjacent pieces ...").
    const Tensor proj = random_tensor(float32, {2, 70, 3, 3, 8}, {-2, 2}, 95);
    const auto head = [&](std::int64_t i) { return transpose(proj.select(2, i), 1, 2); };
    const Tensor pq = head(0), pk = head(1), pv = head(2);
    const Tensor pw = random_tensor(float32, {2, 3, 70, 8}, {-1, 1}, 96);
    const Tensor pout = scaled_dot_product_attention(pq, pk, pv, {.causal = true});
    CHECK(transpose(pout, 1, 2).is_contiguous());
    const auto ploss = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
      return weighted(scaled_dot_product_attention(a, b, c, {.causal = true}), pw);
    };
    const GradOptions qkv{.position = {0, 1, 2}};
    const auto pg = grad(ploss, qkv)(pq, pk, pv);
    const auto pwant = grad(ploss, qkv)(pq.contiguous(), pk.contiguous(), pv.contiguous());
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(pg[i].storage() == pg[0].storage());
      CHECK(std::ranges::equal(pg[i].strides(), pq.strides()));
      CHECK(pg[i].offset() == static_cast<std::int64_t>(i) * 3 * 8);
      CHECK(ms::test::bitwise_equal(pg[i], pwant[i]));
    }
    // Rows that are not dense (q stored transposed) are copied first.
    const Tensor qt = transpose(q.contiguous().transpose(-1, -2).contiguous(), -1, -2);
    REQUIRE(qt.strides().back() != 1);
    CHECK(ms::test::bitwise_equal(scaled_dot_product_attention(qt, k, v, {.causal = true}),
                                  scaled_dot_product_attention(q, k, v, {.causal = true})));
  }

  TEST_CASE("attention: decoding, one query row over a cache, on other inputs call after call") {
    // An increment: q [B, H, 1, D] split out of [B, 1, H, D], keys and values
    // of `slots` slots (a key block and a part) of which the first `used` are
    // kept (a key padding mask).
    // Calls of the same sizes reuse a thread's scratch: each must see only its inputs.
    // One problem (B = H = 1): a call starts on the problem the last one ended on.
    constexpr std::int64_t kb = kernels::kAttentionKeyBlock, slots = kb + 36;
    for (const std::int64_t heads : {3, 1})
      for (const std::int64_t used : {std::int64_t{1}, std::int64_t{37}, kb, kb + 1, slots}) {
        CAPTURE(heads);
        CAPTURE(used);
        const std::int64_t b = heads == 1 ? 1 : 2;
        const auto seed = static_cast<unsigned>(used);
        const Tensor x = random_tensor(float32, {b, 1, heads, 8}, {-2, 2}, 120 + seed);
        const Tensor q = transpose(x, 1, 2);
        const Tensor ck =
            transpose(random_tensor(float32, {b, slots, heads, 8}, {-2, 2}, 200 + seed), 1, 2);
        const Tensor cv = random_tensor(float32, {b, heads, slots, 8}, {-2, 2}, 300 + seed);
        const Tensor keep = Tensor(arange(0, double(slots), 1) < static_cast<double>(used))
                                .reshape(Shape({1, 1, 1, slots}));
        const AttentionOptions o{.mask = keep};
        const Tensor got = scaled_dot_product_attention(q, ck, cv, o);
        const Tensor want = reference(q.to(float64), ck.to(float64), cv.to(float64), o);
        CHECK(allclose(got.to(float64), want, tol(float32), tol(float32)));
        CHECK(ms::test::bitwise_equal(
            got, scaled_dot_product_attention(q.contiguous(), ck.contiguous(), cv, o)));
      }
  }

  TEST_CASE("attention: split and merged heads, eager == ms::jit with gradients, bitwise") {
    // The multi-head pattern: [B, T, C] split into heads, attended, merged back.
    const Tensor x = random_tensor(float32, {2, 33, 12}, {-2, 2}, 95);
    const auto heads = [](const Tensor& t) {
      return t.reshape(Shape({2, 33, 3, 4})).transpose(1, 2);
    };
    const auto loss = [&](const Tensor& a) {
      const Tensor o =
          scaled_dot_product_attention(heads(a), heads(a * 0.5), heads(a + 1.0), {.causal = true});
      return sum(o.transpose(1, 2).reshape(Shape({2, 33, 12})) * a);
    };
    const auto step = [&](const Tensor& a) { return grad(loss)(a); };
    auto f = jit(step);
    const Tensor want = step(x);
    CHECK(ms::test::bitwise_equal(f(x), want));
    CHECK(ms::test::bitwise_equal(f(x), want));  // the replay of the memory plan
  }

  TEST_CASE("attention: no [B, H, Tq, Tk] buffer, forward or backward") {
    // The scores would take 2 * 2 * 512 * 512 * 4 = 4 MiB; q, k, v, out and
    // their gradients 64 KiB each.
    const Tensor q = random_tensor(float32, {2, 2, 512, 8}, {-1, 1}, 80);
    const Tensor k = random_tensor(float32, {2, 2, 512, 8}, {-1, 1}, 81);
    const Tensor v = random_tensor(float32, {2, 2, 512, 8}, {-1, 1}, 82);
    memory_stats_reset_peak();
    const std::int64_t live = memory_stats().live_bytes;
    const auto g = grad(
        [](const Tensor& a, const Tensor& b, const Tensor& c) {
          return sum(scaled_dot_product_attention(a, b, c, {.causal = true}));
        },
        {.position = {0, 1, 2}})(q, k, v);
    CHECK(g.size() == 3);
    CHECK(memory_stats().peak_bytes - live < 2 * 2 * 512 * 512 * 4 / 4);
  }

  TEST_CASE("attention: dropout drops weights, keeps the expectation") {
    const Tensor q = random_tensor(float64, {1, 4, 3}, {-1, 1}, 70);
    const Tensor k = random_tensor(float64, {1, 5, 3}, {-1, 1}, 71);
    const Tensor v = random_tensor(float64, {1, 5, 2}, {-1, 1}, 72);
    const Tensor m = tensor({{true, true, false, true, true},
                             {false, false, false, false, false},
                             {true, true, true, true, true},
                             {true, false, false, false, false}});
    manual_seed(7);
    const AttentionOptions o{.mask = m, .causal = true, .dropout = 0.25};
    const Tensor want = scaled_dot_product_attention(q, k, v, {.mask = m, .causal = true});
    Tensor acc = zeros({1, 4, 2}, float64);
    const int n = 4000;
    for (int i = 0; i < n; ++i) acc = acc + scaled_dot_product_attention(q, k, v, o);
    CHECK(allclose(acc / static_cast<double>(n), want, 0, 0.05));
    const Tensor y = scaled_dot_product_attention(q, k, v, o);
    CHECK(allclose(y.select(1, 1), zeros({1, 2}, float64), 0, 0));  // the fully masked row
    CHECK(allclose(scaled_dot_product_attention(q, k, v, {.dropout = 1}), zeros({1, 4, 2}, float64),
                   0, 0));
    const Tensor g =
        grad([&](const Tensor& a) { return sum(scaled_dot_product_attention(a, k, v, o)); })(q);
    CHECK(allclose(g, g, 0, 0));  // finite: no NaN from the masked row
    // Under ms::jit the graph draws the numbers the eager call draws.
    auto f = jit([&](const Tensor& a) { return scaled_dot_product_attention(a, k, v, o); });
    manual_seed(11);
    const Tensor eager = scaled_dot_product_attention(q, k, v, o);
    manual_seed(11);
    CHECK(ms::test::bitwise_equal(f(q), eager));
    CHECK_FALSE(ms::test::bitwise_equal(f(q), eager));  // the generator has moved on
  }

  TEST_CASE("attention: bad inputs raise errors naming the op and the argument") {
    const Tensor q = zeros({2, 3, 4}), k = zeros({2, 5, 4}), v = zeros({2, 5, 6});
    const auto sdpa = [](const Tensor& a, const Tensor& b, const Tensor& c,
                         const AttentionOptions& o = {}) {
      return scaled_dot_product_attention(a, b, c, o);
    };
    CHECK_THROWS_WITH_AS(sdpa(zeros({4}), k, v),
                         doctest::Contains("scaled_dot_product_attention: q must have rank >= 2"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(sdpa(q, zeros({2, 5, 3}), v),
                         doctest::Contains("feature sizes E differ (4 vs 3)"), ShapeError);
    CHECK_THROWS_WITH_AS(sdpa(q, k, zeros({2, 4, 6})),
                         doctest::Contains("key counts Tk differ (5 vs 4)"), ShapeError);
    CHECK_THROWS_WITH_AS(sdpa(q, k, v, {.mask = zeros({3, 4}, bool_)}),
                         doctest::Contains("mask of shape [3, 4] does not broadcast"), ShapeError);
    CHECK_THROWS_WITH_AS(
        sdpa(zeros({3, 4}, int32), zeros({5, 4}, int32), zeros({5, 6}, int32)),
        doctest::Contains("q must have dtype Float32, Float64, BFloat16 or Float16, got Int32"),
        TypeError);
    CHECK_THROWS_WITH_AS(sdpa(q, k, v, {.mask = zeros({3, 5}, int64)}),
                         doctest::Contains("mask must have dtype Bool"), TypeError);
    CHECK_THROWS_WITH_AS(sdpa(q, k, v, {.dropout = 1.5}),
                         doctest::Contains("scaled_dot_product_attention: dropout must be in "
                                           "[0, 1], got 1.5"),
                         ValueError);
    CHECK_THROWS_WITH_AS(sdpa(q, k, v, {.mask = zeros({3, 4}, bool_), .dropout = 0.5}),
                         doctest::Contains("does not broadcast"), ShapeError);
  }
  TEST_CASE("attention: gradcheck of a float mask for each broadcast shape (float64)") {
    const Tensor q = random_tensor(float64, {2, 3, 4, 3}, {-1, 1}, 200);
    const Tensor k = random_tensor(float64, {2, 3, 5, 3}, {-1, 1}, 201);
    const Tensor v = random_tensor(float64, {2, 3, 5, 2}, {-1, 1}, 202);
    const Tensor w = random_tensor(float64, {2, 3, 4, 2}, {-1, 1}, 203);
    const std::vector<Shape> shapes = {{2, 3, 4, 5}, {2, 1, 4, 5}, {1, 3, 4, 5}, {4, 5}, {1, 5},
                                       {4, 1},       {5},          {2, 1, 1, 5}, {1, 1}, {3, 1, 5}};
    for (const Shape& s : shapes)
      for (const bool causal : {false, true}) {
        CAPTURE(s);
        CAPTURE(causal);
        const Tensor m = random_tensor(float64, s, {-2, 2}, 204);
        const auto r = testing::gradcheck(
            [&](const std::vector<Tensor>& x) {
              return scaled_dot_product_attention(x[0], x[1], x[2],
                                                  {.mask = x[3], .causal = causal});
            },
            {q, k, v, m});
        CHECK_MESSAGE(r.ok, r.message);
        // Against the naive composition's gradients, every input.
        const GradOptions all{.position = {0, 1, 2, 3}};
        const auto got = grad(
            [&](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) {
              return weighted(scaled_dot_product_attention(a, b, c, {.mask = d, .causal = causal}),
                              w);
            },
            all)(q, k, v, m);
        const auto want = grad(
            [&](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) {
              return weighted(reference(a, b, c, {.mask = d, .causal = causal}), w);
            },
            all)(q, k, v, m);
        REQUIRE(got[3].shape() == s);
        for (std::size_t i = 0; i < 4; ++i) CHECK(allclose(got[i], want[i], 1e-12, 1e-12));
      }
  }

  TEST_CASE("attention: mask gradient across blocks; a Bool or constant mask gets none") {
    // Tq 70 and Tk 129 span several row and key blocks.
    const Tensor q = random_tensor(float32, {2, 2, 70, 8}, {-1, 1}, 210);
    const Tensor k = random_tensor(float32, {2, 2, 129, 8}, {-1, 1}, 211);
    const Tensor v = random_tensor(float32, {2, 2, 129, 6}, {-1, 1}, 212);
    const Tensor w = random_tensor(float32, {2, 2, 70, 6}, {-1, 1}, 213);
    for (const Shape& s :
         {Shape{70, 129}, Shape{2, 1, 1, 129}, Shape{1, 129}, Shape{2, 2, 70, 129}}) {
      CAPTURE(s);
      const Tensor m = random_tensor(float32, s, {-2, 2}, 214);
      const auto loss = [&](const Tensor& d, bool fused) {
        const AttentionOptions o{.mask = d, .causal = true};
        return weighted(fused ? scaled_dot_product_attention(q, k, v, o)
                              : reference(q.to(float64), k.to(float64), v.to(float64),
                                          {.mask = d.to(float64), .causal = true}),
                        fused ? w : w.to(float64));
      };
      const Tensor got = grad([&](const Tensor& d) { return loss(d, true); })(m);
      const Tensor want = grad([&](const Tensor& d) { return loss(d, false); })(m);
      CHECK(allclose(got.to(float64), want, 1e-4, 1e-5));
      ms::test::check_thread_invariant(
          [&] { return grad([&](const Tensor& d) { return loss(d, true); })(m); });
      auto f = jit(
          [&](const Tensor& d) { return grad([&](const Tensor& x) { return loss(x, true); })(d); });
      CHECK(ms::test::bitwise_equal(f(m), got));
      CHECK(f.dump().find("ScaledDotProductAttentionMaskGrad(") != std::string::npos);
    }
    // A constant float mask: its gradient op is not in the graph.
    const Tensor m = random_tensor(float32, {70, 129}, {-2, 2}, 215);
    auto f = jit([&](const Tensor& a) {
      return grad([&](const Tensor& x) {
        return weighted(scaled_dot_product_attention(x, k, v, {.mask = m}), w);
      })(a);
    });
    (void)f(q);
    CHECK(f.dump().find("ScaledDotProductAttentionMaskGrad(") == std::string::npos);
  }

  TEST_CASE("attention: a broadcast mask's gradient allocates no [B, H, Tq, Tk] buffer") {
    // The scores would take 4 * 4 * 256 * 256 * 4 = 4 MiB; the mask and its
    // gradient 256 KiB each, q, k, v and their gradients 128 KiB each.
    const Tensor q = random_tensor(float32, {4, 4, 256, 8}, {-1, 1}, 220);
    const Tensor k = random_tensor(float32, {4, 4, 256, 8}, {-1, 1}, 221);
    const Tensor v = random_tensor(float32, {4, 4, 256, 8}, {-1, 1}, 222);
    const Tensor m = random_tensor(float32, {256, 256}, {-1, 1}, 223);
    memory_stats_reset_peak();
    const std::int64_t live = memory_stats().live_bytes;
    const auto g = grad(
        [](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) {
          return sum(scaled_dot_product_attention(a, b, c, {.mask = d, .causal = true}));
        },
        {.position = {0, 1, 2, 3}})(q, k, v, m);
    CHECK(g.size() == 4);
    CHECK(memory_stats().peak_bytes - live < 4 * 4 * 256 * 256 * 4 / 2);
  }

  TEST_CASE("attention: bfloat16 and float16 against the float64 reference") {
    for (const DType dt : {bfloat16, float16}) {
      CAPTURE(dt);
      // The unit roundoff of the mantissa (8 and 11 bits).
      const double eps = dt == bfloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
      const Tensor q = random_tensor(dt, {2, 3, 70, 16}, {-1, 1}, 230);
      const Tensor k = random_tensor(dt, {2, 3, 129, 16}, {-1, 1}, 231);
      const Tensor v = random_tensor(dt, {2, 3, 129, 8}, {-1, 1}, 232);
      const Tensor w = random_tensor(dt, {2, 3, 70, 8}, {-1, 1}, 233);
      const Tensor m = random_tensor(dt, {2, 1, 70, 129}, {-2, 2}, 234);
      for (const bool causal : {false, true}) {
        CAPTURE(causal);
        const AttentionOptions o{.mask = m, .causal = causal};
        const Tensor y = scaled_dot_product_attention(q, k, v, o);
        REQUIRE(y.dtype() == dt);
        const auto t64 = [](const Tensor& t) { return t.to(float64); };
        const Tensor want = reference(t64(q), t64(k), t64(v), {.mask = t64(m), .causal = causal});
        // Computed in float32 and rounded once: within one rounding of the
        // exact result (|y| <= 1), plus float32's error.
        CHECK(allclose(t64(y), want, eps, eps));
        const GradOptions all{.position = {0, 1, 2, 3}};
        const auto got = grad(
            [&](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) {
              return weighted(scaled_dot_product_attention(a, b, c, {.mask = d, .causal = causal}),
                              w);
            },
            all)(q, k, v, m);
        const auto ref = grad(
            [&](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) {
              return weighted(reference(a, b, c, {.mask = d, .causal = causal}), t64(w));
            },
            all)(t64(q), t64(k), t64(v), t64(m));
        for (std::size_t i = 0; i < 4; ++i) {
          CAPTURE(i);
          REQUIRE(got[i].dtype() == dt);
          // The gradient reads the rounded out (through delta) and is itself
          // rounded: a few roundings, relative to the gradient's scale.
          const double scale = Tensor(max(ms::abs(ref[i]))).item<double>();
          CHECK(allclose(t64(got[i]), ref[i], 4 * eps, 4 * eps * scale));
        }
      }
      ms::test::check_thread_invariant([&] {
        return grad(
            [&](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) {
              return weighted(scaled_dot_product_attention(a, b, c, {.mask = d, .causal = true}),
                              w);
            },
            {.position = {0, 1, 2, 3}})(q, k, v, m);
      });
      ms::test::check_thread_invariant(
          [&] { return scaled_dot_product_attention(q, k, v, {.mask = m}); });
      auto f =
          jit([&](const Tensor& a) { return scaled_dot_product_attention(a, k, v, {.mask = m}); });
      CHECK(ms::test::bitwise_equal(f(q), scaled_dot_product_attention(q, k, v, {.mask = m})));
      const auto loss = [&](const Tensor& a, const Tensor& d) {
        return weighted(scaled_dot_product_attention(a, k, v, {.mask = d, .causal = true}), w);
      };
      const auto eager = grad(loss, {.position = {0, 1}})(q, m);
      auto fg = jit([&](const Tensor& a, const Tensor& d) {
        return grad(loss, {.position = {0, 1}})(a, d);
      });
      const auto jitted = fg(q, m);
      for (std::size_t i = 0; i < 2; ++i) CHECK(ms::test::bitwise_equal(jitted[i], eager[i]));
    }
  }

  TEST_CASE("attention: second derivatives equal the naive composition's") {
    const Tensor q = random_tensor(float64, {2, 2, 6, 3}, {-1, 1}, 240);
    const Tensor k = random_tensor(float64, {2, 2, 7, 3}, {-1, 1}, 241);
    const Tensor v = random_tensor(float64, {2, 2, 7, 2}, {-1, 1}, 242);
    const Tensor w = random_tensor(float64, {2, 2, 6, 2}, {-1, 1}, 243);
    const Tensor fm = random_tensor(float64, {2, 1, 6, 7}, {-2, 2}, 244);
    const Tensor bm = bool_mask({6, 7}, 245);
    struct Opt {
      bool causal;
      bool bool_mask;
    };
    for (const Opt o : {Opt{false, false}, Opt{true, false}, Opt{true, true}}) {
      CAPTURE(o.causal);
      CAPTURE(o.bool_mask);
      // g(x) = sum of the first gradients (of every input) times weights;
      // its gradient is the second derivative applied to the weights.
      const auto outer = [&](bool fused) {
        return [&, fused](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) {
          const auto inner = [&, fused](const Tensor& a2, const Tensor& b2, const Tensor& c2,
                                        const Tensor& d2) {
            const AttentionOptions ao{.mask = o.bool_mask ? bm : d2, .causal = o.causal};
            return weighted(
                fused ? scaled_dot_product_attention(a2, b2, c2, ao) : reference(a2, b2, c2, ao),
                w);
          };
          const auto g = grad(inner, {.position = {0, 1, 2, 3}})(a, b, c, d);
          Tensor s = sum(g[0] * a) + sum(g[1] * b * b) + sum(g[2] * c);
          if (!o.bool_mask) s = s + sum(g[3] * d * d);
          return s;
        };
      };
      const GradOptions all{.position = {0, 1, 2, 3}};
      const auto got = grad(outer(true), all)(q, k, v, fm);
      const auto want = grad(outer(false), all)(q, k, v, fm);
      for (std::size_t i = 0; i < 4; ++i) CHECK(allclose(got[i], want[i], 1e-10, 1e-10));
      // And under ms::jit.
      auto f = jit([&](const Tensor& a) { return grad(outer(true), all)(a, k, v, fm); });
      const auto jitted = f(q);
      for (std::size_t i = 0; i < 4; ++i) CHECK(allclose(jitted[i], got[i], 1e-12, 1e-12));
    }
  }

  TEST_CASE("attention: second derivatives under dynamic shapes") {
    // ms::jit with dynamic shapes gives the eager second derivatives for
    // every T (the causal recomposition builds its band from Tq and Tk).
    for (const bool causal : {false, true}) {
      CAPTURE(causal);
      const auto gg = [causal](const Tensor& q, const Tensor& k, const Tensor& v) {
        return grad([&](const Tensor& a) {
          const Tensor g = grad([&](const Tensor& x) {
            return sum(scaled_dot_product_attention(x, k, v, {.causal = causal}) * v);
          })(a);
          return sum(g * g);
        })(q);
      };
      auto f = jit(gg, JitConfig{.dynamic = 1});
      for (std::int64_t t : {4, 6, 9}) {
        CAPTURE(t);
        const auto seed = static_cast<unsigned>(t);
        const Tensor q = random_tensor(float64, {2, t, 3}, {-1, 1}, seed);
        const Tensor k = random_tensor(float64, {2, t, 3}, {-1, 1}, seed + 1);
        const Tensor v = random_tensor(float64, {2, t, 3}, {-1, 1}, seed + 2);
        CHECK(allclose(f(q, k, v), gg(q, k, v), 1e-12, 1e-12));
      }
    }
  }
}
