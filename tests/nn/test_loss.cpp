// Losses of ms/nn/loss.hpp: cross_entropy on language-model shapes ([B, T, V]
// logits, [B, T] labels) with ignore_index, against naive float64 loops and a
// naive composition, eagerly, under ms::jit and under ms::value_and_grad.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <ms/autodiff/gradcheck.hpp>
#include <ms/cell.hpp>
#include <optional>
#include <vector>

#include "nn/nn_test_util.hpp"

namespace {

using ms_test::randn;

ms::Tensor labels_of(std::vector<std::int64_t> v, std::vector<std::int64_t> shape,
                     ms::DType dt = ms::int64) {
  return ms::from_vector(v, ms::Shape(shape)).to(dt);
}

// -log_softmax(row)[y] of every position of logits [P, V] (flattened), or 0
// where y == ignore.
std::vector<double> naive_per(const ms::Tensor& logits, const std::vector<std::int64_t>& y,
                              std::int64_t ignore) {
  const auto v = logits.to_vector<double>();
  const std::int64_t classes = logits.dim(logits.rank() - 1);
  std::vector<double> out(y.size(), 0.0);
  for (std::size_t p = 0; p < y.size(); ++p) {
    if (y[p] == ignore) continue;
    const double* row = v.data() + static_cast<std::ptrdiff_t>(p) * classes;
    double mx = row[0], s = 0;
    for (std::int64_t c = 1; c < classes; ++c) mx = std::max(mx, row[c]);
    for (std::int64_t c = 0; c < classes; ++c) s += std::exp(row[c] - mx);
    out[p] = std::log(s) + mx - row[y[p]];
  }
  return out;
}

// The loss written out of its parts: log_softmax, gather at the label
// (ignored positions gather class 0) and a mask; "mean" over the kept count.
ms::Tensor naive_composition(const ms::Tensor& logits, const ms::Tensor& labels,
                             std::int64_t ignore) {
  const ms::Tensor keep = labels != ignore;
  const ms::Tensor safe = ms::Tensor(ms::where(keep, labels, 0)).to(ms::int64);
  const ms::Tensor logp = ms::log_softmax(logits, logits.rank() - 1);
  const ms::Tensor picked = ms::squeeze(
      ms::gather(logp, logits.rank() - 1, ms::unsqueeze(safe, labels.rank())), labels.rank());
  const ms::Tensor mask = keep.to(logits.dtype());
  return ms::sum(-picked * mask) / ms::sum(mask);
}

const std::vector<std::int64_t> kLabelsWithIgnored{4, -100, 0, 2, 2, -100};  // [2, 3], two ignored

}  // namespace

