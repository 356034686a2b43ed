// Attention and transformer cells: MultiheadAttention against a reference
// written here head by head with plain ops (masks as explicit -inf tables),
// encoder and decoder layers against the same reference composed by hand,
// eager against ms::jit, gradients against finite differences, and a small
// GPT that learns a repeated sequence and is causal.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <ms/autodiff/gradcheck.hpp>
#include <ms/cell.hpp>

#include "nn/max_diff.hpp"
#include "nn/nn_test_util.hpp"

namespace {

using ms::Kwargs;
using ms::Tensor;
constexpr double kInf = std::numeric_limits<double>::infinity();

using ms_test::randn;

// An additive mask table [B, H, L, S] (0 or -inf), filled by the rules of
// the masks' conventions: pad[b][s] true = ignored key, am[l][s] true = not
// attended, causal: key s hidden from query l when s > l + S - L.
struct MaskTable {
  std::int64_t b, h, l, s;
  std::vector<double> v;
  MaskTable(std::int64_t b_, std::int64_t h_, std::int64_t l_, std::int64_t s_)
      : b(b_), h(h_), l(l_), s(s_), v(static_cast<std::size_t>(b_ * h_ * l_ * s_), 0.0) {}
  double& at(std::int64_t bi, std::int64_t hi, std::int64_t li, std::int64_t si) {
    return v[static_cast<std::size_t>(((bi * h + hi) * l + li) * s + si)];
  }
  template <class F>
  void hide(F&& hidden) {  // hidden(b, h, l, s) -> bool
    for (std::int64_t i = 0; i < b; ++i)
      for (std::int64_t j = 0; j < h; ++j)
        for (std::int64_t q = 0; q < l; ++q)
          for (std::int64_t k = 0; k < s; ++k)
            if (hidden(i, j, q, k)) at(i, j, q, k) = -kInf;
  }
  void causal() {
    hide([&](auto, auto, auto q, auto k) { return k > q + s - l; });
  }
};

// MultiheadAttention written out: projections, then each batch row and head
// attended on its own [L, D] slice, heads joined, output projection.
// q [B, L, E], k [B, S, kdim], v [B, S, vdim], batch first.
Tensor ref_mha(const ms::nn::MultiheadAttention& m, const Tensor& q, const Tensor& k,
               const Tensor& v, MaskTable* mask) {
  const std::int64_t e = m.embed_dim, nh = m.num_heads, d = e / nh;
  Tensor wq, wk, wv;
  if (m.in_proj_weight.defined()) {
    auto w = ms::split(m.in_proj_weight, e, 0);
    wq = w[0], wk = w[1], wv = w[2];
  } else {
    wq = m.q_proj_weight, wk = m.k_proj_weight, wv = m.v_proj_weight;
  }
  Tensor qp = ms::matmul(q, ms::transpose(wq, 0, 1)), kp = ms::matmul(k, ms::transpose(wk, 0, 1)),
         vp = ms::matmul(v, ms::transpose(wv, 0, 1));
  if (m.in_proj_bias.defined()) {
    auto bias = ms::split(m.in_proj_bias, e, 0);
    qp = qp + bias[0], kp = kp + bias[1], vp = vp + bias[2];
  }
  const std::int64_t nb = q.dim(0), l = q.dim(1), s = k.dim(1);
  std::vector<Tensor> rows;
  for (std::int64_t b = 0; b < nb; ++b) {
    std::vector<Tensor> outs;
    for (std::int64_t h = 0; h < nh; ++h) {
      const Tensor qh = qp.select(0, b).slice(1, h * d, (h + 1) * d);
      const Tensor kh = kp.select(0, b).slice(1, h * d, (h + 1) * d);
      const Tensor vh = vp.select(0, b).slice(1, h * d, (h + 1) * d);
      Tensor sc = ms::matmul(qh, ms::transpose(kh, 0, 1)) / std::sqrt(static_cast<double>(d));
      if (mask) {
        std::vector<double> add(static_cast<std::size_t>(l * s));
        for (std::int64_t i = 0; i < l; ++i)
          for (std::int64_t j = 0; j < s; ++j)
            add[static_cast<std::size_t>(i * s + j)] = mask->at(b, h, i, j);
        sc = sc + ms::from_vector(add, ms::Shape{l, s}).to(sc.dtype());
      }
      outs.push_back(ms::matmul(ms::softmax(sc, -1), vh));
    }
    rows.push_back(ms::concat(outs, 1));
  }
  return m.out_proj.construct(ms::stack(rows, 0));
}

Tensor ref_layer_norm(const Tensor& x, const ms::nn::LayerNorm& ln) {
  const Tensor mu = ms::mean(x, {-1}, true);
  const Tensor var = ms::mean(ms::square(x - mu), {-1}, true);
  return (x - mu) / ms::sqrt(var + ln.eps) * ln.gamma + ln.beta;
}

Tensor ref_ff(const Tensor& x, const ms::nn::Dense& l1, const ms::nn::Dense& l2, bool gelu) {
  const Tensor hidden = l1.construct(x);
  const Tensor act = gelu ? Tensor(hidden * 0.5 * (1.0 + ms::erf(hidden / std::sqrt(2.0))))
                          : Tensor(ms::maximum(hidden, 0.0));
  return l2.construct(act);
}

using ms_test::max_diff;

// Checks a few entries of each parameter's gradient of `loss` against
// central differences (float64 parameters).
void check_param_grads(const std::function<Tensor()>& loss, const ms::ParameterList& params) {
  const auto grads = ms::grad([&](const Tensor&) { return loss(); },
                              {.position = std::nullopt, .weights = params})(ms::zeros({1}));
  REQUIRE(grads.size() == params.size());
  for (std::size_t p = 0; p < params.size(); ++p) {
    const ms::Parameter& par = params[p];
    INFO("parameter ", par.name());
    const auto g = grads[p].to_vector<double>();
    double norm = 0;
    for (double x : g) norm += x * x;
    CHECK(norm > 0);  // every parameter gets a gradient
    const std::int64_t n = par.numel();
    for (std::int64_t i : {std::int64_t{0}, n / 2, n - 1}) {
      const Tensor saved = par.data().clone();
      ms::Parameter target = par;
      auto at = [&](double delta) {
        auto vals = saved.to_vector<double>();
        vals[static_cast<std::size_t>(i)] += delta;
        target.set_data(ms::from_vector(vals, par.shape()).to(ms::float64));
        return loss().item<double>();
      };
      const double h = 1e-6, num = (at(h) - at(-h)) / (2 * h);
      target.set_data(saved);
      CHECK(std::abs(g[static_cast<std::size_t>(i)] - num) <= 1e-7 + 1e-5 * std::abs(num));
    }
  }
}

}  // namespace

