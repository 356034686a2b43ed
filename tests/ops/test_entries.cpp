// The table-driven tests derived from op entries' samples: for every row of
// the op table that has samples, each case's outputs against its expected
// values, eagerly and under ms::jit at O0 and O1 (bitwise the same), its
// gradient against central differences, and each error sample's ms::Error.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <ms/autodiff/gradcheck.hpp>
#include <ms/ms.hpp>
#include <string>
#include <vector>

#include "strided.hpp"
#include "thread_guard.hpp"

using namespace ms;

namespace {

using Tensors = std::vector<Tensor>;

std::vector<const ops::OpDef*> sampled_ops() {
  std::vector<const ops::OpDef*> out;
  for (const ops::OpDef* d : ops::registry())
    if (d->samples != nullptr) out.push_back(d);
  return out;
}

Tensors strided(const Tensors& xs) {
  Tensors out;
  for (const Tensor& x : xs) out.push_back(test::strided(x));
  return out;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && allclose(a, b, 0, 0, true);
}

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("op entries: samples, forward against expected values") {
    const auto defs = sampled_ops();
    CHECK(defs.size() >= 5);
    for (const ops::OpDef* d : defs) {
      const ops::Samples s = d->samples();
      CHECK_MESSAGE(!s.cases.empty(), d->name, ": no sample case");
      for (const ops::Sample& c : s.cases) {
        INFO(d->name, " [", c.label, "]");
        const Tensors out = ops::call(*d, c.inputs, c.attrs);
        if (c.expected.empty()) continue;
        REQUIRE(out.size() == c.expected.size());
        for (std::size_t k = 0; k < out.size(); ++k) {
          CHECK(out[k].dtype() == c.expected[k].dtype());
          CHECK(out[k].shape() == c.expected[k].shape());
          CHECK(allclose(out[k], c.expected[k], c.tol, c.tol, true));
        }
      }
    }
  }

  TEST_CASE("op entries: eager == jit O0 == jit O1, bitwise") {
    for (const ops::OpDef* d : sampled_ops())
      for (const ops::Sample& c : d->samples().cases) {
        INFO(d->name, " [", c.label, "]");
        // Strided inputs may be read in another order (float sums round
        // differently): the 3rd call compares with eager on the same layout.
        const Tensors want = ops::call(*d, c.inputs, c.attrs);
        const Tensors want_strided = ops::call(*d, strided(c.inputs), c.attrs);
        for (const JitLevel level : {JitLevel::O0, JitLevel::O1}) {
          CAPTURE(level);
          auto f = jit([d, &c](const Tensors& xs) { return ops::call(*d, xs, c.attrs); },
                       {.jit_level = level, .verify = true});
          for (int call = 0; call < 3; ++call) {  // the 3rd with strided inputs
            const Tensors got = f(call < 2 ? c.inputs : strided(c.inputs));
            const Tensors& w = call < 2 ? want : want_strided;
            REQUIRE(got.size() == w.size());
            for (std::size_t k = 0; k < got.size(); ++k) CHECK(same_bits(got[k], w[k]));
          }
          CHECK(f.compile_count() == 1);
          if (level == JitLevel::O0)
            CHECK_MESSAGE(f.dump().find(" = " + ops::ir_name(*d) + "(") != std::string::npos,
                          "the graph has no '", d->name, "' node:\n", f.dump());
        }
      }
  }

