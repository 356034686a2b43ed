// Layers, losses and optimizers: values against references computed here in
// double, and a jitted training step against the same step run eagerly.
#include <doctest/doctest.h>
#include <algorithm>

#include <cmath>
#include <ms/autodiff/gradcheck.hpp>
#include <ms/cell.hpp>

#include "nn/nn_test_util.hpp"

namespace {

using ms_test::randn;

std::vector<double> vec(const ms::Tensor& t) { return t.to_vector<double>(); }

}  // namespace

TEST_SUITE("nn") {
  TEST_CASE(
      "Dropout under jit: the eager numbers in training, recompiled without it in eval mode") {
    ms::Generator g(4);
    ms::nn::Dense fc(6, 5);
    ms::nn::Dropout drop(0.5, &g);
    drop.set_train(true);  // cells start in eval mode, as MindSpore's
    auto fwd = [&](const ms::Tensor& x) -> ms::Tensor { return drop(fc(x)); };
    const ms::Tensor x = randn({3, 6}, 1);
    const ms::Tensor e1 = fwd(x), e2 = fwd(x);
    g.manual_seed(4);
    auto f = ms::jit(fwd);
    CHECK_FALSE(ms::allclose(e1, fc(x), 0, 0));
    CHECK(ms::allclose(f(x), e1, 0, 0));
    CHECK(ms::allclose(f(x), e2, 0, 0));
    CHECK(f.compile_count() == 1);
    drop.set_train(false);  // the eval mode's graph: compiled once, the training one kept
    const std::uint64_t off = g.offset();
    CHECK(ms::allclose(f(x), fc(x), 0, 0));
    CHECK(f.compile_count() == 2);
    CHECK(g.offset() == off);  // eval mode draws nothing
    drop.set_train(true);
    // Gradients through the cell under jit: the mask of the forward pass.
    auto loss = [&](const ms::Tensor& v) { return ms::sum(drop(fc(v))); };
    const ms::ParameterList params = fc.trainable_params();
    g.manual_seed(9);
    const auto eager = ms::value_and_grad(loss, {.position = std::nullopt, .weights = params})(x);
    g.manual_seed(9);
    auto step = ms::jit([&](const ms::Tensor& v) {
      return ms::value_and_grad(loss, {.position = std::nullopt, .weights = params})(v);
    });
    const auto jitted = step(x);
    CHECK(ms::allclose(jitted.value, eager.value, 1e-6, 1e-6));
    REQUIRE(jitted.grads.size() == 2);
    CHECK(ms::allclose(jitted.grads[0], eager.grads[0], 1e-6, 1e-6));
    CHECK(ms::allclose(jitted.grads[1], eager.grads[1], 1e-6, 1e-6));
    // Half of the 15 outputs dropped: those rows of the weight gradient are zero.
    const auto gw = vec(eager.grads[0]);
    int zero_rows = 0;
    for (int r = 0; r < 5; ++r) {
      bool all_zero = true;
      for (int c = 0; c < 6; ++c) all_zero &= gw[static_cast<std::size_t>(r * 6 + c)] == 0.0;
      zero_rows += all_zero;
    }
    CHECK(zero_rows < 5);
  }

  TEST_CASE("Dense: default init bounds as MindSpore (HeUniform(sqrt 5), Uniform(1/sqrt in))") {
    ms::nn::Dense d(100, 50);
    const double wb = std::sqrt(6.0 / ((1.0 + 5.0) * 100.0));  // = 1/sqrt(100)
    for (double v : vec(d.weight)) CHECK(std::abs(v) <= wb + 1e-7);
    for (double v : vec(d.bias)) CHECK(std::abs(v) <= 0.1 + 1e-7);
    CHECK(ms::max(ms::abs(d.weight)).item<double>() > 0.5 * wb);
    ms::nn::Dense nb(3, 2, {.has_bias = false});
    CHECK_FALSE(nb.bias.defined());
    CHECK(nb.parameters().size() == 1);
    CHECK_THROWS_WITH_AS(d(ms::ones({2, 99})), doctest::Contains("Dense: input of shape [2, 99]"),
                         ms::ShapeError);
    CHECK_THROWS_AS(ms::nn::Dense(0, 3), ms::ValueError);
  }

  TEST_CASE("Conv2d: pad modes, shapes and values against a direct loop") {
    ms::nn::Conv2d same(2, 3, 3, {}, {.has_bias = true});
    const ms::Tensor x = randn({1, 2, 5, 5}, 3);
    const ms::Tensor y = same(x);
    CHECK(y.shape() == ms::Shape({1, 3, 5, 5}));
    const auto w = vec(same.weight), b = vec(same.bias), xv = vec(x), yv = vec(y);
    for (int o = 0; o < 3; ++o)
      for (int i = 0; i < 5; ++i)
        for (int j = 0; j < 5; ++j) {
          double s = b[static_cast<std::size_t>(o)];
          for (int c = 0; c < 2; ++c)
            for (int u = 0; u < 3; ++u)
              for (int v = 0; v < 3; ++v) {
                const int ii = i + u - 1, jj = j + v - 1;
                if (ii < 0 || jj < 0 || ii >= 5 || jj >= 5) continue;
                s += w[static_cast<std::size_t>(((o * 2 + c) * 3 + u) * 3 + v)] *
                     xv[static_cast<std::size_t>((c * 5 + ii) * 5 + jj)];
              }
          CHECK(yv[static_cast<std::size_t>((o * 5 + i) * 5 + j)] ==
                doctest::Approx(s).epsilon(1e-5));
        }
    // "same" with stride 2 on an even size: ceil(6 / 2) = 3, uneven padding.
    ms::nn::Conv2d s2(1, 1, 2, {.stride = {2, 2}});
    CHECK(s2(ms::ones({1, 1, 6, 6})).shape() == ms::Shape({1, 1, 3, 3}));
    ms::nn::Conv2d valid(1, 4, 3, {}, {.pad_mode = "valid"});
    CHECK(valid(ms::ones({2, 1, 8, 8})).shape() == ms::Shape({2, 4, 6, 6}));
    CHECK_FALSE(valid.bias.defined());  // MindSpore's default has_bias = false
    CHECK_THROWS_WITH_AS(ms::nn::Conv2d(1, 1, 3, {.padding = {1, 1}}),
                         doctest::Contains("needs pad_mode \"pad\""), ms::ValueError);
    CHECK_THROWS_AS(ms::nn::Conv2d(3, 4, 3, {.groups = 2}), ms::ValueError);
    CHECK_THROWS_AS(ms::nn::Conv2d(1, 1, 3, {}, {.pad_mode = "full"}), ms::ValueError);
  }

  TEST_CASE("pooling, flatten and activation cells") {
    const ms::Tensor x = randn({2, 3, 4, 4}, 5);
    ms::nn::MaxPool2d mp(2);
    CHECK(ms::allclose(mp(x), ms::max_pool2d(x, {.kernel = {2, 2}})));
    ms::nn::AvgPool2d ap({.kernel = {2}, .stride = {1, 1}});
    CHECK(ap(x).shape() == ms::Shape({2, 3, 3, 3}));
    ms::nn::MaxPool2d same({.kernel = {3}, .stride = {2, 2}}, "same");
    CHECK(same(x).shape() == ms::Shape({2, 3, 2, 2}));
    ms::nn::Flatten fl;
    CHECK(fl(x).shape() == ms::Shape({2, 48}));
    ms::nn::LeakyReLU lr(0.1);
    CHECK(ms::allclose(lr(ms::tensor({-2.0f, 3.0f})), ms::tensor({-0.2f, 3.0f})));
    ms::nn::Softmax sm;
    CHECK(ms::allclose(ms::sum(sm(x), {-1}), ms::ones({2, 3, 4})));
  }

  TEST_CASE("BatchNorm: batch statistics in training, moving statistics in eval") {
    ms::nn::BatchNorm1d bn(3, {.momentum = 0.9});
    const ms::Tensor x = randn({8, 3}, 11) * 2.0f + 1.0f;
    bn.set_train();
    const ms::Tensor y = bn(x);
    const auto xv = vec(x), yv = vec(y);
    for (int c = 0; c < 3; ++c) {
      double m = 0, v = 0;
      for (int i = 0; i < 8; ++i) m += xv[static_cast<std::size_t>(i * 3 + c)];
      m /= 8;
      for (int i = 0; i < 8; ++i) v += std::pow(xv[static_cast<std::size_t>(i * 3 + c)] - m, 2);
      for (int i = 0; i < 8; ++i)
        CHECK(
            yv[static_cast<std::size_t>(i * 3 + c)] ==
            doctest::Approx((xv[static_cast<std::size_t>(i * 3 + c)] - m) / std::sqrt(v / 8 + 1e-5))
                .epsilon(1e-4));
      CHECK(vec(bn.moving_mean)[static_cast<std::size_t>(c)] ==
            doctest::Approx(0.1 * m).epsilon(1e-5));
      CHECK(vec(bn.moving_variance)[static_cast<std::size_t>(c)] ==
            doctest::Approx(0.9 + 0.1 * v / 7).epsilon(1e-5));
    }
    bn.set_train(false);
    const ms::Tensor e = bn(x);
    CHECK(ms::allclose(e, (x - bn.moving_mean) / ms::sqrt(bn.moving_variance + 1e-5f), 1e-5, 1e-5));
    // The buffers are in the state dict; under jit the moving statistics update in the graph.
    auto sd = bn.state_dict();
    REQUIRE(sd.size() == 4);
    CHECK(sd[2].first == "moving_mean");
    ms::nn::BatchNorm2d bn2(2);
    bn2.set_train();
    auto f = ms::jit([&](const ms::Tensor& a) { return bn2(a); });
    const ms::Tensor x4 = randn({4, 2, 3, 3}, 12);
    f(x4);
    const auto once = vec(bn2.moving_mean);
    f(x4);
    const auto twice = vec(bn2.moving_mean);
    CHECK(twice[0] == doctest::Approx(once[0] * 1.9).epsilon(1e-5));
  }

  TEST_CASE("LayerNorm, Embedding, SequentialCell") {
    ms::nn::LayerNorm ln({4});
    const ms::Tensor x = randn({3, 4}, 13);
    const ms::Tensor y = ln(x);
    CHECK(ms::allclose(ms::mean(y, {1}), ms::zeros({3}), 1e-5, 1e-5));
    CHECK(ms::allclose(ms::mean(ms::square(y), {1}), ms::ones({3}), 1e-4, 1e-4));
    ms::nn::Embedding emb(10, 4);
    const ms::Tensor ids = ms::tensor({3, 3, 7}).to(ms::int32);
    const ms::Tensor e = emb(ids);
    CHECK(e.shape() == ms::Shape({3, 4}));
    CHECK(ms::allclose(e.select(0, 0), emb.embedding_table.select(0, 3), 0, 0));
    CHECK_THROWS_AS(emb(ms::ones({2})), ms::TypeError);
    ms::nn::SequentialCell seq{std::make_shared<ms::nn::Dense>(4, 5),
                               std::make_shared<ms::nn::ReLU>(),
                               std::make_shared<ms::nn::Dense>(5, 2)};
    CHECK(seq.parameters_and_names()[2].first == "2.weight");
    CHECK(seq(x).shape() == ms::Shape({3, 2}));
    auto* d0 = seq[0].as<ms::nn::Dense>();
    REQUIRE(d0 != nullptr);
    auto* d2 = seq[2].as<ms::nn::Dense>();
    REQUIRE(d2 != nullptr);
    CHECK(seq[1].as<ms::nn::Dense>() == nullptr);
    CHECK(ms::allclose(seq(x), (*d2)(ms::relu((*d0)(x))), 0, 0));
  }

  TEST_CASE("Embedding on [B, T] ids: repeated ids accumulate, as a naive float64 scatter-add") {
    ms::nn::Embedding emb(7, 3);
    // float64 table, so the comparison is exact up to rounding of the sums.
    emb.embedding_table = ms::Parameter(randn({7, 3}, 31).to(ms::float64), "embedding_table");
    const std::vector<std::int64_t> idv{1, 3, 1, 6, 1, 3, 0, 1, 3, 6};
    const ms::Tensor ids = ms::from_vector(idv, ms::Shape{2, 5});
    const ms::Tensor r = randn({2, 5, 3}, 32).to(ms::float64);
    const ms::Tensor out = emb(ids);
    CHECK(out.shape() == ms::Shape({2, 5, 3}));
    const auto tv = vec(emb.embedding_table), rv = vec(r), ov = vec(out);
    std::vector<double> want(21, 0.0);
    for (std::size_t p = 0; p < idv.size(); ++p)
      for (std::size_t k = 0; k < 3; ++k) {
        const auto row = static_cast<std::size_t>(idv[p]);
        CHECK(ov[p * 3 + k] == tv[row * 3 + k]);
        want[row * 3 + k] += rv[p * 3 + k];
      }
    auto loss = [&](const ms::Tensor& i) { return ms::sum(emb(i) * r); };
    const ms::ParameterList w{emb.embedding_table};
    const auto g = ms::grad(loss, {.position = std::nullopt, .weights = w})(ids);
    REQUIRE(g.size() == 1);
    const auto gv = vec(g[0]);
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(gv[i] == doctest::Approx(want[i]));
    CHECK(want[1 * 3] != 0.0);  // row 1 is looked up four times
    const auto gj = ms::jit(ms::grad(loss, {.position = std::nullopt, .weights = w}))(ids);
    CHECK(ms::allclose(gj[0], g[0], 1e-14, 1e-14));
    // Varying [B, T] under the auto-dynamic manager.
    auto fwd = [&](const ms::Tensor& i) { return emb(i); };
    std::string log;
    ms::JitConfig dyn;
    dyn.dynamic = 1;
    dyn.on_recompile = [&](const std::string& l) { log += l + "\n"; };
    auto fd = ms::jit(fwd, dyn);
    for (auto [b, t] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{2, 5}, {3, 2}, {1, 4}, {4, 3}}) {
      std::vector<std::int64_t> v(static_cast<std::size_t>(b * t));
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int64_t>((i * 5) % 7);
      const ms::Tensor x = ms::from_vector(v, ms::Shape{b, t});
      CHECK(ms::allclose(fd(x), fwd(x), 0, 0));
    }
    CHECK(fd.compile_count() == 3);
    INFO(log);
    CHECK(log.find("traced a graph of their own") == std::string::npos);
  }

  TEST_CASE("LayerNorm over the last dim of [B, T, D]: forward and gradients vs naive float64") {
    const std::int64_t B = 2, T = 3, D = 4;
    ms::nn::LayerNorm ln({D}, 1e-5);
    ln.gamma = ms::Parameter(randn({D}, 41).to(ms::float64), "gamma");
    ln.beta = ms::Parameter(randn({D}, 42).to(ms::float64), "beta");
    const ms::Tensor x = randn({B, T, D}, 43).to(ms::float64);
    const ms::Tensor r = randn({B, T, D}, 44).to(ms::float64);
    const auto xv = vec(x), rv = vec(r), gv = vec(ln.gamma), bv = vec(ln.beta);
    const auto n = static_cast<std::size_t>(D);
    std::vector<double> y(xv.size()), dx(xv.size()), dgamma(n, 0.0), dbeta(n, 0.0);
    for (std::size_t row = 0; row < static_cast<std::size_t>(B * T); ++row) {
      const double* xr = xv.data() + row * n;
      double mu = 0, var = 0;
      for (std::size_t k = 0; k < n; ++k) mu += xr[k] / D;
      for (std::size_t k = 0; k < n; ++k) var += (xr[k] - mu) * (xr[k] - mu) / D;
      const double inv = 1.0 / std::sqrt(var + 1e-5);
      double mg = 0, mgx = 0;  // means of g and g * xhat, g = dL/dxhat
      for (std::size_t k = 0; k < n; ++k) {
        const double xh = (xr[k] - mu) * inv, g = rv[row * n + k] * gv[k];
        y[row * n + k] = xh * gv[k] + bv[k];
        dgamma[k] += rv[row * n + k] * xh;
        dbeta[k] += rv[row * n + k];
        mg += g / D;
        mgx += g * xh / D;
      }
      for (std::size_t k = 0; k < n; ++k) {
        const double xh = (xr[k] - mu) * inv;
        dx[row * n + k] = inv * (rv[row * n + k] * gv[k] - mg - xh * mgx);
      }
    }
    const auto out = vec(ln(x));
    for (std::size_t i = 0; i < y.size(); ++i) CHECK(out[i] == doctest::Approx(y[i]));
    auto loss = [&](const ms::Tensor& u) { return ms::sum(ln(u) * r); };
    const ms::ParameterList w{ln.gamma, ln.beta};
    auto vg = ms::value_and_grad(loss, {.position = 0, .weights = w});
    for (int jitted = 0; jitted < 2; ++jitted) {
      const auto [l, grads] = jitted ? ms::jit(vg)(x) : vg(x);
      REQUIRE(grads.size() == 3);  // x, gamma, beta
      CHECK(l.item<double>() == doctest::Approx(ms::sum(ln(x) * r).item<double>()));
      const auto a = vec(grads[0]), g0 = vec(grads[1]), g1 = vec(grads[2]);
      for (std::size_t i = 0; i < dx.size(); ++i) CHECK(a[i] == doctest::Approx(dx[i]));
      for (std::size_t k = 0; k < n; ++k) {
        CHECK(g0[k] == doctest::Approx(dgamma[k]));
        CHECK(g1[k] == doctest::Approx(dbeta[k]));
      }
    }
    auto rc =
        ms::testing::gradcheck([&](const std::vector<ms::Tensor>& u) { return ln(u[0]); }, {x});
    CHECK_MESSAGE(rc.ok, rc.message);
  }

  TEST_CASE("losses against direct formulas") {
    const ms::Tensor logits = randn({4, 5}, 17);
    const ms::Tensor labels = ms::tensor({0, 4, 2, 2}).to(ms::int32);
    const auto lv = vec(logits);
    std::vector<double> per(4);
    for (int i = 0; i < 4; ++i) {
      double mx = -1e300, s = 0;
      for (int c = 0; c < 5; ++c) mx = std::max(mx, lv[static_cast<std::size_t>(i * 5 + c)]);
      for (int c = 0; c < 5; ++c) s += std::exp(lv[static_cast<std::size_t>(i * 5 + c)] - mx);
      const int y = std::vector<int>{0, 4, 2, 2}[static_cast<std::size_t>(i)];
      per[static_cast<std::size_t>(i)] =
          -(lv[static_cast<std::size_t>(i * 5 + y)] - mx - std::log(s));
    }
    const double mean = (per[0] + per[1] + per[2] + per[3]) / 4;
    CHECK(ms::nn::cross_entropy(logits, labels).item<double>() ==
          doctest::Approx(mean).epsilon(1e-5));
    CHECK(ms::nn::cross_entropy(logits, labels, {.reduction = "sum"}).item<double>() ==
          doctest::Approx(4 * mean).epsilon(1e-5));
    const auto none = vec(ms::nn::cross_entropy(logits, labels, {.reduction = "none"}));
    for (int i = 0; i < 4; ++i)
      CHECK(none[static_cast<std::size_t>(i)] ==
            doctest::Approx(per[static_cast<std::size_t>(i)]).epsilon(1e-5));
    // Dense (probability) targets equal sparse ones when one-hot.
    CHECK(ms::allclose(ms::nn::cross_entropy(logits, ms::one_hot(labels, 5)),
                       ms::nn::cross_entropy(logits, labels)));
    // Label smoothing: (1 - s) * CE + s * mean over classes of -log p.
    {
      const ms::Tensor logp = ms::log_softmax(logits, 1);
      const ms::Tensor ref = ms::mean(-ms::sum(logp, {1}) / 5.0f) * 0.1f +
                             ms::nn::cross_entropy(logits, labels) * 0.9f;
      CHECK(ms::allclose(ms::nn::cross_entropy(logits, labels, {.label_smoothing = 0.1}), ref, 1e-5,
                         1e-5));
    }
    CHECK(ms::allclose(ms::nn::nll_loss(ms::log_softmax(logits, 1), labels),
                       ms::nn::cross_entropy(logits, labels), 1e-6, 1e-6));
    const ms::Tensor a = randn({3, 2}, 1), b = randn({3, 2}, 2);
    double mse = 0, l1 = 0, bce = 0;
    const auto av = vec(a), bv = vec(b);
    for (std::size_t i = 0; i < 6; ++i) {
      mse += std::pow(av[i] - bv[i], 2) / 6;
      l1 += std::abs(av[i] - bv[i]) / 6;
      const double t = 1.0 / (1.0 + std::exp(-bv[i]));  // targets in (0, 1)
      const double p = 1.0 / (1.0 + std::exp(-av[i]));
      bce -= (t * std::log(p) + (1 - t) * std::log(1 - p)) / 6;
    }
    CHECK(ms::nn::mse_loss(a, b).item<double>() == doctest::Approx(mse).epsilon(1e-5));
    CHECK(ms::nn::l1_loss(a, b).item<double>() == doctest::Approx(l1).epsilon(1e-5));
    CHECK(ms::nn::binary_cross_entropy_with_logits(a, ms::sigmoid(b)).item<double>() ==
          doctest::Approx(bce).epsilon(1e-5));
    // Cells as MindSpore's.
    ms::nn::SoftmaxCrossEntropyWithLogits sce(true, "mean");
    CHECK(ms::allclose(sce(logits, labels), ms::nn::cross_entropy(logits, labels)));
    // Bad input.
    CHECK_THROWS_WITH_AS(ms::nn::cross_entropy(logits, ms::tensor({0, 5, 1, 1}).to(ms::int32)),
                         doctest::Contains("cross_entropy: class labels must be in [0, 5)"),
                         ms::IndexError);
    CHECK_THROWS_WITH_AS(ms::nn::cross_entropy(logits, labels, {.reduction = "avg"}),
                         doctest::Contains("reduction must be"), ms::ValueError);
    CHECK_THROWS_AS(ms::nn::cross_entropy(logits, ms::tensor({0, 1}).to(ms::int32)),
                    ms::ShapeError);
    CHECK_THROWS_AS(ms::nn::mse_loss(a, ms::ones({2, 3})), ms::ShapeError);
    CHECK_THROWS_AS(ms::nn::SoftmaxCrossEntropyWithLogits(false)(logits, labels), ms::TypeError);
  }

  TEST_CASE("optimizers against hand-written updates") {
    const std::vector<double> g1{0.5, -1.0}, g2{0.25, 2.0};
    SUBCASE("Momentum (MindSpore) and SGD with momentum (PyTorch) agree") {
      ms::Parameter p(ms::tensor({1.0f, 2.0f}), "p"), q(ms::tensor({1.0f, 2.0f}), "q");
      ms::optim::Momentum m({p}, {.lr = 0.1, .momentum = 0.9});
      ms::optim::SGD s({q}, {.lr = 0.1, .momentum = 0.9});
      std::vector<double> ref{1.0, 2.0}, v{0, 0};
      for (const auto& g : {g1, g2}) {
        const ms::Tensor gt = ms::tensor({static_cast<float>(g[0]), static_cast<float>(g[1])});
        m.apply({gt});
        s.apply({gt});
        for (std::size_t i = 0; i < 2; ++i) {
          v[i] = 0.9 * v[i] + g[i];
          ref[i] -= 0.1 * v[i];
        }
      }
      CHECK(vec(p)[0] == doctest::Approx(ref[0]).epsilon(1e-6));
      CHECK(vec(p)[1] == doctest::Approx(ref[1]).epsilon(1e-6));
      CHECK(ms::allclose(p, q, 0, 0));
      CHECK(m.step_count() == 2);
    }
    SUBCASE("Adam and AdamW") {
      ms::Parameter p(ms::tensor({1.0f, 2.0f}), "p"), q(ms::tensor({1.0f, 2.0f}), "q");
      ms::optim::Adam a({p}, {.lr = 0.01});
      ms::optim::AdamW w({q}, {.lr = 0.01, .weight_decay = 0.1});
      CHECK(ms::optim::AdamW({p}, {.lr = 0.5}).opts.weight_decay == 0.01);  // AdamW's default
      std::vector<double> rp{1.0, 2.0}, rq{1.0, 2.0}, m(2), v(2), mq(2), vq(2);
      int t = 0;
      for (const auto& g : {g1, g2}) {
        ++t;
        const ms::Tensor gt = ms::tensor({static_cast<float>(g[0]), static_cast<float>(g[1])});
        a.apply({gt});
        w.apply({gt});
        for (std::size_t i = 0; i < 2; ++i) {
          m[i] = 0.9 * m[i] + 0.1 * g[i];
          v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
          const double mh = m[i] / (1 - std::pow(0.9, t)), vh = v[i] / (1 - std::pow(0.999, t));
          rp[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
          rq[i] *= 1 - 0.01 * 0.1;
          rq[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
        }
      }
      for (std::size_t i = 0; i < 2; ++i) {
        CHECK(vec(p)[i] == doctest::Approx(rp[i]).epsilon(1e-5));
        CHECK(vec(q)[i] == doctest::Approx(rq[i]).epsilon(1e-5));
      }
    }
    SUBCASE("state dict, schedules, errors") {
      ms::Parameter p(ms::tensor({1.0f, 2.0f}), "p");
      ms::optim::Momentum m({p}, {.lr = 0.1});
      m.apply({ms::ones({2})});
      auto sd = m.state_dict();
      REQUIRE(sd.size() == 3);
      CHECK(sd[2].first == "p.moments");
      ms::Parameter p2(ms::tensor({1.0f, 2.0f}), "p");
      ms::optim::Momentum m2({p2}, {.lr = 0.5});
      m2.load_state_dict(sd);
      CHECK(m2.lr() == doctest::Approx(0.1));
      CHECK(m2.step_count() == 1);
      ms::StateDict bad = sd;
      bad[2].second = ms::zeros({3});
      CHECK_THROWS_WITH_AS(m2.load_state_dict(bad), doctest::Contains("'p.moments' has shape [2]"),
                           ms::ShapeError);
      ms::optim::CosineAnnealingLR cos(m, 4, 0.0);
      cos.step();
      cos.step();
      CHECK(m.lr() == doctest::Approx(0.05));
      cos.step();
      cos.step();
      CHECK(m.lr() == doctest::Approx(0.0).epsilon(1e-7));
      ms::optim::StepLR st(m2, 2, 0.5);
      st.step();
      CHECK(m2.lr() == doctest::Approx(0.1));
      st.step();
      CHECK(m2.lr() == doctest::Approx(0.05));
      CHECK_THROWS_WITH_AS(m.apply({}), doctest::Contains("Momentum.apply: 0 gradients for 1"),
                           ms::ValueError);
      CHECK_THROWS_WITH_AS(m.apply({ms::ones({3})}),
                           doctest::Contains("the gradient of 'p' has shape [3]"), ms::ShapeError);
      CHECK_THROWS_AS(ms::optim::Momentum({p, p}), ms::ValueError);
      CHECK_THROWS_AS(ms::optim::Adam({p}, {.beta1 = 1.0}), ms::ValueError);
    }
  }

  TEST_CASE("a jitted training step equals the eager one and changing lr does not recompile") {
    struct Net : ms::Cell<Net> {
      ms::nn::Dense fc1{6, 16}, fc2{16, 3};
      Net() { register_cells("fc1", fc1, "fc2", fc2); }
      ms::Tensor construct(const ms::Tensor& x) { return fc2(ms::relu(fc1(x))); }
    };
    Net a, b;
    b.load_state_dict(a.state_dict());
    ms::optim::Momentum oa(a.trainable_params(), {.lr = 0.1, .momentum = 0.9});
    ms::optim::Momentum ob(b.trainable_params(), {.lr = 0.1, .momentum = 0.9});
    const ms::Tensor x = randn({8, 6}, 21);
    const ms::Tensor y = ms::tensor({0, 1, 2, 0, 1, 2, 0, 1}).to(ms::int32);
    auto step_of = [](Net& net, ms::optim::Optimizer& opt) {
      return [&net, &opt](const ms::Tensor& xx, const ms::Tensor& yy) {
        auto loss_fn = [&](const ms::Tensor& u, const ms::Tensor& v) {
          return ms::nn::cross_entropy(net(u), v);
        };
        auto [loss, grads] = ms::value_and_grad(
            loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(xx, yy);
        opt.apply(grads);
        return loss;
      };
    };
    auto eager = step_of(a, oa);
    auto jitted = ms::jit(step_of(b, ob));
    std::vector<double> le, lj;
    for (int i = 0; i < 6; ++i) {
      if (i == 3) {
        oa.set_lr(0.05);
        ob.set_lr(0.05);
      }
      le.push_back(eager(x, y).item<double>());
      lj.push_back(jitted(x, y).item<double>());
    }
    for (int i = 0; i < 6; ++i)
      CHECK(lj[static_cast<std::size_t>(i)] ==
            doctest::Approx(le[static_cast<std::size_t>(i)]).epsilon(1e-4));
    CHECK(le.back() < le.front());
    CHECK(jitted.compile_count() == 1);
    CHECK(ob.step_count() == 6);
    CHECK(ms::allclose(a.fc1.weight, b.fc1.weight, 1e-4, 1e-5));
    CHECK(jitted.dump().find("Assign") != std::string::npos);
  }
}

TEST_SUITE("nn") {
  TEST_CASE("layers: bad options and bad inputs name the layer") {
    CHECK_THROWS_WITH_AS(ms::nn::MaxPool2d({.kernel = {2}}, "full"),
                         doctest::Contains("MaxPool2d: pad_mode must be"), ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::nn::MaxPool2d({.kernel = {1, 2, 3}}),
                         doctest::Contains("MaxPool2d: kernel must hold 1 or 2 values"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::nn::AvgPool2d({.kernel = {2}}, "same"),
                         doctest::Contains("AvgPool2d: pad_mode \"same\" is not supported"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::nn::Dropout(1.5), doctest::Contains("Dropout: p must be in [0, 1]"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::nn::BatchNorm2d(0), doctest::Contains("BatchNorm2d: num_features"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::nn::BatchNorm1d(3, {.momentum = 2.0}),
                         doctest::Contains("momentum must be in [0, 1]"), ms::ValueError);
    ms::nn::BatchNorm2d bn(3);
    CHECK_THROWS_WITH_AS(
        bn(ms::ones({2, 4, 5, 5})),
        doctest::Contains("BatchNorm2d: input of shape [2, 4, 5, 5] must be [N, 3, H, W]"),
        ms::ShapeError);
    ms::nn::LayerNorm ln({4});
    CHECK_THROWS_WITH_AS(ln(ms::ones({2, 5})),
                         doctest::Contains("LayerNorm: input of shape [2, 5] must end in"),
                         ms::ShapeError);
    CHECK_THROWS_AS(ms::nn::LayerNorm(std::vector<std::int64_t>{}), ms::ValueError);
    CHECK_THROWS_AS(ms::nn::Embedding(0, 4), ms::ValueError);
    ms::nn::Conv2d conv(3, 4, 3);
    CHECK_THROWS_WITH_AS(
        conv(ms::ones({1, 2, 5, 5})),
        doctest::Contains("Conv2d: input of shape [1, 2, 5, 5] must be [N, 3, H, W]"),
        ms::ShapeError);
    ms::AnyCell empty;
    CHECK_THROWS_AS(empty.cell(), ms::ValueError);
    CHECK_THROWS_AS(
        ms::optim::StepLR(
            *std::make_unique<ms::optim::SGD>(ms::ParameterList{ms::Parameter(ms::ones({2}))}), 0),
        ms::ValueError);
  }
}
