// Cell arguments of every kind (ms/nn/cell_args.hpp): eagerly, under ms::jit
// (what is a graph input, what is part of the compile key), through hooks
// (ms::ArgList), and through the auto-dynamic-shape manager.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <ms/cell.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "nn/nn_test_util.hpp"

namespace {

using ms::Tensor;

// steps: a number (a constant of the graph), or a 0-d tensor when passed as ms::mutable_.
struct Stepper : ms::Cell<Stepper> {
  Tensor construct(const Tensor& x, const auto& steps, bool flag, const std::optional<Tensor>& mask,
                   const std::vector<Tensor>& extra) {
    Tensor y = x * steps;
    if (flag) y = y + 1.0f;
    if (mask) y = y * *mask;
    for (const Tensor& e : extra) y = y + e;
    return y;
  }
};

Tensor reference(const Tensor& x, float steps, bool flag, const std::optional<Tensor>& mask,
                 const std::vector<Tensor>& extra) {
  Tensor y = x * steps;
  if (flag) y = y + 1.0f;
  if (mask) y = y * *mask;
  for (const Tensor& e : extra) y = y + e;
  return Tensor(y);
}

enum class Act { Relu, Neg };

struct Activation : ms::Cell<Activation> {
  Tensor construct(const Tensor& x, const std::string& name, Act act) {
    Tensor y = act == Act::Relu ? Tensor(ms::relu(x)) : Tensor(x * -1.0f);
    return name == "double" ? Tensor(y * 2.0f) : y;
  }
};

struct Seqs : ms::Cell<Seqs> {
  Tensor construct(const std::tuple<Tensor, Tensor>& t, const std::pair<Tensor, Tensor>& p,
                   const std::array<Tensor, 2>& a) {
    return Tensor(std::get<0>(t) * std::get<1>(t) + p.first - p.second + a[0] * a[1]);
  }
};

using ms_test::input;

// construct takes its text as a C string.
struct CMode : ms::Cell<CMode> {
  Tensor construct(const Tensor& x, const char* mode) {
    return std::string(mode) == "double" ? Tensor(x * 2.0f) : x;
  }
};

// Keyword arguments: a tensor (a graph input) and a number (a constant).
struct KwScale : ms::Cell<KwScale> {
  Tensor construct(const Tensor& x, const ms::Kwargs& kw) {
    Tensor y = x;
    if (auto it = kw.find("scale"); it != kw.end())
      y = y * static_cast<float>(std::get<double>(it->second));
    if (auto it = kw.find("bias"); it != kw.end()) y = y + std::get<Tensor>(it->second);
    return y;
  }
};

// A sequence of tensors (Parameters are passed as one).
struct SumAll : ms::Cell<SumAll> {
  Tensor construct(const std::vector<Tensor>& v) {
    Tensor y = v.at(0);
    for (std::size_t i = 1; i < v.size(); ++i) y = y + v[i];
    return y;
  }
};

}  // namespace