  TEST_CASE("op entries: gradients against central differences") {
    for (const ops::OpDef* d : sampled_ops()) {
      int checked = 0;
      for (const ops::Sample& c : d->samples().cases) {
        if (c.grad_inputs.empty()) continue;
        INFO(d->name, " [", c.label, "]");
        std::vector<int> skip;
        for (int i = 0; i < static_cast<int>(c.inputs.size()); ++i)
          if (std::find(c.grad_inputs.begin(), c.grad_inputs.end(), i) == c.grad_inputs.end())
            skip.push_back(i);
        // Several outputs are checked as one: their flattened concatenation.
        const auto fn = [d, &c](const Tensors& xs) {
          Tensors outs = ops::call(*d, xs, c.attrs);
          if (outs.size() == 1) return outs[0];
          for (Tensor& o : outs) o = flatten(o);
          return concat(outs);
        };
        const auto r = testing::gradcheck(fn, c.inputs,
                                          {.eps = c.grad_eps, .atol = c.grad_atol, .skip = skip});
        CHECK_MESSAGE(r.ok, r.message);
        ++checked;
      }
      if (d->differentiable)
        CHECK_MESSAGE(checked > 0, d->name, " is differentiable but no sample checks its gradient");
      CHECK_MESSAGE(static_cast<bool>(d->grad) == d->differentiable, d->name,
                    ": a gradient rule exactly when differentiable");
    }
  }

  TEST_CASE("op entries: each error sample raises its ms::Error") {
    for (const ops::OpDef* d : sampled_ops())
      for (const ops::ErrorSample& e : d->samples().errors) {
        INFO(d->name, " [", e.label, "]");
        bool thrown = false;
        try {
          (void)ops::call(*d, e.inputs, e.attrs);
        } catch (const Error& err) {
          thrown = true;
          CHECK(std::string_view(err.kind()) == e.kind);
          CHECK_MESSAGE(std::string_view(err.what()).find(e.message) != std::string_view::npos,
                        "message: ", err.what());
        }
        CHECK_MESSAGE(thrown, "no ms::Error");
      }
  }

  TEST_CASE("op entries: a view op's outputs share its input's storage, eagerly") {
    int views = 0;
    for (const ops::OpDef* d : sampled_ops()) {
      if (!d->view) continue;
      ++views;
      for (const ops::Sample& c : d->samples().cases) {
        INFO(d->name, " [", c.label, "]");
        for (const Tensor& o : ops::call(*d, c.inputs, c.attrs))
          CHECK(o.storage() == c.inputs[0].storage());
      }
    }
    CHECK(views >= 8);  // transpose, permute, squeeze, unsqueeze, broadcast_to, slice, select, ...
    CHECK(ops::op("slice").view);
    CHECK_FALSE(ops::op("concat").view);
    CHECK(ops::op("random").random);
    CHECK_FALSE(ops::op("slice").random);
  }

  TEST_CASE("op entries: typed attributes serialize by name, defaults fill what is absent") {
    const ops::Cumsum::Attrs a{.axis = -1, .reverse = true};
    const ops::Attrs s = ops::attrs_to(a);
    CHECK(s.to_string() == "axis=-1, exclusive=false, reverse=true");
    const auto back = ops::attrs_from<ops::Cumsum::Attrs>(s, "cumsum");
    CHECK(back.axis == -1);
    CHECK(back.reverse);
    CHECK_FALSE(back.exclusive);
    const auto defaults = ops::attrs_from<ops::Cumsum::Attrs>(ops::Attrs{}, "cumsum");
    CHECK(defaults.axis == 0);
    CHECK_THROWS_WITH_AS(ops::attrs_from<ops::Cumsum::Attrs>(ops::Attrs{{"axis", true}}, "cumsum"),
                         doctest::Contains("cumsum: attribute 'axis' has the wrong type"),
                         ValueError);
    CHECK(&ops::def_of<ops::Cumsum>() == &ops::op("cumsum"));
  }

