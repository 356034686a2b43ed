// Mixed precision of ms/nn/amp.hpp: to_float's casts, the dtypes of the
// amp levels on a small net (eagerly and in the traced graph), eager == jit,
// O2 gradients against float32 ones, float32 master weights and optimizer
// state, loss scaling (skipped steps, scale growth, fixed scale, in one jitted
// step), bad arguments, a short O2 bfloat16 training tracking float32, and
// O3 casting tensors inside container arguments and Kwargs values; an O2
// MLP trained eagerly and jitted, and its jitted step's bfloat16 weights
// following the float32 masters through steps and writes by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <ms/cell.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "nn/nn_test_util.hpp"

namespace {

using ms_test::randn;

// Dense -> BatchNorm1d -> relu -> LayerNorm -> Dense; records the dtype of
// each child's output as construct sees it (concrete or traced).
struct Small : ms::Cell<Small> {
  ms::nn::Dense fc1{8, 16};
  ms::nn::BatchNorm1d bn{16};
  ms::nn::LayerNorm ln{{16}};
  ms::nn::Dense fc2{16, 4};
  std::map<std::string, ms::DType> seen;
  Small() { register_cells("fc1", fc1, "bn", bn, "ln", ln, "fc2", fc2); }
  ms::Tensor construct(const ms::Tensor& x) {
    seen["in"] = x.dtype();
    ms::Tensor h = fc1(x);
    seen["fc1"] = h.dtype();
    h = bn(h);
    seen["bn"] = h.dtype();
    h = ln(ms::relu(h));
    seen["ln"] = h.dtype();
    h = fc2(h);
    seen["fc2"] = h.dtype();
    return h;
  }
};

// The relative error |a - b| / |b| over all elements (float64), with an
// absolute floor of 1e-4 per element (a gradient that is zero in exact
// arithmetic, as a bias before BatchNorm, is rounding noise in both).
double rel_err(const ms::Tensor& a, const ms::Tensor& b) {
  const auto va = a.to(ms::float64).to_vector<double>();
  const auto vb = b.to(ms::float64).to_vector<double>();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    num += (va[i] - vb[i]) * (va[i] - vb[i]);
    den += vb[i] * vb[i] + 1e-8;
  }
  return std::sqrt(num / den);
}

// Each tensor flattened to 1-d.
std::vector<ms::Tensor> flat(const std::vector<ms::Tensor>& ts) {
  std::vector<ms::Tensor> out;
  for (const ms::Tensor& t : ts) out.push_back(t.reshape(ms::Shape{-1}));
  return out;
}

std::vector<ms::Tensor> grads_of(Small& net, const ms::Tensor& x, const ms::Tensor& y) {
  auto loss_fn = [&](const ms::Tensor& u, const ms::Tensor& v) {
    return ms::nn::cross_entropy(ms::cast(net(u), ms::float32), v);
  };
  auto [loss, grads] = ms::value_and_grad(
      loss_fn, {.position = std::nullopt, .weights = net.trainable_params()})(x, y);
  return grads;
}

const ms::Tensor kLabels = ms::tensor({0, 1, 2, 3, 0, 1, 2, 3}).to(ms::int32);

// The bench's MLP shape, smaller: Dense -> relu -> Dense -> relu -> Dense.
struct Mlp : ms::Cell<Mlp> {
  ms::nn::Dense fc1{8, 32}, fc2{32, 16}, fc3{16, 4};
  Mlp() { register_cells("fc1", fc1, "fc2", fc2, "fc3", fc3); }
  ms::Tensor construct(const ms::Tensor& x) { return fc3(ms::relu(fc2(ms::relu(fc1(x))))); }
};

// An O2 MLP with its Momentum optimizer: the training step (eager, and
// jitted) and the loss alone.
struct O2Trainer {
  Mlp net;
  ms::optim::Momentum opt{net.trainable_params(), {.lr = 0.5, .momentum = 0.9}};
  std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)> loss_fn =
      [this](const ms::Tensor& a, const ms::Tensor& b) { return ms::nn::cross_entropy(net(a), b); };
  std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)> step_fn =
      [this](const ms::Tensor& a, const ms::Tensor& b) {
        auto [loss, grads] = ms::value_and_grad(
            loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(a, b);
        opt.apply(grads);
        return ms::Tensor(loss);
      };
  decltype(ms::jit(step_fn)) step = ms::jit(step_fn);
  explicit O2Trainer(const ms::StateDict& weights) {
    net.load_state_dict(weights);
    ms::amp::auto_mixed_precision(net, "O2", ms::bfloat16);
  }
};

}  // namespace

