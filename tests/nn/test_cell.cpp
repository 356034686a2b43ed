// Cell, Parameter, registration, names, state dicts and hooks (eager and under ms::jit).
#include <doctest/doctest.h>

#include <atomic>
#include <ms/cell.hpp>
#include <optional>
#include <thread>
#include <utility>

#include "nn/nn_test_util.hpp"

namespace {

using ms_test::MLP;

struct Outer : ms::Cell<Outer> {
  MLP body;
  ms::Parameter scale{ms::ones({3}), "scale"};
  Outer() {
    register_cells("body", body);
    register_parameter("scale", scale);
  }
  ms::Tensor construct(const ms::Tensor& x) { return body(x) * scale; }
};

std::vector<std::string> names_of(const ms::CellBase& c) {
  std::vector<std::string> out;
  for (auto& [n, p] : c.parameters_and_names()) out.push_back(n);
  return out;
}

using ms_test::input;

}  // namespace

TEST_SUITE("nn") {
  TEST_CASE("registration gives hierarchical names, in registration order") {
    Outer net;
    CHECK(names_of(net) == std::vector<std::string>{"scale", "body.fc1.weight", "body.fc1.bias",
                                                    "body.fc2.weight", "body.fc2.bias"});
    // The parameters themselves carry their names (MindSpore's auto prefix).
    CHECK(net.body.fc1.weight.name() == "body.fc1.weight");
    CHECK(net.body.fc1.weight.shape() == ms::Shape({8, 4}));  // [out, in] as MindSpore
    CHECK(net.body.fc2.bias.shape() == ms::Shape({3}));
    std::vector<std::string> cells;
    for (auto& [n, c] : net.cells_and_names()) cells.push_back(n + ":" + c->cls_name());
    CHECK(cells ==
          std::vector<std::string>{":Outer", "body:MLP", "body.fc1:Dense", "body.fc2:Dense"});
    const std::string tree = net.to_string();
    CHECK(tree.find("(fc1): Dense(input_channels=4, output_channels=8, has_bias=True") !=
          std::string::npos);
    CHECK(tree.find("weight: Parameter(name=body.fc1.weight, shape=[8, 4]") != std::string::npos);
  }

  TEST_CASE("unnamed parameters get generated names; duplicates are errors naming both") {
    ms::Parameter a(ms::zeros({2}));
    CHECK(a.name().rfind("Parameter$", 0) == 0);
    ms::Parameter b(ms::zeros({2}));
    CHECK(a.name() != b.name());
    struct C : ms::Cell<C> {
      ms::Tensor construct(const ms::Tensor& x) { return x; }
    } c;
    c.register_parameter("w", a);
    CHECK(a.name() == "w");  // a generated name is replaced by the attribute name
    CHECK_THROWS_WITH_AS(c.register_parameter("w", b),
                         doctest::Contains("name 'w' is already used by parameter 'w'"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(c.register_parameter("x", a), doctest::Contains("already registered"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(c.register_buffer("a.b", ms::zeros({1})),
                         doctest::Contains("contains '.'"), ms::ValueError);
    CHECK_THROWS_WITH_AS(c.insert_child_to_cell("self", c), doctest::Contains("its own child"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::Parameter(ms::Tensor()), doctest::Contains("undefined"),
                         ms::ValueError);
  }

  TEST_CASE("trainable_params, set_train, set_grad") {
    MLP net;
    net.fc1.bias.set_requires_grad(false);
    CHECK(net.trainable_params().size() == 3);
    CHECK(net.untrainable_params().size() == 1);
    CHECK(net.untrainable_params()[0].name() == "fc1.bias");
    CHECK_FALSE(net.fc2.training());
    net.set_train();
    CHECK(net.training());
    CHECK(net.fc2.training());
    net.set_train(false);
    CHECK_FALSE(net.fc1.training());
    net.set_grad();
    CHECK(net.fc1.requires_grad());
    // ParameterList converts to the weights of ms::grad.
    std::vector<ms::Tensor> w = net.trainable_params();
    CHECK(w.size() == 3);
    CHECK(w[0].is_same(net.fc1.weight));
  }

  TEST_CASE("a cell runs the same eagerly and under ms::jit") {
    MLP net;
    const ms::Tensor x = input(5);
    const ms::Tensor eager = net(x);
    auto f = ms::jit([&](const ms::Tensor& a) { return net(a); });
    CHECK(ms::allclose(f(x), eager, 1e-6, 1e-6));
    // Captured parameters print under their names, as in MindSpore's IR dumps.
    CHECK(f.dump().find("%fc1.weight: f32[8,4]") != std::string::npos);
    CHECK(f.dump().find("Transpose(%fc1.weight)") != std::string::npos);
    // Dense is x @ W^T + b.
    const auto w = net.fc1.weight.to_vector<double>(), b = net.fc1.bias.to_vector<double>(),
               xv = x.to_vector<double>();
    const ms::Tensor h = net.fc1(x);
    const auto hv = h.to_vector<double>();
    for (int i = 0; i < 5; ++i)
      for (int o = 0; o < 8; ++o) {
        double s = b[static_cast<std::size_t>(o)];
        for (int k = 0; k < 4; ++k)
          s += xv[static_cast<std::size_t>(i * 4 + k)] * w[static_cast<std::size_t>(o * 4 + k)];
        CHECK(hv[static_cast<std::size_t>(i * 8 + o)] == doctest::Approx(s).epsilon(1e-5));
      }
  }

  TEST_CASE("state_dict and load_state_dict: round trip, all-or-nothing, strictness") {
    MLP a, b;
    const ms::StateDict sd = a.state_dict();
    REQUIRE(sd.size() == 4);
    CHECK(sd[0].first == "fc1.weight");
    CHECK_FALSE(ms::allclose(a(input(2, 7)), b(input(2, 7))));
    auto r = b.load_state_dict(sd);
    CHECK(r.missing_keys.empty());
    CHECK(r.unexpected_keys.empty());
    CHECK(ms::allclose(a(input(2, 7)), b(input(2, 7))));
    // A wrong shape anywhere: nothing is written, even the entries before it.
    MLP c;
    const ms::Tensor before = c.fc1.weight.clone();
    ms::StateDict bad = sd;
    bad[3].second = ms::zeros({4});
    CHECK_THROWS_WITH_AS(
        c.load_state_dict(bad),
        doctest::Contains("'fc2.bias' has shape [3] in MLP but [4] in the state dict"),
        ms::ShapeError);
    CHECK(ms::allclose(c.fc1.weight, before, 0, 0));
    ms::StateDict wrong_type = sd;
    wrong_type[0].second = sd[0].second.to(ms::float64);
    CHECK_THROWS_AS(c.load_state_dict(wrong_type), ms::TypeError);
    ms::StateDict missing(sd.begin(), sd.begin() + 3);
    missing.emplace_back("extra", ms::zeros({1}));
    CHECK_THROWS_WITH_AS(c.load_state_dict(missing),
                         doctest::Contains("missing keys for MLP: 'fc2.bias'"), ms::ValueError);
    CHECK(ms::allclose(c.fc1.weight, before, 0, 0));
    auto res = c.load_state_dict(missing, false);
    CHECK(res.missing_keys == std::vector<std::string>{"fc2.bias"});
    CHECK(res.unexpected_keys == std::vector<std::string>{"extra"});
    CHECK(ms::allclose(c.fc1.weight, a.fc1.weight, 0, 0));
  }

  TEST_CASE("state dict hooks") {
    MLP net;
    int post = 0;
    auto h1 = net.register_state_dict_post_hook(
        [&](ms::CellBase&, ms::StateDict& sd, const std::string&) {
          ++post;
          sd.emplace_back("version", ms::full({}, 2.0));
        });
    CHECK(net.state_dict().back().first == "version");
    CHECK(post == 1);
    h1.remove();
    CHECK(net.state_dict().size() == 4);
    // A load pre-hook can rename keys of an old checkpoint.
    MLP src;
    ms::StateDict old;
    for (auto& [k, t] : src.state_dict()) old.emplace_back("old." + k, t);
    auto h2 = net.register_load_state_dict_pre_hook(
        [](ms::CellBase&, ms::StateDict& sd, const std::string&) {
          for (auto& [k, t] : sd)
            if (k.rfind("old.", 0) == 0) k = k.substr(4);
        });
    net.load_state_dict(old);
    CHECK(ms::allclose(net.fc2.bias, src.fc2.bias, 0, 0));
  }

  TEST_CASE("forward pre-hooks and hooks, eagerly: order, replacement, removal") {
    MLP net;
    const ms::Tensor x = input(2, 7);
    const ms::Tensor plain = net(x);
    std::vector<std::string> log;
    auto pre = net.register_forward_pre_hook([&](MLP&, const ms::Args& a) {
      log.push_back("pre");
      CHECK(a.size() == 1);
      return ms::Tensor(a[0] * 2.0f);  // a single tensor: wrapped into the args
    });
    auto post1 = net.register_forward_hook([&](MLP&, const ms::Args&, const ms::Tensor& y) {
      log.push_back("post1");
      return ms::Tensor(y + 1.0f);
    });
    auto post2 = net.register_forward_hook([&](MLP&, const ms::Args& a, const ms::Tensor&) {
      log.push_back("post2");
      CHECK(ms::allclose(a[0], x * 2.0f));  // sees the args after the pre-hook
    });
    const ms::Tensor hooked = net(x);
    CHECK(log == std::vector<std::string>{"pre", "post1", "post2"});
    CHECK(ms::allclose(hooked, net.construct(x * 2.0f) + 1.0f, 1e-6, 1e-6));
    pre.remove();
    pre.remove();  // idempotent
    post1.remove();
    post2.remove();
    CHECK(ms::allclose(net(x), plain, 0, 0));
    CHECK_FALSE(net.has_hooks());
  }

  TEST_CASE("hook handles: version bumps, removal after the cell is gone, ScopedHook") {
    const auto v0 = ms::compiler::hook_version();
    ms::HookHandle h;
    {
      MLP net;
      h = net.register_forward_hook([](MLP&, const ms::Args&, const ms::Tensor&) {});
      CHECK(ms::compiler::hook_version() > v0);
      {
        ms::ScopedHook s = net.register_forward_pre_hook([](MLP&, const ms::Args&) {});
        CHECK(net.has_hooks());
      }
    }
    const auto v1 = ms::compiler::hook_version();
    h.remove();  // the cell is gone: no effect, no crash
    CHECK(ms::compiler::hook_version() == v1);
  }

  TEST_CASE(
      "forward hooks under ms::jit: run with concrete values each call; recompile on change") {
    MLP net;
    std::vector<double> seen;
    auto f = ms::jit([&](const ms::Tensor& a) { return net(a); });
    const ms::Tensor x = input(2, 7);
    f(x);
    CHECK(f.compile_count() == 1);
    auto h = net.register_forward_hook([&](MLP&, const ms::Args&, const ms::Tensor& y) {
      seen.push_back(ms::max(y).item<double>());  // reads values: fine, it runs on the host
      return ms::Tensor(y * 0.5f);
    });
    const ms::Tensor eager = net(x);
    REQUIRE(seen.size() == 1);
    const ms::Tensor j1 = f(x);
    CHECK(f.compile_count() == 2);  // the hook version is in the key
    const ms::Tensor j2 = f(x * 2.0f);
    CHECK(f.compile_count() == 2);
    REQUIRE(seen.size() == 3);  // once per call, not once per compile
    CHECK(seen[1] == doctest::Approx(seen[0]));
    CHECK(ms::allclose(j1, eager, 1e-6, 1e-6));
    CHECK(f.dump().find("HostCallback") != std::string::npos);
    h.remove();
    CHECK(ms::allclose(f(x), eager * 2.0f, 1e-5, 1e-5));
    CHECK(f.compile_count() == 3);
  }

  TEST_CASE("hook churn under ms::jit: the cache keeps only graphs of the current hooks") {
    MLP net;
    auto f = ms::jit([&](const ms::Tensor& a) { return net(a); });
    const ms::Tensor x = input(2, 7);
    const ms::Tensor plain = f(x);
    for (int i = 0; i < 80; ++i) {
      auto h =
          net.fc1.register_forward_hook([](ms::nn::Dense&, const ms::Args&, const ms::Tensor& y) {
            return ms::Tensor(y * 2.0f);
          });
      CHECK(ms::allclose(f(x), net(x), 1e-6, 1e-6));
      CHECK(f.cache_size() == 1);
      h.remove();
      CHECK(ms::allclose(f(x), plain, 1e-6, 1e-6));
      CHECK(f.cache_size() == 1);
    }
    CHECK(f.compile_count() == 161);  // each change recompiles once; none stays behind
  }

  TEST_CASE("registering and removing hooks while other threads call and trace the cell") {
    MLP net;  // no hook list yet: the first registrations race with calls too
    const ms::Tensor x = input(2, 7);
    const ms::Tensor plain = net(x);
    auto f = ms::jit([&](const ms::Tensor& a) { return net(a); });
    std::atomic<int> churning{2}, bad{0}, calls{0};
    std::atomic<std::int64_t> ran{0};
    auto churn = [&] {
      for (int i = 0; i < 150; ++i) {
        ms::HookHandle h1 = net.fc1.register_forward_hook(
            [&](ms::nn::Dense&, const ms::Args&, const ms::Tensor&) { ++ran; });
        ms::HookHandle h2 = net.register_forward_pre_hook([&](MLP&, const ms::Args&) { ++ran; });
        ms::HookHandle h3 = net.register_state_dict_pre_hook(
            [](ms::CellBase&, ms::StateDict&, const std::string&) {});
        h2.remove();
        h1.remove();
        h3.remove();
      }
      --churning;
    };
    auto call = [&](bool jitted) {
      do {
        const ms::Tensor y = jitted ? f(x) : net(x);
        if (!ms::allclose(y, plain, 1e-6, 1e-6)) ++bad;
        if (net.state_dict().size() != 4) ++bad;
        ++calls;
      } while (churning > 0);
    };
    std::thread c1(churn), c2(churn), eager(call, false), traced(call, true);
    c1.join();
    c2.join();
    eager.join();
    traced.join();
    CHECK(bad == 0);
    CHECK(calls >= 2);
    CHECK_FALSE(net.has_hooks());
    // Every hook is gone: a new one runs alone, eagerly and in a fresh graph.
    ran = 0;
    auto h = net.fc1.register_forward_hook(
        [&](ms::nn::Dense&, const ms::Args&, const ms::Tensor&) { ++ran; });
    net(x);
    f(x);
    CHECK(ran == 2);
  }

  TEST_CASE("backward hooks, eagerly and under jit") {
    MLP net;
    const ms::Tensor x = input(2, 7);
    auto loss = [&](const ms::Tensor& a) { return ms::sum(net(a)); };
    const auto plain =
        ms::grad(loss, {.position = std::nullopt, .weights = net.trainable_params()})(x);
    int pre_calls = 0, bwd_calls = 0;
    auto h1 = net.fc2.register_backward_pre_hook([&](ms::nn::Dense&, const ms::Args& g) {
      ++pre_calls;
      CHECK(g.size() == 1);
      CHECK(g[0].shape() == ms::Shape({2, 3}));
      return ms::Args{ms::Tensor(g[0] * 2.0f)};
    });
    const auto doubled =
        ms::grad(loss, {.position = std::nullopt, .weights = net.trainable_params()})(x);
    CHECK(pre_calls == 1);
    for (std::size_t i = 0; i < plain.size(); ++i)
      CHECK(ms::allclose(doubled[i], plain[i] * 2.0f, 1e-5, 1e-5));
    // A forward pass alone does not run backward hooks.
    net(x);
    CHECK(pre_calls == 1);
    auto h2 = net.fc2.register_backward_hook(
        [&](ms::nn::Dense&, const ms::Args& gin, const ms::Args& gout) {
          ++bwd_calls;
          CHECK(gin.size() == 1);
          CHECK(gin[0].shape() == ms::Shape({2, 8}));
          CHECK(gout[0].shape() == ms::Shape({2, 3}));
          return ms::Args{ms::zeros_like(gin[0])};  // nothing flows below fc2
        });
    auto jg =
        ms::jit(ms::grad(loss, {.position = std::nullopt, .weights = net.trainable_params()}));
    const auto cut = jg(x);
    CHECK(pre_calls == 2);
    CHECK(bwd_calls == 1);
    CHECK(ms::allclose(cut[2], plain[2] * 2.0f, 1e-5, 1e-5));     // fc2.weight: still doubled
    CHECK(ms::allclose(cut[0], ms::zeros_like(plain[0]), 0, 0));  // fc1: cut off
    jg(x);
    CHECK(bwd_calls == 2);
    h1.remove();
    h2.remove();
    const auto again = jg(x);
    CHECK(ms::allclose(again[0], plain[0], 1e-5, 1e-5));
  }

  TEST_CASE("hook forms are checked when they are registered") {
    // A wrong form does not compile (tests/nn/compile_fail); these are the accepted ones.
    struct Two : ms::Cell<Two> {
      ms::Tensor construct(const ms::Tensor& x) { return x; }
    };
    using ms::Args;
    using ms::Kwargs;
    using ms::Tensor;
    static_assert(ms::detail::ForwardPreHook<void (*)(Two&, const Args&), Two>);
    static_assert(ms::detail::ForwardPreHook<Tensor (*)(ms::CellBase&, const Args&), Two>);
    static_assert(ms::detail::ForwardPreHook<std::optional<Args> (*)(Two&, const Args&), Two>);
    static_assert(!ms::detail::ForwardPreHook<int (*)(Two&, const Args&), Two>);
    static_assert(!ms::detail::ForwardPreHook<void (*)(Two&, const Args&, const Kwargs&), Two>);
    static_assert(ms::detail::ForwardPreHookWithKwargs<
                  std::pair<Args, Kwargs> (*)(Two&, const Args&, const Kwargs&), Two>);
    static_assert(
        !ms::detail::ForwardPreHookWithKwargs<Args (*)(Two&, const Args&, const Kwargs&), Two>);
    static_assert(ms::detail::ForwardHook<void (*)(Two&, const Args&, const Tensor&), Two>);
    static_assert(ms::detail::ForwardHook<Args (*)(Two&, const Args&, const Args&), Two>);
    static_assert(!ms::detail::ForwardHook<void (*)(Two&, const Tensor&), Two>);
    static_assert(
        ms::detail::ForwardHookWithKwargs<void (*)(Two&, const Args&, const Kwargs&, const Tensor&),
                                          Two>);
    static_assert(ms::detail::BackwardPreHook<Args (*)(Two&, const Args&), Two>);
    static_assert(ms::detail::BackwardHook<void (*)(Two&, const Args&, const Args&), Two>);
    static_assert(!ms::detail::BackwardHook<void (*)(Two&, const Args&), Two>);
    static_assert(ms::autodiff::GradHookForm<std::optional<Tensor> (*)(const Tensor&)>);
    static_assert(!ms::autodiff::GradHookForm<void (*)(const Tensor&, int)>);
    // A forward hook taking the kwargs sees them; one without does not need them.
    struct Scaled : ms::Cell<Scaled> {
      ms::Tensor construct(const ms::Tensor& x, const ms::Kwargs& kw) {
        return x * static_cast<float>(std::get<double>(kw.at("scale")));
      }
    } cell;
    double seen = 0;
    auto h = cell.register_forward_hook(
        [&](Scaled&, const Args&, const Kwargs& kw, const Tensor& y) {
          seen = std::get<double>(kw.at("scale"));
          return Tensor(y + 1.0f);
        },
        ms::with_kwargs);
    CHECK(ms::allclose(cell(ms::ones({2}), Kwargs{{"scale", 2.0}}), ms::full({2}, 3.0f)));
    CHECK(seen == 2.0);
    h.remove();
  }

  TEST_CASE("kwargs reach construct and with_kwargs hooks") {
    struct Scaled : ms::Cell<Scaled> {
      ms::Tensor construct(const ms::Tensor& x, const ms::Kwargs& kw) {
        return x * static_cast<float>(std::get<double>(kw.at("scale")));
      }
    } cell;
    const ms::Tensor x = ms::ones({2});
    CHECK(ms::allclose(cell(x, ms::Kwargs{{"scale", 3.0}}), ms::full({2}, 3.0f)));
    auto h = cell.register_forward_pre_hook(
        [](Scaled&, const ms::Args& a, const ms::Kwargs&) {
          return std::pair<ms::Args, ms::Kwargs>{a, ms::Kwargs{{"scale", 5.0}}};
        },
        ms::with_kwargs);
    CHECK(ms::allclose(cell(x, ms::Kwargs{{"scale", 3.0}}), ms::full({2}, 5.0f)));
  }
}