  TEST_CASE("op entries: the bound and the typed call give the map call's bits") {
    for (const ops::OpDef* d : sampled_ops()) {
      if (d->random) continue;
      const bool bound = d->bind != nullptr, typed = d->eval_typed != nullptr;
      CHECK_MESSAGE(bound, d->name, ": an entry's row has no bind");
      CHECK_MESSAGE(typed, d->name, ": an entry's row has no eval_typed");
      for (const ops::Sample& c : d->samples().cases) {
        INFO(d->name, " [", c.label, "]");
        const Tensors want = ops::call(*d, c.inputs, c.attrs);
        const Tensors got = ops::bind_eval(*d, c.attrs)(c.inputs);
        REQUIRE(got.size() == want.size());
        for (std::size_t k = 0; k < want.size(); ++k) CHECK(same_bits(got[k], want[k]));
      }
    }
    // The run form (what a compiled step calls) on outputs allocated as infer
    // types them, against the map call.
    int runs = 0;
    for (const ops::OpDef* d : sampled_ops()) {
      if (d->bind_run == nullptr) continue;
      ++runs;
      for (const ops::Sample& c : d->samples().cases) {
        INFO(d->name, " [", c.label, "]");
        const Tensors want = ops::call(*d, c.inputs, c.attrs);
        Tensors got;
        for (const ops::TensorType& t : d->infer(ops::types_of(c.inputs), c.attrs))
          got.push_back(empty(t.shape, t.dtype));
        d->bind_run(c.attrs)(c.inputs, got);
        REQUIRE(got.size() == want.size());
        for (std::size_t k = 0; k < want.size(); ++k) CHECK(same_bits(got[k], want[k]));
      }
    }
    CHECK(runs >= 8);  // layer_norm and its gradient, index_select, gather, scatter, cumsum, ...
    const bool layer_norm_runs = ops::op("layer_norm").bind_run != nullptr;
    const bool transpose_runs = ops::op("transpose").bind_run != nullptr;  // a view
    CHECK(layer_norm_runs);
    CHECK_FALSE(transpose_runs);
    // A row without bind (elementwise ops are not entries) binds its map.
    const ops::OpDef& add = ops::op("add");
    const bool add_unbound = add.bind == nullptr;
    CHECK(add_unbound);
    const Tensor a = arange(0, 6), b = a * 2.0;
    const Tensors ab{a, b};
    CHECK(same_bits(ops::bind_eval(add, {})(ab)[0], a + b));
    // The typed call (what ms::cumsum runs) against the map call.
    const ops::Cumsum::Attrs at{.axis = 1, .exclusive = true};
    const Tensor x = a.reshape({2, 3});
    CHECK(same_bits(ops::invoke1<ops::Cumsum>({x}, at),
                    ops::call1(ops::op("cumsum"), {x}, ops::attrs_to(at))));
    // Bad input through the typed call: the op's ms::Error, as through the map.
    CHECK_THROWS_WITH_AS(ops::invoke1<ops::Cumsum>({x}, ops::Cumsum::Attrs{.axis = 5}),
                         doctest::Contains("cumsum"), IndexError);
    CHECK_THROWS_WITH_AS(ops::invoke1<ops::Cumsum>({Tensor()}, at),
                         doctest::Contains("cumsum: input 0 is an undefined tensor"), ValueError);
    // Bad attributes fail when bound, before any call.
    CHECK_THROWS_WITH_AS(ops::bind_eval(ops::op("cumsum"), ops::Attrs{{"axis", true}}),
                         doctest::Contains("cumsum: attribute 'axis' has the wrong type"),
                         ValueError);
    CHECK_THROWS_WITH_AS(ops::bind_update(ops::op("cumsum"), {}),
                         doctest::Contains("ops::bind_update: op 'cumsum' has no in-place"),
                         ValueError);
  }

  TEST_CASE("cumsum: a long axis against a running double sum, 1 and 2 threads alike") {
    std::vector<double> v(3 * 1000);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<double>(i));
    const Tensor x = from_vector(v, {3, 1000});
    const Tensor y = cumsum(x, {.axis = 1});
    const std::vector<double> got = y.to_vector<double>();
    int wrong = 0;
    for (std::size_t r = 0; r < 3; ++r) {
      double acc = 0;
      for (std::size_t k = 0; k < 1000; ++k) {
        acc += v[r * 1000 + k];
        wrong += got[r * 1000 + k] != acc;
      }
    }
    CHECK(wrong == 0);
    const Tensor t = x.transpose(0, 1);  // strided input
    CHECK(allclose(cumsum(t, {.axis = 0}), y.transpose(0, 1), 0, 0));
    test::check_thread_invariant([&] { return cumsum(from_vector(v, {1000, 3})); });
  }
}