TEST_SUITE("nn") {
  TEST_CASE("cell arguments: every kind runs eagerly") {
    Stepper net;
    const Tensor x = input(), m = input(2, 4), e1 = input(2, 5), e2 = input(2, 6);
    CHECK(ms::allclose(net(x, 3, true, m, std::vector<Tensor>{e1, e2}),
                       reference(x, 3.f, true, m, {e1, e2}), 1e-6, 1e-6));
    CHECK(ms::allclose(net(x, 2, false, std::nullopt, std::vector<Tensor>{}),
                       reference(x, 2.f, false, std::nullopt, {}), 1e-6, 1e-6));
    // A mutable_ number reaches construct as a 0-d tensor, eagerly too.
    CHECK(ms::allclose(net(x, ms::mutable_(2.5f), true, std::nullopt, std::vector<Tensor>{e1}),
                       reference(x, 2.5f, true, std::nullopt, {e1}), 1e-6, 1e-6));
    Activation act;
    CHECK(ms::allclose(act(x, "double", Act::Neg), x * -2.0f, 1e-6, 1e-6));
    CHECK(ms::allclose(act(x, std::string("plain"), Act::Relu), ms::relu(x), 1e-6, 1e-6));
    Seqs seqs;
    CHECK(ms::allclose(seqs(std::tuple{x, m}, std::pair{e1, e2}, std::array{x, e1}),
                       x * m + e1 - e2 + x * e1, 1e-6, 1e-6));
  }

  TEST_CASE("cell arguments under ms::jit: numbers, bools and optionals key, mutable_ does not") {
    Stepper net;
    auto f = ms::jit(net);
    const Tensor x = input(), m = input(2, 4), e1 = input(2, 5), e2 = input(2, 6);
    const std::vector<Tensor> extra{e1};
    CHECK(ms::allclose(f(x, 2, true, std::nullopt, extra), reference(x, 2.f, true, {}, extra), 1e-6,
                       1e-6));
    CHECK(f.compile_count() == 1);
    f(input(2, 9), 2, true, std::nullopt, extra);  // same int, new values: a hit
    CHECK(f.compile_count() == 1);
    CHECK(ms::allclose(f(x, 3, true, std::nullopt, extra), reference(x, 3.f, true, {}, extra), 1e-6,
                       1e-6));
    CHECK(f.compile_count() == 2);  // a new int: a new graph
    CHECK(ms::allclose(f(x, 3, false, std::nullopt, extra), reference(x, 3.f, false, {}, extra),
                       1e-6, 1e-6));
    CHECK(f.compile_count() == 3);  // a new bool
    CHECK(ms::allclose(f(x, 3, false, m, extra), reference(x, 3.f, false, m, extra), 1e-6, 1e-6));
    CHECK(f.compile_count() == 4);  // a present mask
    f(x, 3, false, m, extra);
    f(x, 3, false, std::optional<Tensor>{}, extra);  // absent again: the first absent graph
    CHECK(f.compile_count() == 4);
    // Another vector length: another key.
    CHECK(ms::allclose(f(x, 3, false, m, std::vector<Tensor>{e1, e2}),
                       reference(x, 3.f, false, m, {e1, e2}), 1e-6, 1e-6));
    CHECK(f.compile_count() == 5);
    // mutable_: one graph for every value.
    for (std::int64_t s : {1, 4, 7})
      CHECK(ms::allclose(f(x, ms::mutable_(s), true, std::nullopt, extra),
                         reference(x, static_cast<float>(s), true, {}, extra), 1e-5, 1e-5));
    CHECK(f.compile_count() == 6);
    CHECK(f.phase().find("mutable i64") != std::string::npos);
  }

  TEST_CASE("cell arguments under ms::jit: strings and enums key, sequences are inputs") {
    Activation act;
    auto f = ms::jit(act);
    const Tensor x = input();
    CHECK(ms::allclose(f(x, "double", Act::Neg), x * -2.0f, 1e-6, 1e-6));
    f(input(2, 8), std::string("double"), Act::Neg);  // a literal and a std::string key alike
    CHECK(f.compile_count() == 1);
    CHECK(ms::allclose(f(x, "plain", Act::Neg), x * -1.0f, 1e-6, 1e-6));
    CHECK(f.compile_count() == 2);
    CHECK(ms::allclose(f(x, "plain", Act::Relu), ms::relu(x), 1e-6, 1e-6));
    CHECK(f.compile_count() == 3);
    CHECK(f.phase().find("\"plain\"") != std::string::npos);

    Seqs seqs;
    auto g = ms::jit(seqs);
    const Tensor a = input(2, 1), b = input(2, 2), c = input(2, 3), d = input(2, 4);
    CHECK(ms::allclose(g(std::tuple{a, b}, std::pair{c, d}, std::array{a, d}),
                       a * b + c - d + a * d, 1e-6, 1e-6));
    CHECK(ms::allclose(g(std::tuple{d, c}, std::pair{b, a}, std::array{c, c}),
                       d * c + b - a + c * c, 1e-6, 1e-6));
    CHECK(g.compile_count() == 1);  // new values, same shapes: a hit
  }

  TEST_CASE("ms::jit of a lambda: optionals, strings, enums and arrays follow the same rules") {
    auto fn = [](const Tensor& x, const std::optional<Tensor>& b, const std::string& op, Act act,
                 const std::array<Tensor, 2>& w) {
      Tensor y = op == "mul" ? Tensor(x * w[0]) : Tensor(x + w[1]);
      if (b) y = y + *b;
      return act == Act::Relu ? Tensor(ms::relu(y)) : y;
    };
    auto f = ms::jit(fn);
    const Tensor x = input(), b = input(2, 4), w0 = input(2, 5), w1 = input(2, 6);
    const std::array<Tensor, 2> w{w0, w1};
    CHECK(ms::allclose(f(x, std::nullopt, "mul", Act::Neg, w),
                       fn(x, std::nullopt, "mul", Act::Neg, w), 1e-6, 1e-6));
    CHECK(ms::allclose(f(x, b, "mul", Act::Neg, w), fn(x, b, "mul", Act::Neg, w), 1e-6, 1e-6));
    CHECK(f.compile_count() == 2);
    f(input(2, 7), b, "mul", Act::Neg, w);
    CHECK(f.compile_count() == 2);
    CHECK(ms::allclose(f(x, b, "add", Act::Relu, w), fn(x, b, "add", Act::Relu, w), 1e-6, 1e-6));
    CHECK(f.compile_count() == 3);
  }

  TEST_CASE("ms::ArgList: typed access and its errors") {
    const Tensor x = input();
    ms::ArgList a{x,
                  std::int64_t{3},
                  true,
                  std::string("s"),
                  std::optional<Tensor>{},
                  std::vector<Tensor>{x, x},
                  0.5};
    CHECK(a.size() == 7);
    CHECK(a.get<std::int64_t>(1) == 3);
    CHECK(a.get<bool>(2));
    CHECK(a.get<std::string>(3) == "s");
    CHECK(!a.get<std::optional<Tensor>>(4).has_value());
    CHECK(a.get<double>(6) == 0.5);
    CHECK(a.holds<Tensor>(0));
    CHECK(a.tensor_count() == 3);
    CHECK(a.tensors().size() == 3);
    a.set(1, 9);  // an int is stored as std::int64_t
    CHECK(std::get<std::int64_t>(a[1]) == 9);
    a.set(6, 2.0f);
    CHECK(a.get<double>(6) == 2.0);
    CHECK_THROWS_WITH_AS(a.get<std::int64_t>(2),
                         doctest::Contains("ArgList::get: argument 2 is bool, not int64"),
                         ms::TypeError);
    CHECK_THROWS_WITH_AS(a.get<Tensor>(7), doctest::Contains("argument 7 of 7"), ms::IndexError);
    CHECK_THROWS_AS(a.with_tensors(std::vector<Tensor>{x}, "test"), ms::ValueError);
    // A braced list picks the kind of each value: int -> int64, float -> double, text -> string.
    const ms::ArgList b{x, 3, 2.5f, true, "relu"};
    CHECK(b.holds<std::int64_t>(1));
    CHECK(b.holds<double>(2));
    CHECK(b.holds<bool>(3));
    CHECK(b.get<std::string>(4) == "relu");
  }

  TEST_CASE("hooks see every argument; an ms::ArgList pre-hook replaces the int, eager and jit") {
    Stepper net;
    const Tensor x = input(), e1 = input(2, 5);
    const std::vector<Tensor> extra{e1};
    std::vector<std::int64_t> seen;
    ms::HookHandle pre = net.register_forward_pre_hook([&](Stepper&, const ms::ArgList& a) {
      seen.push_back(a.get<std::int64_t>(1));
      ms::ArgList r = a;
      r.set(1, a.get<std::int64_t>(1) * 10);
      return r;
    });
    std::vector<std::string> kinds;
    ms::HookHandle post =
        net.register_forward_hook([&](Stepper&, const ms::ArgList& a, const Tensor& out) {
          for (const ms::Arg& v : a) kinds.emplace_back(ms::arg_kind_name(v));
          return Tensor(out + 0.0f);
        });
    CHECK(ms::allclose(net(x, 2, false, std::nullopt, extra), reference(x, 20.f, false, {}, extra),
                       1e-5, 1e-5));
    CHECK(seen == std::vector<std::int64_t>{2});
    CHECK(kinds == std::vector<std::string>{"Tensor", "int64", "bool", "std::optional<Tensor>",
                                            "std::vector<Tensor>"});
    auto f = ms::jit(net);
    CHECK(ms::allclose(f(x, 2, false, std::nullopt, extra), reference(x, 20.f, false, {}, extra),
                       1e-5, 1e-5));
    CHECK(ms::allclose(f(input(2, 8), 2, false, std::nullopt, extra),
                       reference(input(2, 8), 20.f, false, {}, extra), 1e-5, 1e-5));
    CHECK(f.compile_count() == 1);
    CHECK(ms::allclose(f(x, 3, false, std::nullopt, extra), reference(x, 30.f, false, {}, extra),
                       1e-5, 1e-5));
    CHECK(f.compile_count() == 2);
    pre.remove();
    post.remove();
    CHECK(ms::allclose(f(x, 3, false, std::nullopt, extra), reference(x, 3.f, false, {}, extra),
                       1e-5, 1e-5));
  }

  TEST_CASE("tensor-only hooks on a call with other arguments see and replace its tensors") {
    Stepper net;
    const Tensor x = input(), m = input(2, 4), e1 = input(2, 5);
    std::size_t count = 0;
    net.register_forward_pre_hook([&](Stepper&, const ms::Args& a) {
      count = a.size();
      ms::Args r = a;
      r[0] = Tensor(a[0] * 2.0f);  // x
      return r;
    });
    const auto expect = reference(x * 2.0f, 3.f, true, m, {e1});
    CHECK(ms::allclose(net(x, 3, true, m, std::vector<Tensor>{e1}), expect, 1e-5, 1e-5));
    CHECK(count == 3);  // x, the mask, the vector's tensor
    auto f = ms::jit(net);
    CHECK(ms::allclose(f(x, 3, true, m, std::vector<Tensor>{e1}), expect, 1e-5, 1e-5));
    // The count of tensors is fixed by the other arguments.
    Stepper other;
    other.register_forward_pre_hook([](Stepper&, const ms::Args& a) { return a[0]; });
    CHECK_THROWS_WITH_AS(other(x, 3, true, m, std::vector<Tensor>{e1}),
                         doctest::Contains("forward pre-hook of Stepper: 1 tensors for a call "
                                           "with 3"),
                         ms::ValueError);
  }

  TEST_CASE("an ms::ArgList pre-hook of the wrong arity or kind: a TypeError naming the cell") {
    const Tensor x = input();
    const std::vector<Tensor> extra;
    Stepper few;
    few.register_forward_pre_hook([](Stepper&, const ms::ArgList& a) {
      return ms::ArgList{a[0], a[1]};
    });
    CHECK_THROWS_WITH_AS(few(x, 2, true, std::nullopt, extra),
                         doctest::Contains("Stepper: forward pre-hooks returned 2 arguments; "
                                           "construct takes 5"),
                         ms::TypeError);
    Stepper kind;
    kind.register_forward_pre_hook([](Stepper&, const ms::ArgList& a) {
      ms::ArgList r = a;
      r.set(1, 2.5);
      return r;
    });
    CHECK_THROWS_WITH_AS(kind(x, 2, true, std::nullopt, extra),
                         doctest::Contains("Stepper: forward pre-hooks returned argument 1 as "
                                           "double; construct takes int64 there"),
                         ms::TypeError);
    auto f = ms::jit(kind);
    CHECK_THROWS_AS(f(x, 2, true, std::nullopt, extra), ms::TypeError);
    Seqs seqs;
    seqs.register_forward_pre_hook([](Seqs&, const ms::ArgList& a) {
      ms::ArgList r = a;
      r.set(2, std::vector<Tensor>{a.get<std::vector<Tensor>>(2)[0]});
      return r;
    });
    CHECK_THROWS_WITH_AS(seqs(std::tuple{x, x}, std::pair{x, x}, std::array{x, x}),
                         doctest::Contains("Seqs: forward pre-hooks returned argument 2 with 1 "
                                           "tensors; construct takes a fixed-size sequence of 2"),
                         ms::TypeError);
  }

  TEST_CASE("auto-dynamic: a mutable_ vector generalizes element-wise, a new length is a new key") {
    struct Sum : ms::Cell<Sum> {
      Tensor construct(const std::vector<Tensor>& v) {
        Tensor y = v[0];
        for (std::size_t i = 1; i < v.size(); ++i) y = y + v[i];
        return y;
      }
    };
    Sum net;
    auto f = ms::jit(net, {.dynamic = 1});
    auto three = [](std::int64_t n) {
      return std::vector<Tensor>{input(n, 1), input(n, 2), input(n, 3)};
    };
    for (std::int64_t n : {2, 4, 8, 16}) {
      const std::vector<Tensor> v = three(n);
      CHECK(ms::allclose(f(ms::mutable_(v)), v[0] + v[1] + v[2], 1e-6, 1e-6));
    }
    CHECK(f.compile_count() == 3);  // 2 static graphs, then one generalized graph
    CHECK(f.generalized_count() == 1);
    CHECK(f.phase().find("f32[-1,-1], f32[-1,-1], f32[-1,-1]") != std::string::npos);
    const std::vector<Tensor> two{input(5, 1), input(5, 2)};
    CHECK(ms::allclose(f(ms::mutable_(two)), two[0] + two[1], 1e-6, 1e-6));
    CHECK(f.compile_count() == 4);  // another length: another graph
  }

  TEST_CASE("auto-dynamic: a present optional tensor generalizes as a plain one") {
    auto fn = [](const Tensor& x, const std::optional<Tensor>& b) {
      return b ? Tensor(x + *b) : Tensor(x * 1.0f);
    };
    auto f = ms::jit(fn, {.dynamic = 1});
    for (std::int64_t n : {2, 4, 8, 16}) {
      const Tensor x = input(n, 1), b = input(n, 2);
      CHECK(ms::allclose(f(x, b), x + b, 1e-6, 1e-6));
    }
    CHECK(f.compile_count() == 3);
    CHECK(f.generalized_count() == 1);
  }
  TEST_CASE("a construct taking const char*: eager, hooked and under ms::jit") {
    CMode net;
    const Tensor x = input();
    CHECK(ms::allclose(net(x, "double"), x * 2.0f, 1e-6, 1e-6));
    CHECK(ms::allclose(net(x, std::string("plain")), x, 1e-6, 1e-6));
    auto f = ms::jit(net);
    CHECK(ms::allclose(f(x, "double"), x * 2.0f, 1e-6, 1e-6));
    CHECK(ms::allclose(f(x, "plain"), x, 1e-6, 1e-6));
    CHECK(f.compile_count() == 2);  // the text is in the key
    // With an ms::ArgList pre-hook the text reaches construct as a C string of the hooked list.
    ms::HookHandle h = net.register_forward_pre_hook([](CMode&, const ms::ArgList& a) {
      ms::ArgList r = a;
      r.set(1, a.get<std::string>(1) == "plain" ? "double" : "plain");
      return r;
    });
    CHECK(ms::allclose(net(x, "plain"), x * 2.0f, 1e-6, 1e-6));
    CHECK(ms::allclose(f(x, "double"), x, 1e-6, 1e-6));
    h.remove();
  }

  TEST_CASE("ms::ArgList::set takes an expression or a Parameter as a Tensor") {
    const Tensor x = input();
    ms::ArgList a{x, std::int64_t{2}};
    a.set(0, x + x);
    CHECK(a.holds<Tensor>(0));
    CHECK(ms::allclose(a.get<Tensor>(0), x * 2.0f, 1e-6, 1e-6));
    const ms::Parameter p(input(2, 7), "p");
    a.set(1, p);
    CHECK(ms::allclose(a.get<Tensor>(1), p, 0.0, 0.0));
    // A pre-hook returning an expression for the tensor argument.
    CMode net;
    ms::HookHandle h = net.register_forward_pre_hook([](CMode&, const ms::ArgList& in) {
      ms::ArgList r = in;
      r.set(0, in.get<Tensor>(0) + 1.0f);
      return r;
    });
    CHECK(ms::allclose(net(x, "plain"), x + 1.0f, 1e-6, 1e-6));
  }

  TEST_CASE("ms::jit of a cell with ms::Kwargs: tensors are inputs, other values and names key") {
    KwScale net;
    auto f = ms::jit(net);
    const Tensor x = input(), b1 = input(2, 4), b2 = input(2, 5);
    CHECK(ms::allclose(f(x, ms::Kwargs{{"scale", 2.0}, {"bias", b1}}), x * 2.0f + b1, 1e-6, 1e-6));
    CHECK(f.compile_count() == 1);
    // Another tensor of the same shape: a graph input, so a hit with the new value.
    CHECK(ms::allclose(f(x, ms::Kwargs{{"scale", 2.0}, {"bias", b2}}), x * 2.0f + b2, 1e-6, 1e-6));
    CHECK(f.compile_count() == 1);
    // Another number: a constant of the graph.
    CHECK(ms::allclose(f(x, ms::Kwargs{{"scale", 3.0}, {"bias", b2}}), x * 3.0f + b2, 1e-6, 1e-6));
    CHECK(f.compile_count() == 2);
    // Another set of names, and another bias shape (broadcast): new keys.
    CHECK(ms::allclose(f(x, ms::Kwargs{{"scale", 3.0}}), x * 3.0f, 1e-6, 1e-6));
    CHECK(f.compile_count() == 3);
    ms::Generator g(1);
    const Tensor row = ms::normal({4}, 0.0, 1.0, g);
    CHECK(
        ms::allclose(f(x, ms::Kwargs{{"scale", 3.0}, {"bias", row}}), x * 3.0f + row, 1e-6, 1e-6));
    CHECK(f.compile_count() == 4);
    CHECK(f.phase().find("scale=") != std::string::npos);
    CHECK(ms::allclose(f(x, ms::Kwargs{}), x, 1e-6, 1e-6));
  }

  TEST_CASE("ms::jit of a cell with a std::vector of Parameters") {
    SumAll net;
    std::vector<ms::Parameter> ps{ms::Parameter(input(2, 1), "a"), ms::Parameter(input(2, 2), "b")};
    const Tensor want = ps[0] + ps[1];
    CHECK(ms::allclose(net(ps), want, 1e-6, 1e-6));
    auto f = ms::jit(net);
    CHECK(ms::allclose(f(ps), want, 1e-6, 1e-6));
    ps[0].copy_(input(2, 3));
    CHECK(ms::allclose(f(ps), ps[0] + ps[1], 1e-6, 1e-6));  // graph inputs: the new value
    CHECK(f.compile_count() == 1);
  }
}