TEST_SUITE("nn") {
  TEST_CASE("attend: causal aligned to the end of the keys, Bool mask true = keep") {
    const Tensor q = randn({2, 3, 4}, 1), k = randn({2, 5, 4}, 2), v = randn({2, 5, 3}, 3);
    const std::vector<bool> keep{true, false, true, true, true};  // key 1 dropped
    std::vector<std::uint8_t> kv;
    for (bool b : keep) kv.push_back(b);
    const Tensor mask = ms::from_vector(kv, ms::Shape{5}).to(ms::bool_);
    const Tensor out = ms::nn::detail::attend(q, k, v, mask, true, 0.0, false);
    const auto qv = q.to_vector<double>(), kk = k.to_vector<double>(), vv = v.to_vector<double>();
    const auto ov = out.to_vector<double>();
    for (int b = 0; b < 2; ++b)
      for (int i = 0; i < 3; ++i) {
        std::vector<double> w(5, 0.0);
        double mx = -kInf, z = 0;
        for (int j = 0; j < 5; ++j) {
          if (!keep[static_cast<std::size_t>(j)] || j > i + 2) continue;  // Tk - Tq = 2
          double s = 0;
          for (int c = 0; c < 4; ++c) s += qv[(b * 3 + i) * 4 + c] * kk[(b * 5 + j) * 4 + c];
          w[static_cast<std::size_t>(j)] = s / 2.0;  // 1 / sqrt(4)
          mx = std::max(mx, s / 2.0);
        }
        for (int j = 0; j < 5; ++j)
          if (keep[static_cast<std::size_t>(j)] && j <= i + 2)
            z += std::exp(w[static_cast<std::size_t>(j)] - mx);
        for (int c = 0; c < 3; ++c) {
          double want = 0;
          for (int j = 0; j < 5; ++j)
            if (keep[static_cast<std::size_t>(j)] && j <= i + 2)
              want += std::exp(w[static_cast<std::size_t>(j)] - mx) / z * vv[(b * 5 + j) * 3 + c];
          CHECK(ov[static_cast<std::size_t>((b * 3 + i) * 3 + c)] ==
                doctest::Approx(want).epsilon(1e-5));
        }
      }
    CHECK_THROWS_WITH_AS(
        ms::nn::detail::attend(q, randn({2, 5, 3}, 4), v, {}, false, 0, false),
        doctest::Contains("scaled_dot_product_attention: q [2, 3, 4] and k [2, 5, 3]"),
        ms::ShapeError);
  }

  TEST_CASE("MultiheadAttention vs a per-head reference: self/cross, masks, layouts, kdim/vdim") {
    const std::int64_t E = 8, H = 2, B = 2;
    for (bool batch_first : {true, false})
      for (bool cross : {false, true})
        for (int masks = 0; masks < 4; ++masks) {
          // masks: 0 none, 1 key padding, 2 attn_mask [L, S] + padding, 3 causal + attn_mask
          CAPTURE(batch_first);
          CAPTURE(cross);
          CAPTURE(masks);
          const std::int64_t L = cross ? 3 : 4, S = 4;
          const std::int64_t kd = cross ? 5 : E, vd = cross ? 6 : E;
          ms::nn::MultiheadAttention mha(E, H,
                                         {.kdim = kd, .vdim = vd, .batch_first = batch_first});
          CHECK(mha.in_proj_weight.defined() == !cross);
          const Tensor q = randn({B, L, E}, 10), x = randn({B, S, kd}, 11),
                       y = cross ? randn({B, S, vd}, 12) : x;
          const Tensor k = cross ? x : q, v = cross ? y : q;
          MaskTable table(B, H, L, S);
          Kwargs kw;
          if (masks == 1 || masks == 2) {
            const std::vector<std::uint8_t> pad{0, 0, 0, 1, 0, 1, 0, 0};  // b0 s3, b1 s1
            kw["key_padding_mask"] = ms::from_vector(pad, ms::Shape{B, S}).to(ms::bool_);
            table.hide([&](auto b, auto, auto, auto s) { return pad[b * S + s] != 0; });
          }
          if (masks >= 2) {
            std::vector<std::uint8_t> am(static_cast<std::size_t>(L * S), 0);
            am[1] = 1;      // query 0 does not see key 1
            am[S + 2] = 1;  // query 1 does not see key 2
            kw["attn_mask"] = ms::from_vector(am, ms::Shape{L, S}).to(ms::bool_);
            table.hide([&](auto, auto, auto l, auto s) { return am[l * S + s] != 0; });
          }
          if (masks == 3) {
            kw["is_causal"] = true;
            table.causal();
          }
          auto layout = [&](const Tensor& t) { return batch_first ? t : ms::transpose(t, 0, 1); };
          Tensor out = mha(layout(q), layout(k), layout(v), kw);
          if (!batch_first) out = ms::transpose(out, 0, 1);
          const Tensor want = ref_mha(mha, q, k, v, masks ? &table : nullptr);
          CHECK(max_diff(out, want) < 1e-5);
          // The same call under ms::jit, the masks as traced arguments.
          auto f = ms::jit(
              [&](const Tensor& a, const Tensor& b, const Tensor& c) { return mha(a, b, c, kw); });
          CHECK(max_diff(f(layout(q), layout(k), layout(v)), layout(out)) < 1e-6);
        }
  }

  TEST_CASE("MultiheadAttention: floating masks are added, [B*H, L, S] masks, unbatched input") {
    const std::int64_t E = 6, H = 3, B = 2, L = 3, S = 4;
    ms::nn::MultiheadAttention mha(E, H, {.batch_first = true});
    const Tensor q = randn({B, L, E}, 20), kv = randn({B, S, E}, 21);
    const Tensor am = randn({B * H, L, S}, 22), kpm = randn({B, S}, 23);
    MaskTable table(B, H, L, S);
    const auto amv = am.to_vector<double>(), kpv = kpm.to_vector<double>();
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t l = 0; l < L; ++l)
          for (std::int64_t s = 0; s < S; ++s)
            table.at(b, h, l, s) = amv[static_cast<std::size_t>(((b * H + h) * L + l) * S + s)] +
                                   kpv[static_cast<std::size_t>(b * S + s)];
    const Tensor out = mha(q, kv, kv, Kwargs{{"attn_mask", am}, {"key_padding_mask", kpm}});
    CHECK(max_diff(out, ref_mha(mha, q, kv, kv, &table)) < 1e-5);
    // A Bool [B*H, L, S] mask with a float key padding mask: both apply.
    std::vector<std::uint8_t> hide(static_cast<std::size_t>(B * H * L * S), 0);
    hide[5] = hide[30] = 1;
    MaskTable t2 = table;
    for (std::size_t i = 0; i < hide.size(); ++i)
      t2.v[i] = hide[i] ? -kInf : kpv[(i / static_cast<std::size_t>(H * L * S)) * S + i % S];
    const Tensor out2 =
        mha(q, kv, kv,
            Kwargs{{"attn_mask", ms::from_vector(hide, ms::Shape{B * H, L, S}).to(ms::bool_)},
                   {"key_padding_mask", kpm}});
    CHECK(max_diff(out2, ref_mha(mha, q, kv, kv, &t2)) < 1e-5);
    // Unbatched [L, E] equals batch row 0.
    const Tensor one = mha(q.select(0, 0), kv.select(0, 0), kv.select(0, 0));
    CHECK(one.shape() == ms::Shape({L, E}));
    CHECK(max_diff(one, mha(q, kv, kv).select(0, 0)) < 1e-6);
    const Tensor pad1 =
        ms::from_vector(std::vector<std::uint8_t>{0, 1, 0, 0}, ms::Shape{S}).to(ms::bool_);
    const Tensor one_masked =
        mha(q.select(0, 0), kv.select(0, 0), kv.select(0, 0), Kwargs{{"key_padding_mask", pad1}});
    const Tensor batched_masked = mha(q.slice(0, 0, 1), kv.slice(0, 0, 1), kv.slice(0, 0, 1),
                                      Kwargs{{"key_padding_mask", pad1.reshape(ms::Shape{1, S})}});
    CHECK(max_diff(one_masked, batched_masked.select(0, 0)) < 1e-6);
    CHECK(max_diff(one_masked, one) > 1e-4);
  }

  TEST_CASE("MultiheadAttention: float64 gradients of inputs and of every parameter") {
    ms::nn::MultiheadAttention mha(4, 2, {.kdim = 3, .vdim = 5, .dtype = ms::float64});
    const Tensor q = randn({3, 2, 4}, 30, ms::float64), k = randn({4, 2, 3}, 31, ms::float64),
                 v = randn({4, 2, 5}, 32, ms::float64);
    const Tensor pad =
        ms::from_vector(std::vector<std::uint8_t>{0, 0, 1, 0, 0, 0, 0, 1}, ms::Shape{2, 4})
            .to(ms::bool_);
    const Kwargs kw{{"key_padding_mask", pad}, {"is_causal", true}};
    auto rc = ms::testing::gradcheck(
        [&](const std::vector<Tensor>& u) { return mha(u[0], u[1], u[2], kw); }, {q, k, v});
    CHECK_MESSAGE(rc.ok, rc.message);
    const Tensor r = randn({3, 2, 4}, 33, ms::float64);
    const ms::ParameterList params = mha.trainable_params();
    CHECK(params.size() == 6);  // q, k, v projections, in_proj_bias, out_proj weight and bias
    check_param_grads([&] { return ms::sum(mha(q, k, v, kw) * r); }, params);
    ms::nn::MultiheadAttention packed(4, 2, {.dtype = ms::float64});
    check_param_grads([&] { return ms::sum(packed(q, q, q) * r); }, packed.trainable_params());
  }

  TEST_CASE("MultiheadAttention: parameter names, initial values, dropout in training mode") {
    ms::nn::MultiheadAttention mha(8, 2);
    std::vector<std::string> names;
    for (const auto& [name, p] : mha.parameters_and_names()) names.push_back(name);
    CHECK(names == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                            "out_proj.bias"});
    CHECK(mha.in_proj_weight.shape() == ms::Shape({24, 8}));
    CHECK(ms::max(ms::abs(mha.in_proj_bias)).item<double>() == 0.0);
    CHECK(ms::max(ms::abs(mha.out_proj.bias)).item<double>() == 0.0);
    ms::nn::MultiheadAttention sep(8, 2, {.has_bias = false, .kdim = 3});
    names.clear();
    for (const auto& [name, p] : sep.parameters_and_names()) names.push_back(name);
    CHECK(names == std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight",
                                            "out_proj.weight"});
    CHECK(sep.k_proj_weight.shape() == ms::Shape({8, 3}));
    ms::nn::MultiheadAttention drop(8, 2, {.dropout = 0.5, .batch_first = true});
    const Tensor x = randn({2, 5, 8}, 40);
    const Tensor eval = drop(x, x, x);
    drop.set_train(true);
    CHECK(max_diff(drop(x, x, x), eval) > 1e-3);
    drop.set_train(false);
    CHECK(max_diff(drop(x, x, x), eval) == 0.0);
  }

  TEST_CASE("MultiheadAttention: self-attention projects q, k and v with one product") {
    ms::nn::MultiheadAttention mha(8, 2, {.batch_first = true});
    const Tensor x = randn({2, 5, 8}, 45);
    // One tensor for query, key and value: the packed product; equal copies: three products.
    const Tensor one = mha(x, x, x), three = mha(x, x.clone(), x.clone());
    CHECK(max_diff(one, three) < 1e-6);
    auto self = ms::jit([&](const Tensor& a) { return mha(a, a, a); });
    auto apart = ms::jit([&](const Tensor& a, const Tensor& b) { return mha(a, b, b); });
    CHECK(max_diff(self(x), one) < 1e-6);
    CHECK(max_diff(apart(x, x.clone()), one) < 1e-6);
    const auto count = [](const std::string& text, const std::string& what) {
      std::size_t n = 0;
      for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
        ++n;
      return n;
    };
    // In-projection and out_proj: 2 products; with the key apart, 3 in-projections and out_proj.
    CHECK(count(self.dump(), "MatMul") == 2);
    CHECK(count(apart.dump(), "MatMul") == 4);
  }

  TEST_CASE("MultiheadAttention: hooks see the masks as keyword arguments, eagerly and under jit") {
    ms::nn::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16, .batch_first = true});
    int seen = 0;
    auto h = layer.self_attn.register_forward_hook(
        [&](ms::nn::MultiheadAttention&, const ms::Args& args, const ms::Kwargs& kw,
            const Tensor& out) {
          CHECK(args.size() == 3);
          CHECK(kw.count("key_padding_mask") == 1);
          CHECK(kw.count("is_causal") == 1);
          ++seen;
          return Tensor(out * 2.0f);
        },
        ms::with_kwargs);
    const Tensor x = randn({2, 4, 8}, 80);
    const Tensor pad =
        ms::from_vector(std::vector<std::uint8_t>{0, 0, 0, 1, 0, 0, 0, 0}, ms::Shape{2, 4})
            .to(ms::bool_);
    auto fwd = [&](const Tensor& a, const Tensor& m) {
      return layer(a, Kwargs{{"src_key_padding_mask", m}, {"is_causal", true}});
    };
    const Tensor eager = fwd(x, pad);
    CHECK(seen == 1);
    auto f = ms::jit(fwd);
    CHECK(max_diff(f(x, pad), eager) < 1e-5);
    CHECK(seen >= 2);  // the hook runs when the graph runs
    h.remove();
    CHECK(max_diff(fwd(x, pad), eager) > 1e-4);  // the hook's doubling is gone
  }

  TEST_CASE("MultiheadAttention::attention_cached: write_at of any integer dtype") {
    const std::int64_t E = 4, S = 5;
    ms::nn::MultiheadAttention mha(E, 2, {.batch_first = true});
    ms::nn::KvCache prefilled;
    (void)mha.attention_cached(randn({1, S, E}, 40), prefilled, std::nullopt, {});
    const Tensor x = randn({1, 1, E}, 41);
    ms::nn::KvCache want = prefilled;
    const Tensor y = mha.attention_cached(x, want, ms::tensor(3, ms::int64), {});
    for (ms::DType dt : {ms::int32, ms::int16, ms::int8, ms::uint8}) {
      CAPTURE(dt);
      ms::nn::KvCache got = prefilled;
      const Tensor yd = mha.attention_cached(x, got, ms::tensor(3, ms::int64).to(dt), {});
      CHECK(max_diff(yd, y) == 0);
      CHECK(max_diff(got.key, want.key) == 0);
      CHECK(max_diff(got.value, want.value) == 0);
    }
    CHECK(max_diff(want.key, prefilled.key) > 0);  // slot 3 was written
  }

  TEST_CASE("MultiheadAttention: bad arguments name the cell, the argument, expected and given") {
    CHECK_THROWS_WITH_AS(ms::nn::MultiheadAttention(10, 3),
                         doctest::Contains("embed_dim (10) must be divisible by num_heads (3)"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::nn::MultiheadAttention(8, 2, {.add_bias_kv = true}),
                         doctest::Contains("add_bias_kv and add_zero_attn are not supported"),
                         ms::ValueError);
    CHECK_THROWS_AS(ms::nn::MultiheadAttention(8, 0), ms::ValueError);
    ms::nn::MultiheadAttention mha(8, 2, {.batch_first = true});
    const Tensor x = randn({2, 3, 8}, 50);
    CHECK_THROWS_WITH_AS(mha(randn({2, 3, 4, 8}, 1), x, x),
                         doctest::Contains("query must have rank 3"), ms::ShapeError);
    CHECK_THROWS_WITH_AS(mha(x, randn({3, 8}, 1), x),
                         doctest::Contains("key and value must have the query's rank 3"),
                         ms::ShapeError);
    CHECK_THROWS_WITH_AS(mha(randn({2, 3, 6}, 1), x, x),
                         doctest::Contains("query [2, 3, 6] must end in embed_dim = 8"),
                         ms::ShapeError);
    CHECK_THROWS_WITH_AS(mha(x, randn({2, 4, 8}, 1), x),
                         doctest::Contains("must have the same sequence length"), ms::ShapeError);
    CHECK_THROWS_WITH_AS(
        mha(x, x, x, Kwargs{{"key_padding_mask", ms::zeros({2, 4}, ms::bool_)}}),
        doctest::Contains("key_padding_mask must have shape [B, S] = [2, 3], got [2, 4]"),
        ms::ShapeError);
    CHECK_THROWS_WITH_AS(
        mha(x, x, x, Kwargs{{"attn_mask", ms::zeros({3, 2}, ms::bool_)}}),
        doctest::Contains("attn_mask must have shape [L, S] = [3, 3] or [B * num_heads, L, S] = "
                          "[4, 3, 3], got [3, 2]"),
        ms::ShapeError);
    CHECK_THROWS_WITH_AS(mha(x, x, x, Kwargs{{"attn_mask", ms::zeros({3, 3}, ms::int32)}}),
                         doctest::Contains("attn_mask must be Bool or floating"), ms::TypeError);
    CHECK_THROWS_WITH_AS(mha(x, x, x, Kwargs{{"key_pad_mask", x}}),
                         doctest::Contains("unknown keyword argument 'key_pad_mask'; accepted: "
                                           "key_padding_mask, attn_mask, is_causal"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(mha(x, x, x, Kwargs{{"is_causal", std::int64_t{1}}}),
                         doctest::Contains("keyword argument 'is_causal' must be a bool"),
                         ms::TypeError);
    CHECK_THROWS_WITH_AS(mha(x, x, x, Kwargs{{"need_weights", true}}),
                         doctest::Contains("need_weights=true is not supported"), ms::ValueError);
    CHECK_NOTHROW(mha(x, x, x, Kwargs{{"need_weights", false}}));
  }

  TEST_CASE("TransformerEncoderLayer (post- and pre-norm) vs the reference, eager and jit") {
    const std::int64_t E = 8, H = 2, B = 2, T = 5;
    for (bool norm_first : {false, true})
      for (bool batch_first : {false, true}) {
        CAPTURE(norm_first);
        CAPTURE(batch_first);
        const std::string act = norm_first ? "gelu" : "relu";
        ms::nn::TransformerEncoderLayer layer(E, H,
                                              {.dim_feedforward = 16,
                                               .dropout = 0.0,
                                               .activation = act,
                                               .batch_first = batch_first,
                                               .norm_first = norm_first});
        // Non-trivial LayerNorm parameters.
        layer.norm1.gamma.set_data(randn({E}, 60));
        layer.norm2.beta.set_data(randn({E}, 61));
        const Tensor src = randn({B, T, E}, 62);
        const std::vector<std::uint8_t> pad{0, 0, 0, 0, 1, 0, 0, 1, 0, 0};
        const Tensor kpm = ms::from_vector(pad, ms::Shape{B, T}).to(ms::bool_);
        MaskTable table(B, H, T, T);
        table.hide([&](auto b, auto, auto, auto s) { return pad[b * T + s] != 0; });
        table.causal();
        const Kwargs kw{{"src_key_padding_mask", kpm}, {"is_causal", true}};
        auto sa = [&](const Tensor& x) { return ref_mha(layer.self_attn, x, x, x, &table); };
        auto ff = [&](const Tensor& x) {
          return ref_ff(x, layer.linear1, layer.linear2, act == "gelu");
        };
        Tensor want;
        if (norm_first) {
          const Tensor x = src + sa(ref_layer_norm(src, layer.norm1));
          want = x + ff(ref_layer_norm(x, layer.norm2));
        } else {
          const Tensor x = ref_layer_norm(src + sa(src), layer.norm1);
          want = ref_layer_norm(x + ff(x), layer.norm2);
        }
        auto layout = [&](const Tensor& t) { return batch_first ? t : ms::transpose(t, 0, 1); };
        const Tensor got = layer(layout(src), kw);
        CHECK(max_diff(layout(got), want) < 1e-5);
        auto f = ms::jit([&](const Tensor& x, const Tensor& m) {
          return layer(x, Kwargs{{"src_key_padding_mask", m}, {"is_causal", true}});
        });
        CHECK(max_diff(f(layout(src), kpm), got) < 1e-5);
      }
    ms::nn::TransformerEncoderLayer layer(8, 2);
    std::vector<std::string> names;
    for (const auto& [name, p] : layer.parameters_and_names()) names.push_back(name);
    CHECK(names == std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                            "self_attn.out_proj.weight", "self_attn.out_proj.bias",
                                            "linear1.weight", "linear1.bias", "linear2.weight",
                                            "linear2.bias", "norm1.gamma", "norm1.beta",
                                            "norm2.gamma", "norm2.beta"});
    CHECK(layer.linear1.weight.shape() == ms::Shape({2048, 8}));
    CHECK(layer.self_attn.opts.dropout == 0.1);
    CHECK_THROWS_WITH_AS(ms::nn::TransformerEncoderLayer(8, 2, {.activation = "tanh"}),
                         doctest::Contains("TransformerEncoderLayer: activation must be \"relu\" "
                                           "or \"gelu\", got \"tanh\""),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(layer(randn({3, 2, 8}, 1), Kwargs{{"tgt_mask", randn({3, 3}, 2)}}),
                         doctest::Contains("TransformerEncoderLayer: unknown keyword argument "
                                           "'tgt_mask'"),
                         ms::ValueError);
  }

  TEST_CASE("TransformerDecoderLayer (post- and pre-norm) vs the reference, gradients flow") {
    const std::int64_t E = 8, H = 2, B = 2, T = 4, S = 5;
    for (bool norm_first : {false, true}) {
      CAPTURE(norm_first);
      const bool batch_first = norm_first;  // each layout once
      ms::nn::TransformerDecoderLayer layer(E, H,
                                            {.dim_feedforward = 12,
                                             .dropout = 0.0,
                                             .batch_first = batch_first,
                                             .norm_first = norm_first});
      layer.norm2.gamma.set_data(randn({E}, 70));
      layer.norm3.beta.set_data(randn({E}, 71));
      const Tensor tgt = randn({B, T, E}, 72), mem = randn({B, S, E}, 73);
      const std::vector<std::uint8_t> pad{0, 1, 0, 0, 0, 0, 0, 0, 0, 1};
      const Tensor mkpm = ms::from_vector(pad, ms::Shape{B, S}).to(ms::bool_);
      const Tensor tmask = randn({T, T}, 74);  // a float target mask, added
      MaskTable self_t(B, H, T, T), cross_t(B, H, T, S);
      const auto tm = tmask.to_vector<double>();
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t i = 0; i < T; ++i)
            for (std::int64_t j = 0; j < T; ++j)
              self_t.at(b, h, i, j) = j > i ? -kInf : tm[static_cast<std::size_t>(i * T + j)];
      cross_t.hide([&](auto b, auto, auto, auto s) { return pad[b * S + s] != 0; });
      const Kwargs kw{
          {"tgt_mask", tmask}, {"tgt_is_causal", true}, {"memory_key_padding_mask", mkpm}};
      auto sa = [&](const Tensor& x) { return ref_mha(layer.self_attn, x, x, x, &self_t); };
      auto ca = [&](const Tensor& x) {
        return ref_mha(layer.multihead_attn, x, mem, mem, &cross_t);
      };
      auto ff = [&](const Tensor& x) { return ref_ff(x, layer.linear1, layer.linear2, false); };
      Tensor want;
      if (norm_first) {
        Tensor x = tgt + sa(ref_layer_norm(tgt, layer.norm1));
        x = x + ca(ref_layer_norm(x, layer.norm2));
        want = x + ff(ref_layer_norm(x, layer.norm3));
      } else {
        Tensor x = ref_layer_norm(tgt + sa(tgt), layer.norm1);
        x = ref_layer_norm(x + ca(x), layer.norm2);
        want = ref_layer_norm(x + ff(x), layer.norm3);
      }
      auto layout = [&](const Tensor& t) { return batch_first ? t : ms::transpose(t, 0, 1); };
      CHECK(max_diff(layout(layer(layout(tgt), layout(mem), kw)), want) < 1e-5);
      // Every parameter gets a finite, non-zero gradient, eagerly and under jit alike.
      const ms::ParameterList params = layer.trainable_params();
      CHECK(params.size() == 18);  // 2 attentions (4 each), 2 Dense, 3 LayerNorm
      auto loss = [&](const Tensor& a, const Tensor& m) {
        return ms::sum(ms::square(layer(a, m, kw)));
      };
      auto g = ms::grad(loss, {.position = std::nullopt, .weights = params});
      const auto ge = g(layout(tgt), layout(mem));
      const auto gj = ms::jit(g)(layout(tgt), layout(mem));
      REQUIRE(ge.size() == params.size());
      for (std::size_t i = 0; i < ge.size(); ++i) {
        INFO(params[i].name());
        const double n = ms::sum(ms::square(ge[i])).item<double>();
        CHECK(std::isfinite(n));
        CHECK(n > 0);
        CHECK(max_diff(ge[i], gj[i]) < 1e-4 * (1 + std::sqrt(n)));
      }
    }
    ms::nn::TransformerDecoderLayer layer(8, 2, {.dim_feedforward = 16});
    const auto sd = layer.state_dict();
    for (const char* key : {"self_attn.in_proj_weight", "multihead_attn.in_proj_bias",
                            "multihead_attn.out_proj.weight", "linear2.bias", "norm3.gamma"})
      CHECK_MESSAGE(sd.contains(key), key);
    CHECK_THROWS_WITH_AS(layer(randn({3, 2, 8}, 1), randn({4, 3, 8}, 2)),
                         doctest::Contains("must have the same batch size"), ms::ShapeError);
  }

  TEST_CASE("TransformerEncoder: the layers in sequence, then the norm; names layers.i.*") {
    const std::int64_t E = 8, H = 2, B = 2, T = 5;
    const ms::nn::TransformerLayerOptions opts{
        .dim_feedforward = 16, .dropout = 0.0, .batch_first = true};
    ms::nn::TransformerEncoder enc(
        [&] { return std::make_shared<ms::nn::TransformerEncoderLayer>(E, H, opts); }, 3,
        std::make_shared<ms::nn::LayerNorm>(std::vector<std::int64_t>{E}));
    REQUIRE(enc.layers.size() == 3);
    enc.norm->gamma.set_data(randn({E}, 80));
    const Tensor src = randn({B, T, E}, 81);
    const Tensor kpm =
        ms::from_vector(std::vector<std::uint8_t>{0, 0, 0, 1, 1, 0, 0, 0, 0, 1}, ms::Shape{B, T})
            .to(ms::bool_);
    const Kwargs kw{{"src_key_padding_mask", kpm}, {"is_causal", true}};
    Tensor want = src, want_kw = src;
    for (std::int64_t i = 0; i < 3; ++i) {
      want = enc.layer(i)(want);
      want_kw = enc.layer(i)(want_kw, kw);
    }
    CHECK(max_diff(enc(src), (*enc.norm)(want)) == 0);
    CHECK(max_diff(enc(src, kw), (*enc.norm)(want_kw)) == 0);
    CHECK(max_diff(enc(src, kw), enc(src)) > 1e-3);  // the masks reach the layers
    // Under ms::jit, with the masks as keyword arguments.
    auto f = ms::jit(enc);
    CHECK(max_diff(f(src, kw), enc(src, kw)) < 1e-5);
    std::vector<std::string> names;
    for (const auto& [name, p] : enc.parameters_and_names()) names.push_back(name);
    REQUIRE(names.size() == 3 * 12 + 2);
    CHECK(names[0] == "layers.0.self_attn.in_proj_weight");
    CHECK(names[12] == "layers.1.self_attn.in_proj_weight");
    CHECK(names[35] == "layers.2.norm2.beta");
    CHECK(names[36] == "norm.gamma");
    CHECK(names[37] == "norm.beta");
    CHECK(enc.get_parameter("layers.2.linear1.weight").same_as(enc.layer(2).linear1.weight));
    CHECK_THROWS_WITH_AS((void)enc.layer(3), doctest::Contains("index 3 is out of range for 3"),
                         ms::IndexError);
    CHECK_THROWS_WITH_AS(ms::nn::TransformerEncoder(ms::nn::TransformerEncoderLayer(E, H), 0),
                         doctest::Contains("TransformerEncoder: num_layers must be >= 1, got 0"),
                         ms::ValueError);
  }

  TEST_CASE("TransformerEncoder from a layer: copies of its weights, not shared; no norm") {
    ms::nn::TransformerEncoderLayer proto(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
    ms::nn::TransformerEncoder enc(proto, 2);
    CHECK(enc.norm == nullptr);
    CHECK(enc.parameters().size() == 24);
    for (std::int64_t i = 0; i < 2; ++i) {
      CHECK(max_diff(enc.layer(i).self_attn.in_proj_weight, proto.self_attn.in_proj_weight) == 0);
      CHECK(max_diff(enc.layer(i).linear2.bias, proto.linear2.bias) == 0);
      CHECK_FALSE(enc.layer(i).linear2.bias.same_as(proto.linear2.bias));
    }
    CHECK(enc.layer(0).opts.dim_feedforward == 16);
    enc.layer(1).linear1.weight.set_data(randn({16, 8}, 90));  // layers train apart
    CHECK(max_diff(enc.layer(0).linear1.weight, proto.linear1.weight) == 0);
    const Tensor src = randn({5, 2, 8}, 91);  // [L, B, E]
    CHECK(max_diff(enc(src), enc.layer(1)(enc.layer(0)(src))) == 0);
  }

  TEST_CASE("TransformerDecoder: the layers in sequence over one memory, then the norm") {
    const std::int64_t E = 8, H = 2, B = 2, T = 4, S = 5;
    ms::nn::TransformerDecoderLayer proto(
        E, H, {.dim_feedforward = 12, .dropout = 0.0, .batch_first = true, .norm_first = true});
    ms::nn::TransformerDecoder dec(
        proto, 2, std::make_shared<ms::nn::LayerNorm>(std::vector<std::int64_t>{E}));
    dec.layer(1).linear1.weight.set_data(randn({12, E}, 95));
    dec.norm->beta.set_data(randn({E}, 96));
    const Tensor tgt = randn({B, T, E}, 97), mem = randn({B, S, E}, 98);
    const Tensor mkpm =
        ms::from_vector(std::vector<std::uint8_t>{0, 1, 0, 0, 0, 0, 0, 0, 0, 1}, ms::Shape{B, S})
            .to(ms::bool_);
    const Kwargs kw{{"tgt_is_causal", true}, {"memory_key_padding_mask", mkpm}};
    const Tensor plain = dec.layer(1)(dec.layer(0)(tgt, mem), mem);
    const Tensor masked = dec.layer(1)(dec.layer(0)(tgt, mem, kw), mem, kw);
    CHECK(max_diff(dec(tgt, mem), (*dec.norm)(plain)) == 0);
    CHECK(max_diff(dec(tgt, mem, kw), (*dec.norm)(masked)) == 0);
    auto f = ms::jit(dec);
    CHECK(max_diff(f(tgt, mem, kw), dec(tgt, mem, kw)) < 1e-5);
    std::vector<std::string> names;
    for (const auto& [name, p] : dec.parameters_and_names()) names.push_back(name);
    REQUIRE(names.size() == 2 * 18 + 2);
    CHECK(names[0] == "layers.0.self_attn.in_proj_weight");
    CHECK(names[4] == "layers.0.multihead_attn.in_proj_weight");
    CHECK(names[18] == "layers.1.self_attn.in_proj_weight");
    CHECK(names.back() == "norm.beta");
    CHECK_THROWS_WITH_AS(
        ms::nn::TransformerDecoder(
            [] { return std::shared_ptr<ms::nn::TransformerDecoderLayer>(); }, 2),
        doctest::Contains("TransformerDecoder: the layer factory returned null for layer 0"),
        ms::ValueError);
  }

  TEST_CASE("Gpt: [B, T] ids to [B, T, V] logits, tied output, causal, learns under jit") {
    ms::manual_seed(7);
    ms::nn::Gpt gpt({.vocab_size = 11, .block_size = 12, .n_layer = 2, .n_head = 2, .n_embd = 16});
    CHECK(gpt.trainable_params().size() == 2 + 2 * 12 + 2);  // wte, wpe, 12 per block, ln_f
    std::vector<std::string> names;
    for (const auto& [name, p] : gpt.parameters_and_names()) names.push_back(name);
    CHECK(names.front() == "wte.embedding_table");
    CHECK(std::find(names.begin(), names.end(), "h.1.self_attn.in_proj_weight") != names.end());
    CHECK(names.back() == "ln_f.beta");
    // A repeated sequence: the next token is (t + 3) mod 11.
    std::vector<std::int64_t> seq;
    for (int i = 0; i < 2 * 13; ++i) seq.push_back((i * 3) % 11);
    std::vector<std::int64_t> xs, ys;
    for (int b = 0; b < 2; ++b)
      for (int t = 0; t < 12; ++t) {
        xs.push_back(seq[static_cast<std::size_t>(b + t)]);
        ys.push_back(seq[static_cast<std::size_t>(b + t + 1)]);
      }
    const Tensor x = ms::from_vector(xs, ms::Shape{2, 12}),
                 y = ms::from_vector(ys, ms::Shape{2, 12});
    const Tensor logits = gpt(x);
    CHECK(logits.shape() == ms::Shape({2, 12, 11}));
    // Causality: changing token 6 leaves the logits at positions 0..5 alone.
    std::vector<std::int64_t> xs2 = xs;
    xs2[6] = (xs2[6] + 1) % 11;
    const Tensor logits2 = gpt(ms::from_vector(xs2, ms::Shape{2, 12}));
    CHECK(max_diff(logits.slice(1, 0, 6), logits2.slice(1, 0, 6)) == 0.0);
    CHECK(max_diff(logits.slice(1, 6, 7), logits2.slice(1, 6, 7)) > 1e-4);
    ms::optim::AdamW opt(gpt.trainable_params(), {.lr = 1e-2, .weight_decay = 0.0});
    auto step = ms::jit([&](const Tensor& a, const Tensor& b) {
      auto loss_fn = [&](const Tensor& u, const Tensor& v) {
        return ms::nn::cross_entropy(gpt(u), v);
      };
      auto [loss, grads] = ms::value_and_grad(
          loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(a, b);
      opt.apply(grads);
      return loss;
    });
    const double first = step(x, y).item<double>();
    double last = first;
    for (int i = 0; i < 40; ++i) last = step(x, y).item<double>();
    CHECK(first > 2.0);  // about log(11) at the start
    CHECK(last < 0.5 * first);
    CHECK(step.compile_count() == 1);
    // Under the auto-dynamic manager a varying batch size reuses one generalized graph.
    ms::JitConfig dyn;
    dyn.dynamic = 1;
    auto fwd = [&](const Tensor& ids) { return gpt(ids); };
    auto fd = ms::jit(fwd, dyn);
    for (std::int64_t b : {2, 3, 1, 4, 5}) {
      CAPTURE(b);
      std::vector<std::int64_t> ids(static_cast<std::size_t>(b * 8));
      for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i * 7 % 11);
      const Tensor t = ms::from_vector(ids, ms::Shape{b, 8});
      CHECK(max_diff(fd(t), fwd(t)) < 1e-5);
    }
    CHECK(fd.compile_count() == 3);
    // Errors name the cell and the argument.
    CHECK_THROWS_WITH_AS(gpt(ms::zeros({2, 13}, ms::int64)),
                         doctest::Contains("Gpt: ids has 13 positions, more than block_size = 12"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(gpt(ms::zeros({12}, ms::int64)),
                         doctest::Contains("Gpt: ids must have shape [B, T], got [12]"),
                         ms::ShapeError);
    CHECK_THROWS_AS(gpt(ms::zeros({2, 3})), ms::TypeError);
    CHECK_THROWS_WITH_AS(ms::nn::Gpt({.vocab_size = 5, .block_size = 4, .n_head = 3}),
                         doctest::Contains("Gpt: n_embd (32) must be divisible by n_head (3)"),
                         ms::ValueError);
  }
}
