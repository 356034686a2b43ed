// The IR: building a graph by hand, the printer (checked in full), the verifier.
#include <doctest/doctest.h>

#include <ms/ms.hpp>

using namespace ms;
using ir::Node;
using ir::NodeKind;

namespace {
// %x: f32[2,3] (input), %w: f32[3,4] (capture); %0 = MatMul(%x, %w); %1 = Relu(%0); %2 = Mul(%1,
// 0.5)
ir::Graph small_graph() {
  ir::Graph g;
  Node x;
  x.kind = NodeKind::Input;
  x.arg_index = 0;
  x.name = "x";
  const int vx = g.value_of(g.add(x, {{float32, {2, 3}}}));
  Node w;
  w.kind = NodeKind::Capture;
  w.tensor = ones({3, 4});
  w.name = "fc1.weight";
  const int vw = g.value_of(g.add(w, {{float32, {3, 4}}}));
  Node mm;
  mm.def = &ops::op("matmul");
  mm.inputs = {vx, vw};
  const int v0 = g.value_of(g.add(mm, {{float32, {2, 4}}}));
  Node relu;
  relu.def = &ops::op("relu");
  relu.ew_id = ops::ew_op_find("relu");
  relu.inputs = {v0};
  const int v1 = g.value_of(g.add(relu, {{float32, {2, 4}}}));
  Node half;
  half.kind = NodeKind::Scalar;
  half.scalar = 0.5;
  const int vh = g.value_of(g.add(half, {{float32, {}}}, true));
  Node mul;
  mul.def = &ops::op("mul");
  mul.ew_id = ops::ew_op_find("mul");
  mul.inputs = {v1, vh};
  const int v2 = g.value_of(g.add(mul, {{float32, {2, 4}}}));
  Node sum;
  sum.def = &ops::op("sum");
  sum.attrs = {{"axes", std::vector<std::int64_t>{1}}, {"keepdims", false}};
  sum.inputs = {v2};
  const int v3 = g.value_of(g.add(sum, {{float32, {2}}}));
  g.outputs = {v3, v1};
  return g;
}
}  // namespace

TEST_SUITE("ir") {
  TEST_CASE("printer: one node a line, MindSpore style") {
    const ir::Graph g = small_graph();
    CHECK(ir::to_string(g) ==
          "graph(%x: f32[2,3]) captures(%fc1.weight: f32[3,4]) {\n"
          "  %0 = MatMul(%x, %fc1.weight) : (f32[2,3], f32[3,4]) -> f32[2,4]\n"
          "  %1 = Relu(%0) : (f32[2,4]) -> f32[2,4]\n"
          "  %3 = Mul(%1, 0.5) : (f32[2,4], weak f32) -> f32[2,4]\n"
          "  %4 = Sum(%3) {axes=[1], keepdims=false} : (f32[2,4]) -> f32[2]\n"
          "  return %4, %1\n"
          "}\n");
    CHECK(g.count(NodeKind::Op) == 4);
    CHECK(g.count_op("relu") == 1);
  }

  TEST_CASE("the verifier accepts a good graph and names what is wrong in a bad one") {
    ir::Graph g = small_graph();
    CHECK_NOTHROW(ir::verify(g));
    {
      ir::Graph b = g;  // a use before its definition
      std::swap(b.nodes[2].inputs[0], b.nodes[3].inputs[0]);
      CHECK_THROWS_WITH_AS(ir::verify(b, "test"), doctest::Contains("before it is defined"),
                           ValueError);
    }
    {
      ir::Graph b = g;  // a wrong recorded type
      b.values[static_cast<std::size_t>(b.nodes[2].outputs[0])].type.shape = {2, 5};
      CHECK_THROWS_WITH_AS(ir::verify(b), doctest::Contains("differs from the inferred"),
                           ValueError);
    }
    {
      ir::Graph b = g;  // wrong arity
      b.nodes[2].inputs.push_back(b.nodes[2].inputs[0]);
      CHECK_THROWS_WITH_AS(ir::verify(b), doctest::Contains("matmul has 3 inputs"), ValueError);
    }
    {
      ir::Graph b = g;  // an output that does not exist
      b.outputs.push_back(999);
      CHECK_THROWS_WITH_AS(ir::verify(b), doctest::Contains("graph output 999"), ValueError);
    }
    {
      ir::Graph b = g;  // an update of a non-captured value
      Node a;
      a.kind = NodeKind::Assign;
      a.inputs = {b.nodes[0].outputs[0], b.nodes[0].outputs[0]};
      b.add(a, {});
      CHECK_THROWS_WITH_AS(ir::verify(b), doctest::Contains("non-captured"), ValueError);
    }
  }

  TEST_CASE("elementwise type inference follows the eager rules, weak scalars included") {
    ir::Value i32{{int32, {4}}, 0, 0, false};
    ir::Value half{{float32, {}}, 1, 0, true};
    const std::vector<ir::Value> vals{i32, half};
    const std::vector<Scalar> sc{0, 0.5};
    const ops::TensorType t = ir::infer_elementwise(ops::ew_op_find("mul"), vals, sc);
    CHECK(t.dtype == float32);  // int tensor * float number -> float32
    CHECK(t.shape == Shape{4});
    ir::Value f16{{float16, {2, 1}}, 0, 0, false};
    ir::Value f32{{float32, {3}}, 0, 0, false};
    const std::vector<ir::Value> v2{f16, f32};
    const ops::TensorType t2 = ir::infer_elementwise(ops::ew_op_find("add"), v2, sc);
    CHECK(t2.dtype == float32);
    CHECK(t2.shape == Shape{2, 3});
    ir::Value bad{{float32, {4}}, 0, 0, false};
    const std::vector<ir::Value> v3{bad, f32};
    CHECK_THROWS_AS(ir::infer_elementwise(ops::ew_op_find("add"), v3, sc), ShapeError);
  }
}
