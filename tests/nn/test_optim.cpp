// Gradient clipping and learning-rate schedules of ms/nn/optim.hpp: the global
// norm against a naive float64 loop, clipping inside a jitted training step,
// and the warm-up + cosine schedule against its formula.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <ms/cell.hpp>
#include <numbers>
#include <vector>

#include "nn/nn_test_util.hpp"

namespace {

using ms_test::randn;

// The p-norm of all entries of `ts` in float64 (p = infinity: the largest |x|).
double naive_norm(const std::vector<ms::Tensor>& ts, double p) {
  double acc = 0;
  for (const ms::Tensor& t : ts)
    for (double v : t.to_vector<double>())
      acc = std::isinf(p) ? std::max(acc, std::abs(v)) : acc + std::pow(std::abs(v), p);
  return std::isinf(p) ? acc : std::pow(acc, 1.0 / p);
}

}  // namespace

TEST_SUITE("nn") {
  TEST_CASE("clip_grad_norm: global norm and clip factor against a naive float64 loop") {
    const std::vector<ms::Tensor> g{randn({3, 4}, 1, ms::float64), randn({5}, 2, ms::float64),
                                    randn({2, 2, 2}, 3, ms::float64)};
    for (double p : {2.0, 1.0, 3.0, std::numeric_limits<double>::infinity()}) {
      const double total = naive_norm(g, p);
      for (double max_norm : {total / 3, total * 2}) {
        const auto [clipped, norm] = ms::nn::clip_grad_norm(g, max_norm, {.norm_type = p});
        CHECK(norm.rank() == 0);
        CHECK(norm.item<double>() == doctest::Approx(total).epsilon(1e-12));
        REQUIRE(clipped.size() == g.size());
        const double f = total > max_norm ? max_norm / (total + 1e-6) : 1.0;
        for (std::size_t i = 0; i < g.size(); ++i) {
          CHECK(clipped[i].shape() == g[i].shape());
          CHECK(ms::allclose(clipped[i], g[i] * f, 1e-14, 1e-14));
        }
        if (f < 1.0)
          CHECK(naive_norm(clipped, p) == doctest::Approx(max_norm).epsilon(1e-6));
        else
          for (std::size_t i = 0; i < g.size(); ++i) CHECK(ms::allclose(clipped[i], g[i], 0, 0));
      }
    }
    // float32 gradients stay float32; the norm is float32.
    const auto [c32, n32] = ms::nn::clip_grad_norm({g[0].to(ms::float32)}, 0.5);
    CHECK(c32[0].dtype() == ms::float32);
    CHECK(n32.dtype() == ms::float32);
    CHECK(n32.item<double>() == doctest::Approx(naive_norm({g[0]}, 2)).epsilon(1e-6));
    // Undefined gradients are skipped; none at all give a norm of 0.
    const auto [cu, nu] = ms::nn::clip_grad_norm({ms::Tensor(), g[1]}, 1e9);
    CHECK_FALSE(cu[0].defined());
    CHECK(nu.item<double>() == doctest::Approx(naive_norm({g[1]}, 2)).epsilon(1e-12));
    CHECK(ms::nn::clip_grad_norm({}, 1.0).total_norm.item<double>() == 0.0);
    CHECK_THROWS_WITH_AS(ms::nn::clip_grad_norm(g, -1.0),
                         doctest::Contains("clip_grad_norm: max_norm must be >= 0, got -1"),
                         ms::ValueError);
    CHECK_THROWS_AS(ms::nn::clip_grad_norm(g, 1.0, {.norm_type = 0.0}), ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::nn::clip_grad_norm({g[0], ms::ones({2}, ms::int32)}, 1.0),
                         doctest::Contains("gradient 1 must be floating"), ms::TypeError);
  }

  TEST_CASE("clip_grad_norm: a NaN total clips nothing, an infinite one scales by 0") {
    const float inf = std::numeric_limits<float>::infinity();
    const auto [c1, n1] =
        ms::nn::clip_grad_norm({ms::tensor({1.0f, inf}), ms::tensor({3.0f})}, 1.0);
    CHECK(std::isinf(n1.item<float>()));
    const auto v1 = c1[0].to_vector<float>();
    CHECK(v1[0] == 0.0f);
    CHECK(std::isnan(v1[1]));
    CHECK(c1[1].to_vector<float>()[0] == 0.0f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const auto [c2, n2] = ms::nn::clip_grad_norm({ms::tensor({1.0f, nan})}, 1.0);
    CHECK(std::isnan(n2.item<float>()));
    CHECK(c2[0].to_vector<float>()[0] == 1.0f);
    CHECK_THROWS_WITH_AS(ms::optim::cosine_lr(0.1, 0.0, 1, 0),
                         doctest::Contains("cosine_lr: total must be > 0, got 0"), ms::ValueError);
  }

  TEST_CASE("clip_grad_norm inside a jitted training step equals the eager step, one compile") {
    struct Net : ms::Cell<Net> {
      ms::nn::Dense fc1{6, 16}, fc2{16, 3};
      Net() { register_cells("fc1", fc1, "fc2", fc2); }
      ms::Tensor construct(const ms::Tensor& x) { return fc2(ms::relu(fc1(x))); }
    };
    Net a, b;
    b.load_state_dict(a.state_dict());
    ms::optim::AdamW oa(a.trainable_params(), {.lr = 0.01});
    ms::optim::AdamW ob(b.trainable_params(), {.lr = 0.01});
    const ms::Tensor x = randn({8, 6}, 21, ms::float32) * 4.0f;
    const ms::Tensor y = ms::tensor({0, 1, 2, 0, 1, 2, 0, 1}).to(ms::int32);
    auto step_of = [](Net& net, ms::optim::Optimizer& opt) {
      return [&net, &opt](const ms::Tensor& xx, const ms::Tensor& yy) {
        auto loss_fn = [&](const ms::Tensor& u, const ms::Tensor& v) {
          return ms::nn::cross_entropy(net(u), v);
        };
        auto [loss, grads] = ms::value_and_grad(
            loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(xx, yy);
        auto [clipped, norm] = ms::nn::clip_grad_norm(grads, 0.1);
        opt.apply(clipped);
        return std::make_pair(ms::Tensor(loss), norm);
      };
    };
    auto eager = step_of(a, oa);
    auto jitted = ms::jit(step_of(b, ob));
    for (int i = 0; i < 5; ++i) {
      const auto [le, ne] = eager(x, y);
      const auto [lj, nj] = jitted(x, y);
      CHECK(lj.item<double>() == doctest::Approx(le.item<double>()).epsilon(1e-5));
      CHECK(nj.item<double>() == doctest::Approx(ne.item<double>()).epsilon(1e-5));
      CHECK(ne.item<double>() > 0.1);  // the clipping is active
    }
    for (std::size_t i = 0; i < oa.parameters().size(); ++i)
      CHECK(ms::allclose(oa.parameters()[i], ob.parameters()[i], 1e-5, 1e-5));
    CHECK(jitted.compile_count() == 1);
  }

  TEST_CASE("WarmupCosineLR: linear warm-up, cosine to min_lr, shared cosine formula") {
    ms::Parameter p(ms::zeros({2}), "p");
    ms::optim::SGD opt({p}, {.lr = 0.1});
    ms::optim::WarmupCosineLR sched(opt, 4, 12, 0.01);
    CHECK(opt.lr() == 0.0);  // step 0 of the warm-up from 0
    CHECK(sched.base_lr() == doctest::Approx(0.1));
    const double base = sched.base_lr();  // 0.1 as the float32 rate holds it
    for (std::int64_t n = 1; n <= 15; ++n) {
      sched.step();
      CHECK(sched.last_step() == n);
      double want = 0;
      if (n < 4) {
        want = base * static_cast<double>(n) / 4;
      } else {
        const double t = std::min(1.0, static_cast<double>(n - 4) / 8);
        want = 0.01 + (base - 0.01) * 0.5 * (1 + std::cos(std::numbers::pi * t));
      }
      CHECK(sched.lr() == doctest::Approx(want).epsilon(1e-12));
      CHECK(opt.lr() == doctest::Approx(want).epsilon(1e-6));  // a float32 0-d tensor
    }
    CHECK(sched.lr_at(4) == base);
    CHECK(sched.lr_at(12) == doctest::Approx(0.01).epsilon(1e-15));
    // A start factor; no warm-up at all is CosineAnnealingLR.
    ms::optim::SGD opt2({p}, {.lr = 0.2});
    ms::optim::WarmupCosineLR s2(opt2, 2, 6, 0.0, 0.5);
    CHECK(opt2.lr() == doctest::Approx(0.1));
    CHECK(s2.lr_at(1) == doctest::Approx(0.15));
    ms::optim::SGD opt3({p}, {.lr = 0.2}), opt4({p}, {.lr = 0.2});
    ms::optim::WarmupCosineLR s3(opt3, 0, 6, 0.02);
    ms::optim::CosineAnnealingLR s4(opt4, 6, 0.02);
    for (int i = 0; i < 8; ++i) {
      s3.step();
      s4.step();
      CHECK(opt3.lr() == opt4.lr());
      CHECK(s3.lr() == ms::optim::cosine_lr(s3.base_lr(), 0.02, i + 1, 6));
    }
    CHECK(ms::optim::cosine_lr(0.1, 0.0, 50, 100) == doctest::Approx(0.05));
    CHECK_THROWS_WITH_AS(ms::optim::WarmupCosineLR(opt, 12, 12),
                         doctest::Contains("0 <= warmup_steps < total_steps"), ms::ValueError);
    CHECK_THROWS_AS(ms::optim::WarmupCosineLR(opt2, 1, 5, 1.0), ms::ValueError);
    CHECK_THROWS_AS(ms::optim::WarmupCosineLR(opt2, 1, 5, 0.0, 1.5), ms::ValueError);
  }
}
