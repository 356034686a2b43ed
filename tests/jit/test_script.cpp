// Front-end graphs, graph split into fragments, and jit_begin / jit_end: the
// MindSpore-internal entry points of ms::advanced.
#include <doctest/doctest.h>

#include <ms/ms.hpp>
#include <sstream>

using namespace ms;
namespace adv = ms::advanced;

namespace {
// z1 = x + y; z2 = add(z1, x) flagged as a split op; z3 = relu(z2) * 2
auto split_fn = [](const auto& x, const auto& y) -> Tensor {
  Tensor z1 = x + y;
  Tensor z2 = ops::call1(ops::op("add"), {z1, x}, {{"split_op", true}, {"func_id", "add_func"}});
  return relu(z2) * 2.f - z1;
};
}  // namespace

TEST_SUITE("jit") {
  TEST_CASE("frontend_compile gives the traced graph, printable") {
    const Tensor x = ones({1, 1, 3, 3}), y = ones({1, 1, 3, 3});
    adv::ScriptGraph sg =
        adv::frontend_compile([](const auto& a, const auto& b) { return a + b; })(x, y);
    CHECK(sg.to_string() ==
          "graph(%arg0: f32[1,1,3,3], %arg1: f32[1,1,3,3]) {\n"
          "  %0 = Add(%arg0, %arg1) : (f32[1,1,3,3], f32[1,1,3,3]) -> f32[1,1,3,3]\n"
          "  return %0\n"
          "}\n");
    std::ostringstream os;
    sg.print(os);
    CHECK(os.str() == sg.to_string());
    CHECK(sg.phase().find("f32[1,1,3,3]") != std::string::npos);
  }

  TEST_CASE("graph_split cuts around split ops; running the fragments equals the graph") {
    const Tensor x = arange(-4, 5).reshape({3, 3}), y = full({3, 3}, 0.5f);
    const adv::ScriptGraph sg = adv::frontend_compile(split_fn)(x, y);
    const std::vector<adv::GraphFragment> frags = adv::graph_split(sg);
    REQUIRE(frags.size() == 3);
    CHECK(frags[0].is_graph());
    CHECK_FALSE(frags[1].is_graph());
    CHECK(frags[1].py_key() == "add_func");
    CHECK(frags[2].is_graph());
    CHECK(frags[1].args_list().size() == 2);  // z1 and x
    CHECK(frags[2].args_list().size() == 2);  // z2 and z1
    const std::vector<Tensor> in{x, y};
    const std::vector<Tensor> got = adv::run_fragments(sg, frags, in);
    const Tensor want = split_fn(x, y);
    REQUIRE(got.size() == 1);
    CHECK(allclose(got[0], want, 0, 0));
    // The same function under ms::jit, in one piece.
    auto f = jit(split_fn, {.verify = true});
    CHECK(allclose(f(x, y), want, 0, 0));
    // A split op is never fused into its neighbours.
    CHECK(f.dump().find("Add(") != std::string::npos);
    CHECK(frags[1].to_string().find("is_graph=false") != std::string::npos);
  }

  TEST_CASE("a graph without split ops is one fragment") {
    const Tensor x = ones({2});
    const adv::ScriptGraph sg = adv::frontend_compile([](const auto& a) { return a * 3.f; })(x);
    const auto frags = adv::graph_split(sg);
    REQUIRE(frags.size() == 1);
    CHECK(frags[0].is_graph());
    CHECK(adv::run_fragments(sg, frags, std::vector<Tensor>{x})[0].to_vector<float>() ==
          std::vector<float>{3, 3});
  }

  TEST_CASE("jit_begin / jit_end capture eager code; the second run reuses the graph") {
    auto snippet = [](const Tensor& x, const Tensor& y) {
      adv::jit_begin("tensor_add", x, y);
      Tensor z = relu(x + y) * 2.f;
      z = adv::jit_end(z);
      return z;
    };
    const Tensor a = arange(-2, 2), b = ones({4});
    CHECK(snippet(a, b).to_vector<float>() == std::vector<float>{0, 0, 2, 4});
    CHECK(snippet(b, b).to_vector<float>() == std::vector<float>{4, 4, 4, 4});
    CHECK(adv::jit_snippet_compile_count("tensor_add") == 1);
    CHECK(snippet(ones({2}), ones({2})).to_vector<float>() == std::vector<float>{4, 4});
    CHECK(adv::jit_snippet_compile_count("tensor_add") == 2);
  }

  TEST_CASE("jit_begin / jit_end misuse") {
    CHECK_THROWS_WITH_AS(adv::jit_end(ones({1})), doctest::Contains("no snippet is open"),
                         ValueError);
    adv::jit_begin("a", ones({1}));
    CHECK_THROWS_WITH_AS(adv::jit_begin("b", ones({1})), doctest::Contains("'a' is still open"),
                         ValueError);
    // The stale snippet was discarded: eager code runs again.
    CHECK((ones({1}) + 1.f).item<float>() == 2.f);
  }
}