TEST_SUITE("nn") {
  TEST_CASE("to_float: inputs cast on entry, output in dtype, float32 params and gradients") {
    for (ms::DType dt : {ms::bfloat16, ms::float16}) {
      ms::nn::Dense fc(8, 4);
      ms::nn::Dense ref(8, 4);
      ref.load_state_dict(fc.state_dict());
      fc.to_float(dt);
      CHECK(fc.get_mixed_precision_type() == dt);
      const ms::Tensor x = randn({5, 8}, 1);
      const ms::Tensor y = fc(x);
      CHECK(y.dtype() == dt);
      CHECK(fc.weight.dtype() == ms::float32);
      CHECK(rel_err(y, ref(x)) < 1e-2);
      auto loss = [&](ms::nn::Dense& d) {
        return [&d](const ms::Tensor& u) { return ms::sum(ms::cast(d(u), ms::float32)); };
      };
      auto [l, g] =
          ms::value_and_grad(loss(fc), {.position = std::nullopt, .weights = fc.parameters()})(x);
      auto [lr, gr] =
          ms::value_and_grad(loss(ref), {.position = std::nullopt, .weights = ref.parameters()})(x);
      REQUIRE(g.size() == 2);
      for (std::size_t i = 0; i < g.size(); ++i) {
        CHECK(g[i].dtype() == ms::float32);
        CHECK(rel_err(g[i], gr[i]) < 2e-2);
      }
      // Under ms::jit the casts are graph nodes: the matmul runs in dt.
      auto f = ms::jit([&](const ms::Tensor& u) { return fc(u); });
      CHECK(f(x).dtype() == dt);
      const std::string d = f.dump();
      const std::string low = dt == ms::bfloat16 ? "bf16" : "f16";
      CHECK(d.find("MatMul(") != std::string::npos);
      CHECK(d.find("(" + low + "[5,8], " + low + "[8,4]) -> " + low + "[5,4]") !=
            std::string::npos);
      fc.to_float(ms::float32);  // back: the graph recompiles
      CHECK(f(x).dtype() == ms::float32);
      CHECK(f.compile_count() == 2);
    }
  }

  TEST_CASE("amp levels: which cells and ops run in which dtype, eagerly and traced") {
    const ms::Tensor x = randn({8, 8}, 2);
    struct Want {
      const char* level;
      ms::DType fc1, bn, ln, fc2, out;
      const char* matmul;  // the matmul's operand types in the graph (float32: then its bias)
    };
    const auto f32 = ms::float32, bf16 = ms::bfloat16;
    for (const Want& w : {Want{"O0", f32, f32, f32, f32, f32, "(f32[8,8], f32[8,16], f32[16])"},
                          Want{"O1", f32, f32, f32, f32, f32, "(bf16[8,8], bf16[8,16])"},
                          Want{"O2", bf16, f32, f32, bf16, f32, "(bf16[8,8], bf16[8,16])"},
                          Want{"O3", bf16, bf16, bf16, bf16, f32, "(bf16[8,8], bf16[8,16])"}}) {
      CAPTURE(w.level);
      Small net;
      net.set_train(true);
      ms::amp::auto_mixed_precision(net, w.level, ms::bfloat16);
      CHECK(net.amp_level() == (std::string(w.level) == "O0" ? "" : w.level));
      for (int traced = 0; traced < 2; ++traced) {
        net.seen.clear();
        auto f = ms::jit([&](const ms::Tensor& u) { return net(u); });
        const ms::Tensor out = traced ? f(x) : net(x);
        CHECK(net.seen["fc1"] == w.fc1);
        CHECK(net.seen["bn"] == w.bn);
        CHECK(net.seen["ln"] == w.ln);
        CHECK(net.seen["fc2"] == w.fc2);
        CHECK(out.dtype() == w.out);
        if (traced) CHECK(f.dump().find(w.matmul) != std::string::npos);
      }
      for (const auto& [name, p] : net.parameters_and_names()) CHECK(p.dtype() == ms::float32);
    }
  }

  TEST_CASE("O2: eager equals jit; gradients close to float32 ones; float32 master weights") {
    ms::default_generator().manual_seed(11);
    Small ref, amp_net;
    amp_net.load_state_dict(ref.state_dict());
    ref.set_train(true);
    amp_net.set_train(true);
    ms::amp::auto_mixed_precision(amp_net, "O2");
    const ms::Tensor x = randn({8, 8}, 3);
    const auto g32 = grads_of(ref, x, kLabels);
    const auto g_eager = grads_of(amp_net, x, kLabels);
    auto jitted =
        ms::jit([&](const ms::Tensor& u, const ms::Tensor& v) { return grads_of(amp_net, u, v); });
    const auto g_jit = jitted(x, kLabels);
    REQUIRE(g32.size() == g_eager.size());
    REQUIRE(g32.size() == g_jit.size());
    for (std::size_t i = 0; i < g32.size(); ++i) {
      CAPTURE(i);
      CHECK(g_eager[i].dtype() == ms::float32);
      CHECK(g_jit[i].dtype() == ms::float32);
      CHECK(ms::allclose(g_jit[i], g_eager[i], 2e-2, 1e-4));
    }
    // bfloat16 keeps 8 bits of mantissa. A gradient behind a normalization
    // (fc1's bias before BatchNorm is zero in exact arithmetic) is a small
    // residual of larger terms, so its rounding error is large relative to
    // it: compare all gradients as one vector, and the last layer (behind no
    // normalization) on its own.
    const double err = rel_err(ms::concat(flat(g_eager)), ms::concat(flat(g32)));
    MESSAGE("O2 bf16 vs float32 gradients, relative error ", err);
    CHECK(err < 5e-2);
    CHECK(rel_err(g_eager[6], g32[6]) < 2e-2);  // fc2.weight
    CHECK(rel_err(g_eager[7], g32[7]) < 2e-2);  // fc2.bias
    ms::optim::Momentum opt(amp_net.trainable_params(), {.lr = 0.1, .momentum = 0.9});
    for (int i = 0; i < 3; ++i) opt.apply(grads_of(amp_net, x, kLabels));
    for (const auto& [name, p] : amp_net.parameters_and_names()) CHECK(p.dtype() == ms::float32);
    for (const auto& [name, t] : opt.state_dict()) CHECK(t.dtype() == ms::float32);
    CHECK(amp_net.bn.moving_mean.dtype() == ms::float32);
  }

  TEST_CASE("all_finite and the optimizer's conditional apply") {
    const ms::Tensor a = ms::ones({3});
    CHECK(ms::amp::all_finite({a, ms::zeros({2}, ms::bfloat16)}).item<bool>());
    const float inf = std::numeric_limits<float>::infinity();
    CHECK_FALSE(ms::amp::all_finite({a, ms::tensor({1.f, inf})}).item<bool>());
    CHECK_FALSE(ms::amp::all_finite({ms::tensor({std::nanf("")}), a}).item<bool>());
    CHECK_THROWS_WITH_AS(ms::amp::all_finite({a, ms::zeros({2}, ms::int32)}),
                         doctest::Contains("all_finite: inputs[1] must be floating"),
                         ms::TypeError);
    ms::Parameter p(ms::ones({2}), "p");
    ms::optim::Momentum opt(ms::ParameterList{p}, {.lr = 0.5});
    opt.apply({ms::ones({2})}, ms::full(ms::Shape{}, 0, ms::bool_));
    CHECK(ms::allclose(p, ms::ones({2})));
    CHECK(opt.step_count() == 0);
    opt.apply({ms::ones({2})}, ms::full(ms::Shape{}, 1, ms::bool_));
    CHECK(ms::allclose(p, ms::full(ms::Shape{2}, 0.5)));
    CHECK(opt.step_count() == 1);
    CHECK_THROWS_WITH_AS(opt.apply({ms::ones({2})}, ms::ones({2})),
                         doctest::Contains("Momentum.apply: condition must be a 0-d bool tensor"),
                         ms::ValueError);
  }

  TEST_CASE(
      "DynamicLossScaleManager: overflow skips the step and divides, growth after the window") {
    ms::Parameter p(ms::ones({2}), "p");
    ms::optim::SGD opt(ms::ParameterList{p}, {.lr = 1.0});
    ms::amp::DynamicLossScaleManager s(1024.0, 2.0, 3);
    CHECK(s.get_drop_overflow_update());
    const float inf = std::numeric_limits<float>::infinity();
    // Gradients come scaled: 1024 * 0.25.
    CHECK_FALSE(s.apply(opt, {ms::tensor({inf, 1.f})}).item<bool>());
    CHECK(ms::allclose(p, ms::ones({2}), 0, 0));  // skipped
    CHECK(s.get_loss_scale() == 512.0);
    for (int i = 0; i < 2; ++i) {
      CHECK(s.apply(opt, {ms::full(ms::Shape{2}, 512.0 * 0.25)}).item<bool>());
      CHECK(s.get_loss_scale() == 512.0);
    }
    CHECK(ms::allclose(p, ms::full(ms::Shape{2}, 0.5)));  // two steps of 0.25
    CHECK(s.apply(opt, {ms::full(ms::Shape{2}, 512.0 * 0.25)}).item<bool>());
    CHECK(s.get_loss_scale() == 1024.0);  // 3 finite steps in a row
    CHECK(opt.step_count() == 3);
    // The scale never goes below 1; update_loss_scale is the eager form.
    ms::amp::DynamicLossScaleManager small(2.0, 4.0, 10);
    small.update_loss_scale(true);
    CHECK(small.get_loss_scale() == 1.0);
    CHECK(ms::allclose(s.scale(ms::full(ms::Shape{}, 2.0)), ms::full(ms::Shape{}, 2048.0)));
  }

  TEST_CASE("FixedLossScaleManager: a fixed scale; drop_overflow_update decides skipping") {
    const float inf = std::numeric_limits<float>::infinity();
    for (bool drop : {true, false}) {
      ms::Parameter p(ms::ones({2}), "p");
      ms::optim::SGD opt(ms::ParameterList{p}, {.lr = 1.0});
      ms::amp::FixedLossScaleManager s(128.0, drop);
      CHECK(s.get_drop_overflow_update() == drop);
      CHECK_FALSE(s.apply(opt, {ms::tensor({inf, 1.f})}).item<bool>());
      CHECK(s.get_loss_scale() == 128.0);
      CHECK(std::isfinite(p.to_vector<double>()[0]) == drop);
      CHECK(s.apply(opt, {ms::full(ms::Shape{2}, 64.0)}).item<bool>());
      CHECK(s.get_loss_scale() == 128.0);
    }
  }

  TEST_CASE("loss scaling inside one jitted train step: skipped step and scale update in-graph") {
    Small net;
    net.set_train(true);
    ms::amp::auto_mixed_precision(net, "O2");
    ms::optim::Momentum opt(net.trainable_params(), {.lr = 0.05, .momentum = 0.9});
    ms::amp::DynamicLossScaleManager scaler(1024.0, 2.0, 2);
    auto step = ms::jit([&](const ms::Tensor& x, const ms::Tensor& y) {
      auto scaled = [&](const ms::Tensor& u, const ms::Tensor& v) {
        return scaler.scale(ms::nn::cross_entropy(net(u), v));
      };
      auto [loss, grads] =
          ms::value_and_grad(scaled, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
      scaler.apply(opt, grads);
      return ms::Tensor(loss / scaler.loss_scale());
    });
    const ms::Tensor x = randn({8, 8}, 4);
    const ms::Tensor w0 = net.fc1.weight.clone();
    CHECK(std::isfinite(step(x, kLabels).item<double>()));
    CHECK_FALSE(ms::allclose(net.fc1.weight, w0, 0, 0));
    CHECK(scaler.get_loss_scale() == 1024.0);
    const ms::Tensor w1 = net.fc1.weight.clone();
    ms::Tensor bad = x.clone();
    bad.fill_(std::numeric_limits<float>::infinity());
    step(bad, kLabels);
    CHECK(ms::allclose(net.fc1.weight, w1, 0, 0));  // skipped
    CHECK(scaler.get_loss_scale() == 512.0);
    CHECK(opt.step_count() == 1);
    step(x, kLabels);
    step(x, kLabels);
    CHECK(scaler.get_loss_scale() == 1024.0);  // 2 finite steps in a row
    CHECK(opt.step_count() == 3);
    CHECK(step.compile_count() == 1);
  }

  TEST_CASE("to_float on a container: hooks see the cast arguments; a child may differ") {
    ms::nn::SequentialCell seq{std::make_shared<ms::nn::Dense>(4, 6),
                               std::make_shared<ms::nn::ReLU>(),
                               std::make_shared<ms::nn::Dense>(6, 2)};
    seq.to_float(ms::bfloat16);
    seq.get_sub_cell("2").to_float(ms::float32);
    std::vector<ms::DType> seen;
    auto h = seq.register_forward_pre_hook(
        [&](ms::nn::SequentialCell&, const ms::Args& a) { seen.push_back(a[0].dtype()); });
    const ms::Tensor y = seq(randn({3, 4}, 7));
    CHECK(seen == std::vector<ms::DType>{ms::bfloat16});
    // The last Dense runs in float32, then the container casts its output.
    CHECK(y.dtype() == ms::bfloat16);
    auto* last = dynamic_cast<ms::nn::Dense*>(&seq.get_sub_cell("2"));
    REQUIRE(last != nullptr);
    CHECK((*last)(ms::ones({1, 6}, ms::bfloat16)).dtype() == ms::float32);
    h.remove();
  }

  TEST_CASE("to_float and hooks on a call given an expression: cast in, hooked, cast out") {
    struct Twice : ms::Cell<Twice> {
      ms::DType seen = ms::float64;
      ms::Tensor construct(const ms::Tensor& x) {
        seen = x.dtype();
        return x * 2.f;
      }
    };
    Twice cell;
    cell.to_float(ms::float16);
    std::vector<ms::DType> pre;
    auto h1 = cell.register_forward_pre_hook([&](Twice&, const ms::Args& a) {
      pre.push_back(a[0].dtype());
      return a[0] + 1.f;
    });
    auto h2 = cell.register_forward_hook(
        [](Twice&, const ms::Args&, const ms::Tensor& out) { return out * 3.f; });
    const ms::Tensor x = ms::ones({2}, ms::float32);
    const ms::Tensor y = cell(ms::relu(x));  // an expression argument
    CHECK(pre == std::vector<ms::DType>{ms::float16});
    CHECK(cell.seen == ms::float16);
    REQUIRE(y.dtype() == ms::float16);
    CHECK(y.to_vector<float>() == std::vector<float>{12.f, 12.f});  // ((1 + 1) * 2) * 3
    h1.remove();
    h2.remove();
    // A tensor-only pre-hook returning another count: construct's TypeError.
    auto h3 = cell.register_forward_pre_hook([](Twice&, const ms::Args& a) {
      return ms::Args{a[0], a[0]};
    });
    CHECK_THROWS_WITH_AS(
        cell(ms::relu(x)),
        doctest::Contains("forward pre-hooks returned 2 arguments; construct takes 1"),
        ms::TypeError);
    h3.remove();
    CHECK(cell(x).dtype() == ms::float16);
  }

  TEST_CASE("O3: tensors inside vector, tuple, optional arguments and Kwargs values are cast") {
    struct Seen : ms::Cell<Seen> {
      std::vector<ms::DType> seen;
      ms::Tensor construct(const ms::Tensor& x, const std::vector<ms::Tensor>& v,
                           const std::tuple<ms::Tensor, ms::Tensor>& tp,
                           const std::optional<ms::Tensor>& m, const ms::Kwargs& kw) {
        seen = {x.dtype(),
                v[0].dtype(),
                v[1].dtype(),
                std::get<0>(tp).dtype(),
                std::get<1>(tp).dtype(),
                m->dtype(),
                std::get<ms::Tensor>(kw.at("t")).dtype()};
        const ms::Tensor s = ms::sum(x) + ms::sum(v[0]) + ms::sum(m.value());
        return s * static_cast<double>(std::get<std::int64_t>(kw.at("k")));
      }
    };
    Seen net;
    ms::amp::auto_mixed_precision(net, "O3", ms::bfloat16);
    const ms::Tensor a = randn({2, 3}, 1), b = randn({3}, 2);
    const ms::Tensor i = ms::tensor({1, 2}).to(ms::int32);  // not floating: left as it is
    const ms::Kwargs kw{{"t", a}, {"k", std::int64_t{2}}};
    const ms::Tensor y =
        net(a, std::vector<ms::Tensor>{a, i}, std::tuple{b, a}, std::optional<ms::Tensor>(b), kw);
    const ms::DType bf16 = ms::bfloat16;
    CHECK(net.seen == std::vector<ms::DType>{bf16, bf16, ms::int32, bf16, bf16, bf16, bf16});
    CHECK(y.dtype() == ms::float32);  // O3's root outputs float32
    // The caller's containers keep their float32 tensors.
    CHECK(std::get<ms::Tensor>(kw.at("t")).dtype() == ms::float32);
    // The same inside a traced graph.
    auto f = ms::jit([&](const ms::Tensor& u, const ms::Tensor& w) {
      return net(u, std::vector<ms::Tensor>{u, w}, std::tuple{w, u}, std::optional<ms::Tensor>(w),
                 ms::Kwargs{{"t", u}, {"k", std::int64_t{1}}});
    });
    net.seen.clear();
    CHECK(f(a, b).dtype() == ms::float32);
    CHECK(net.seen == std::vector<ms::DType>(7, bf16));
  }

  TEST_CASE("update_loss_scale is eager only; adjust is the in-graph form") {
    ms::amp::DynamicLossScaleManager s(64.0, 2.0, 5);
    auto f = ms::jit([&](const ms::Tensor& x) {
      s.update_loss_scale(false);
      return x;
    });
    CHECK_THROWS_WITH_AS(f(ms::ones({1})),
                         doctest::Contains("update_loss_scale: overflow is a host bool"),
                         ms::ValueError);
    auto g = ms::jit([&](const ms::Tensor& x) {
      s.adjust(ms::amp::all_finite({x}));
      return x;
    });
    g(ms::tensor({std::numeric_limits<float>::infinity()}));
    CHECK(s.get_loss_scale() == 32.0);
    g(ms::ones({1}));
    CHECK(s.get_loss_scale() == 32.0);
    CHECK(g.compile_count() == 1);
  }

  TEST_CASE("amp: bad arguments name the API, the argument, expected and given") {
    Small net;
    CHECK_THROWS_WITH_AS(ms::amp::auto_mixed_precision(net, "O4"),
                         doctest::Contains("auto_mixed_precision: amp_level must be \"O0\", "
                                           "\"O1\", \"O2\" or \"O3\", got \"O4\""),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::amp::auto_mixed_precision(net, "O2", ms::int32),
                         doctest::Contains("auto_mixed_precision: dtype must be float16 or "
                                           "bfloat16, got Int32"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(net.to_float(ms::int8),
                         doctest::Contains("Small.to_float: dtype must be float16, bfloat16 or "
                                           "float32, got Int8"),
                         ms::ValueError);
    ms::amp::auto_mixed_precision(net, "O2");
    ms::amp::auto_mixed_precision(net, "O2");  // the same level again: nothing
    CHECK_THROWS_WITH_AS(ms::amp::auto_mixed_precision(net, "O3"),
                         doctest::Contains("already has amp_level \"O2\""), ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::amp::DynamicLossScaleManager(0.5),
                         doctest::Contains("init_loss_scale must be finite and >= 1, got 0.5"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::amp::DynamicLossScaleManager(8.0, 1.0),
                         doctest::Contains("scale_factor must be > 1, got 1"), ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::amp::DynamicLossScaleManager(8.0, 2.0, 0),
                         doctest::Contains("scale_window must be > 0, got 0"), ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::amp::FixedLossScaleManager(0.0),
                         doctest::Contains("loss_scale must be finite and >= 1, got 0"),
                         ms::ValueError);
  }

  TEST_CASE("a short training: the O2 bfloat16 loss tracks the float32 loss") {
    ms::default_generator().manual_seed(12);
    // Labels from a fixed linear teacher, so the task is learnable.
    const ms::Tensor x = randn({64, 8}, 5);
    const ms::Tensor teacher = randn({8, 4}, 6);
    const ms::Tensor y = ms::argmax(ms::matmul(x, teacher), 1).to(ms::int32);
    Small ref, amp_net;
    amp_net.load_state_dict(ref.state_dict());
    ref.set_train(true);
    amp_net.set_train(true);
    ms::amp::auto_mixed_precision(amp_net, "O2", ms::bfloat16);
    auto make_step = [](Small& net, ms::optim::Optimizer& opt) {
      return ms::jit([&net, &opt](const ms::Tensor& u, const ms::Tensor& v) {
        auto loss_fn = [&](const ms::Tensor& a, const ms::Tensor& b) {
          return ms::nn::cross_entropy(net(a), b);
        };
        auto [loss, grads] = ms::value_and_grad(
            loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(u, v);
        opt.apply(grads);
        return ms::Tensor(loss);
      });
    };
    ms::optim::Momentum o32(ref.trainable_params(), {.lr = 0.05, .momentum = 0.9});
    ms::optim::Momentum o16(amp_net.trainable_params(), {.lr = 0.05, .momentum = 0.9});
    auto s32 = make_step(ref, o32);
    auto s16 = make_step(amp_net, o16);
    double first = 0, l32 = 0, l16 = 0;
    for (int i = 0; i < 40; ++i) {
      l32 = s32(x, y).item<double>();
      l16 = s16(x, y).item<double>();
      if (i == 0) first = l32;
      CHECK(std::abs(l16 - l32) < 0.05 + 0.1 * l32);
    }
    CHECK(l32 < 0.5 * first);  // it learned
    CHECK(l16 < 0.5 * first);
  }

  TEST_CASE("O2 MLP: a few steps eager and jitted give the same losses and float32 masters") {
    ms::default_generator().manual_seed(21);
    Mlp init;
    O2Trainer eager(init.state_dict()), jitted(init.state_dict());
    const ms::Tensor x = randn({8, 8}, 7);
    for (int i = 0; i < 5; ++i) {
      CAPTURE(i);
      const double le = eager.step_fn(x, kLabels).item<double>();
      const double lj = jitted.step(x, kLabels).item<double>();
      CHECK(std::abs(le - lj) <= 1e-3 * std::max(1.0, std::abs(le)));
    }
    CHECK(jitted.step.compile_count() == 1);
    // Each weight's moment and master are updated in one pass after its
    // bfloat16 gradient (matmul_scale_add); the biases' updates stay elementwise.
    const std::string dump = jitted.step.dump();
    int fused = 0;
    for (auto at = dump.find("MatMulScaleAdd("); at != std::string::npos;
         at = dump.find("MatMulScaleAdd(", at + 1))
      ++fused;
    CHECK(fused == 3);
    const auto pe = eager.net.parameters_and_names(), pj = jitted.net.parameters_and_names();
    REQUIRE(pe.size() == pj.size());
    for (std::size_t k = 0; k < pe.size(); ++k) {
      CAPTURE(pe[k].first);
      CHECK(pj[k].second.dtype() == ms::float32);
      CHECK(ms::allclose(pj[k].second, pe[k].second, 1e-2, 1e-3));
    }
  }

  TEST_CASE("O2 jitted step: its bfloat16 weights follow the float32 masters, hand writes too") {
    ms::default_generator().manual_seed(22);
    Mlp init;
    O2Trainer t(init.state_dict());
    const ms::Tensor x = randn({8, 8}, 8);
    // The loss a step returns is computed from cast(master) at its start: the
    // eager loss of the same weights (a stale bfloat16 copy would give the
    // loss of older weights; lr 0.5 moves them far).
    auto check_step = [&](const std::string& after) {
      CAPTURE(after);
      const double want = t.loss_fn(x, kLabels).item<double>();
      const double got = t.step(x, kLabels).item<double>();
      CHECK(std::abs(got - want) <= 1e-5 * std::max(1.0, std::abs(want)));
    };
    for (int i = 0; i < 3; ++i) check_step("a jitted step");
    t.net.fc1.weight.set_data(randn({32, 8}, 9) * 0.3f);
    check_step("set_data");
    ms::assign(t.net.fc2.weight, t.net.fc2.weight * -1.f);
    check_step("assign");
    t.net.load_state_dict(init.state_dict());
    check_step("load_state_dict");
    t.step_fn(x, kLabels);  // an eager step writes the masters too
    check_step("an eager step");
    CHECK(t.step.compile_count() == 1);
    // Checkpoints hold the float32 masters only.
    const ms::StateDict sd = t.net.state_dict();
    CHECK(sd.size() == init.state_dict().size());
    for (const auto& [name, v] : sd) CHECK(v.dtype() == ms::float32);
  }
}