TEST_SUITE("nn") {
  TEST_CASE("cross_entropy: [B, T, V] logits, [B, T] labels, classes on the last axis") {
    const ms::Tensor logits = randn({2, 3, 5}, 3, ms::float64);
    const ms::Tensor labels = labels_of(kLabelsWithIgnored, {2, 3});
    const std::vector<double> per = naive_per(logits, kLabelsWithIgnored, -100);
    double total = 0;
    for (double p : per) total += p;
    // "mean" divides by the 4 positions not ignored.
    CHECK(ms::nn::cross_entropy(logits, labels).item<double>() ==
          doctest::Approx(total / 4).epsilon(1e-12));
    CHECK(ms::nn::cross_entropy(logits, labels, {.reduction = "sum"}).item<double>() ==
          doctest::Approx(total).epsilon(1e-12));
    const ms::Tensor none = ms::nn::cross_entropy(logits, labels, {.reduction = "none"});
    CHECK(none.shape() == ms::Shape{2, 3});
    const auto nv = none.to_vector<double>();
    for (std::size_t i = 0; i < per.size(); ++i) CHECK(nv[i] == doctest::Approx(per[i]));
    CHECK(nv[1] == 0.0);
    CHECK(nv[5] == 0.0);
    // The same as the flattened [N, C] / [N] call and the naive composition.
    CHECK(ms::allclose(ms::nn::cross_entropy(logits, labels),
                       ms::nn::cross_entropy(logits.reshape({6, 5}), labels.reshape({6})), 1e-14,
                       1e-14));
    CHECK(ms::allclose(ms::nn::cross_entropy(logits, labels),
                       naive_composition(logits, labels, -100), 1e-12, 1e-12));
    // int32 labels, float32 logits, and a rank-4 input behave alike.
    CHECK(ms::allclose(ms::nn::cross_entropy(logits.to(ms::float32), labels.to(ms::int32)),
                       ms::nn::cross_entropy(logits, labels).to(ms::float32), 1e-6, 1e-6));
    CHECK(
        ms::allclose(ms::nn::cross_entropy(logits.reshape({2, 3, 1, 5}), labels.reshape({2, 3, 1})),
                     ms::nn::cross_entropy(logits, labels), 1e-14, 1e-14));
  }

  TEST_CASE("cross_entropy: ignore_index with weight and label smoothing (PyTorch's formula)") {
    const ms::Tensor logits = randn({2, 3, 5}, 5, ms::float64);
    const ms::Tensor labels = labels_of(kLabelsWithIgnored, {2, 3});
    const ms::Tensor w = ms::tensor({0.5, 1.0, 2.0, 1.5, 0.25}).to(ms::float64);
    const double s = 0.2;
    const auto lv = logits.to_vector<double>();
    const auto wv = w.to_vector<double>();
    double num = 0, den = 0;
    for (std::size_t p = 0; p < kLabelsWithIgnored.size(); ++p) {
      if (kLabelsWithIgnored[p] == -100) continue;
      const double* row = lv.data() + p * 5;
      double mx = row[0], z = 0;
      for (int c = 1; c < 5; ++c) mx = std::max(mx, row[c]);
      for (int c = 0; c < 5; ++c) z += std::exp(row[c] - mx);
      const double lse = std::log(z) + mx;
      double smooth = 0;
      for (int c = 0; c < 5; ++c) smooth += wv[static_cast<std::size_t>(c)] * (lse - row[c]);
      const double wy = wv[static_cast<std::size_t>(kLabelsWithIgnored[p])];
      num += (1 - s) * wy * (lse - row[kLabelsWithIgnored[p]]) + s / 5 * smooth;
      den += wy;
    }
    CHECK(
        ms::nn::cross_entropy(logits, labels, {.label_smoothing = s, .weight = w}).item<double>() ==
        doctest::Approx(num / den).epsilon(1e-12));
    auto r = ms::testing::gradcheck(
        [&](const std::vector<ms::Tensor>& x) {
          return ms::nn::cross_entropy(x[0], labels, {.label_smoothing = s, .weight = w});
        },
        {logits});
    CHECK_MESSAGE(r.ok, r.message);
  }

  TEST_CASE("cross_entropy: gradient by finite differences and against the naive composition") {
    const ms::Tensor logits = randn({2, 3, 5}, 7, ms::float64);
    const ms::Tensor labels = labels_of(kLabelsWithIgnored, {2, 3});
    for (const char* red : {"mean", "sum", "none"}) {
      auto r = ms::testing::gradcheck(
          [&](const std::vector<ms::Tensor>& x) {
            return ms::nn::cross_entropy(x[0], labels, {.reduction = red});
          },
          {logits});
      CHECK_MESSAGE(r.ok, red, ": ", r.message);
    }
    auto loss = [&](const ms::Tensor& x) { return ms::nn::cross_entropy(x, labels); };
    auto naive = [&](const ms::Tensor& x) { return naive_composition(x, labels, -100); };
    const auto [l1, g1] = ms::value_and_grad(loss)(logits);
    const auto [l2, g2] = ms::value_and_grad(naive)(logits);
    CHECK(ms::allclose(l1, l2, 1e-12, 1e-12));
    CHECK(ms::allclose(g1, g2, 1e-12, 1e-12));
    // Ignored positions get exactly zero gradient.
    const auto gv = g1.to_vector<double>();
    for (std::size_t p : {std::size_t{1}, std::size_t{5}})
      for (std::size_t c = 0; c < 5; ++c) CHECK(gv[p * 5 + c] == 0.0);
  }

  TEST_CASE("cross_entropy: every position ignored gives NaN (mean) with a zero gradient") {
    const ms::Tensor logits = randn({2, 2, 3}, 9, ms::float64);
    const ms::Tensor labels = labels_of({-100, -100, -100, -100}, {2, 2});
    auto loss = [&](const ms::Tensor& x) { return ms::nn::cross_entropy(x, labels); };
    const auto [l, g] = ms::value_and_grad(loss)(logits);
    CHECK(std::isnan(l.item<double>()));
    CHECK(ms::allclose(g, ms::zeros(logits.shape(), ms::float64), 0, 0));
    const auto [lj, gj] = ms::jit(ms::value_and_grad(loss))(logits);
    CHECK(std::isnan(lj.item<double>()));
    CHECK(ms::allclose(gj, ms::zeros(logits.shape(), ms::float64), 0, 0));
    CHECK(ms::nn::cross_entropy(logits, labels, {.reduction = "sum"}).item<double>() == 0.0);
  }

  TEST_CASE("cross_entropy: another ignore_index, and the [N, C] form keeps its behaviour") {
    const ms::Tensor logits = randn({4, 3}, 11, ms::float64);
    const ms::Tensor labels = labels_of({0, 2, 1, 2}, {4});
    const std::vector<double> per = naive_per(logits, {0, 2, 1, 2}, 2);
    CHECK(ms::nn::cross_entropy(logits, labels, {.ignore_index = 2}).item<double>() ==
          doctest::Approx((per[0] + per[2]) / 2).epsilon(1e-12));
    const std::vector<double> all = naive_per(logits, {0, 2, 1, 2}, -100);
    CHECK(ms::nn::cross_entropy(logits, labels).item<double>() ==
          doctest::Approx((all[0] + all[1] + all[2] + all[3]) / 4).epsilon(1e-12));
  }

  TEST_CASE("cross_entropy: an ignored row of -inf logits leaves loss and gradient finite") {
    const double inf = std::numeric_limits<double>::infinity();
    const ms::Tensor logits =
        ms::tensor({{0.5, -1.0, 2.0}, {-inf, -inf, -inf}, {1.0, 0.0, -inf}}).to(ms::float64);
    const ms::Tensor labels = labels_of({2, -100, 0}, {3});
    const std::vector<double> per = naive_per(logits, {2, -100, 0}, -100);
    auto f = [&](const ms::Tensor& z) { return ms::nn::cross_entropy(z, labels); };
    auto [loss, grads] = ms::value_and_grad(f)(logits);
    CHECK(loss.item<double>() == doctest::Approx((per[0] + per[2]) / 2).epsilon(1e-12));
    for (double g : grads.to_vector<double>()) CHECK(std::isfinite(g));
    for (double g : grads.select(0, 1).to_vector<double>()) CHECK(g == 0.0);
  }

  TEST_CASE("cross_entropy without ignore_index: the fused op alone; -100 is out of range") {
    const ms::Tensor logits = randn({2, 3, 5}, 12, ms::float64);
    const std::vector<std::int64_t> y{0, 4, 1, 3, 2, 4};
    const ms::Tensor labels = labels_of(y, {2, 3});
    const std::vector<double> per = naive_per(logits, y, -100);
    double mean = 0;
    for (double v : per) mean += v / 6.0;
    const auto none = std::optional<std::int64_t>{};
    CHECK(ms::nn::cross_entropy(logits, labels, {.ignore_index = none}).item<double>() ==
          doctest::Approx(mean).epsilon(1e-12));
    const ms::Tensor per_t =
        ms::nn::cross_entropy(logits, labels, {.reduction = "none", .ignore_index = none});
    const auto got = per_t.to_vector<double>();
    for (std::size_t i = 0; i < y.size(); ++i)
      CHECK(got[i] == doctest::Approx(per[i]).epsilon(1e-12));
    const ms::Tensor bad = labels_of({0, -100, 1, 3, 2, 4}, {2, 3});
    CHECK_THROWS_WITH_AS(ms::nn::cross_entropy(logits, bad, {.ignore_index = none}),
                         doctest::Contains("got -100 at labels[0, 1]"), ms::IndexError);
    // MindSpore's cell ignores no label.
    ms::nn::SoftmaxCrossEntropyWithLogits cell(true, "mean");
    CHECK_THROWS_AS(cell(logits.reshape({6, 5}), bad.reshape({6})), ms::IndexError);
    CHECK(cell(logits.reshape({6, 5}), labels.reshape({6})).item<double>() ==
          doctest::Approx(mean).epsilon(1e-12));
  }

  TEST_CASE("cross_entropy under ms::jit: eager == jit, gradients too, dynamic [B, T]") {
    auto loss = [](const ms::Tensor& x, const ms::Tensor& y) {
      return ms::nn::cross_entropy(x, y);
    };
    auto vg = ms::value_and_grad(loss);
    auto f = ms::jit(vg);
    const ms::Tensor logits = randn({2, 3, 5}, 13, ms::float32);
    const ms::Tensor labels = labels_of(kLabelsWithIgnored, {2, 3});
    const auto [le, ge] = vg(logits, labels);
    const auto [lj, gj] = f(logits, labels);
    CHECK(ms::allclose(lj, le, 1e-6, 1e-6));
    CHECK(ms::allclose(gj, ge, 1e-6, 1e-6));
    // Varying batch and sequence length under the auto-dynamic manager (V = 6
    // differs from every T, so no size coincides with another by chance).
    auto none = [](const ms::Tensor& x, const ms::Tensor& y) {
      return ms::nn::cross_entropy(x, y, {.reduction = "none"});
    };
    std::vector<std::string> log;
    ms::JitConfig dyn;
    dyn.dynamic = 1;
    dyn.on_recompile = [&](const std::string& l) { log.push_back(l); };
    auto fd = ms::jit(none, dyn);
    auto gd = ms::jit(vg, dyn);
    std::uint64_t seed = 20;
    for (auto [b, t] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {2, 3}, {3, 4}, {1, 5}, {4, 2}, {2, 7}}) {
      const ms::Tensor x = randn({b, t, 6}, ++seed, ms::float32);
      std::vector<std::int64_t> y(static_cast<std::size_t>(b * t));
      for (std::size_t i = 0; i < y.size(); ++i)
        y[i] = i % 3 == 1 ? -100 : static_cast<std::int64_t>((i * 7 + seed) % 5);
      const ms::Tensor yt = labels_of(y, {b, t});
      CHECK(ms::allclose(fd(x, yt), none(x, yt), 1e-6, 1e-6));
      const auto [a, ga] = gd(x, yt);
      const auto [e, ge2] = vg(x, yt);
      CHECK(ms::allclose(a, e, 1e-6, 1e-6));
      CHECK(ms::allclose(ga, ge2, 1e-6, 1e-6));
    }
    CHECK(fd.compile_count() == 3);  // two static graphs, then one generalized graph
    CHECK(gd.compile_count() == 3);
    std::string all;
    for (const auto& l : log) all += l + "\n";
    INFO(all);
    CHECK(all.find("cannot be generalized") == std::string::npos);
    CHECK(all.find("traced a graph of their own") == std::string::npos);
  }

  TEST_CASE("cross_entropy: bad labels and PyTorch's [N, C, T] layout are errors") {
    const ms::Tensor logits = randn({2, 3, 5}, 15, ms::float64);
    CHECK_THROWS_WITH_AS(
        ms::nn::cross_entropy(logits, labels_of({0, 1, 2, 3, 4, 5}, {2, 3})),
        doctest::Contains("cross_entropy: class labels must be in [0, 5) or equal ignore_index "
                          "-100, got 5 at labels[1, 2]"),
        ms::IndexError);
    CHECK_THROWS_WITH_AS(ms::nn::cross_entropy(logits, labels_of({0, -1, 2, 3, 4, 0}, {2, 3})),
                         doctest::Contains("got -1 at labels[0, 1]"), ms::IndexError);
    // PyTorch's layout: classes on axis 1.
    CHECK_THROWS_WITH_AS(ms::nn::cross_entropy(randn({2, 5, 3}, 1, ms::float64),
                                               labels_of({0, 1, 2, 3, 4, 0}, {2, 3})),
                         doctest::Contains("classes are on the last axis"), ms::ShapeError);
    CHECK_THROWS_AS(ms::nn::cross_entropy(logits, labels_of({0, 1, 2}, {3})), ms::ShapeError);
    CHECK_THROWS_AS(ms::nn::cross_entropy(logits, labels_of({0, 1, 2, 3, 4, 0}, {2, 3}),
                                          {.weight = ms::ones({4}, ms::float64)}),
                    ms::ShapeError);
    // Inside a compiled graph the fused op checks when the graph runs.
    auto f = ms::jit(
        [](const ms::Tensor& x, const ms::Tensor& y) { return ms::nn::cross_entropy(x, y); });
    CHECK_THROWS_WITH_AS(f(logits, labels_of({0, 1, 2, 3, 4, 9}, {2, 3})),
                         doctest::Contains("label 9 of row 5 is outside [0, 5)"), ms::IndexError);
    CHECK_FALSE(std::isnan(f(logits, labels_of({0, -100, 2, 3, 4, 0}, {2, 3})).item<double>()));
  }
}
