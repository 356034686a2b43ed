// The IR: building a graph by hand, the printer (checked in full), the verifier.
#include <doctest/doctest.h>

#include <sstream>
#include <type_traits>
#include <unordered_set>

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
  const ir::ValueId vx = g.value_of(g.add(x, {{float32, {2, 3}}}));
  Node w;
  w.kind = NodeKind::Capture;
  w.tensor = ones({3, 4});
  w.name = "fc1.weight";
  const ir::ValueId vw = g.value_of(g.add(w, {{float32, {3, 4}}}));
  Node mm;
  mm.def = &ops::op("matmul");
  mm.inputs = {vx, vw};
  const ir::ValueId v0 = g.value_of(g.add(mm, {{float32, {2, 4}}}));
  Node relu;
  relu.def = &ops::op("relu");
  relu.ew_id = ops::ew_op_find("relu");
  relu.inputs = {v0};
  const ir::ValueId v1 = g.value_of(g.add(relu, {{float32, {2, 4}}}));
  Node half;
  half.kind = NodeKind::Scalar;
  half.scalar = 0.5;
  const ir::ValueId vh = g.value_of(g.add(half, {{float32, {}}}, true));
  Node mul;
  mul.def = &ops::op("mul");
  mul.ew_id = ops::ew_op_find("mul");
  mul.inputs = {v1, vh};
  const ir::ValueId v2 = g.value_of(g.add(mul, {{float32, {2, 4}}}));
  Node sum;
  sum.def = &ops::op("sum");
  sum.attrs = {{"axes", std::vector<std::int64_t>{1}}, {"keepdims", false}};
  sum.inputs = {v2};
  const ir::ValueId v3 = g.value_of(g.add(sum, {{float32, {2}}}));
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

  TEST_CASE("typed ids: values and nodes are told apart, read back, compared and hashed") {
    static_assert(!std::is_convertible_v<int, ir::ValueId>,
                  "an index is made a ValueId explicitly");
    static_assert(!std::is_convertible_v<ir::NodeId, ir::ValueId>);
    static_assert(!std::is_convertible_v<ir::ValueId, ir::NodeId>);
    static_assert(!std::is_convertible_v<ir::ValueId, int>);
    const ir::Graph g = small_graph();
    CHECK_FALSE(ir::kNoValue.valid());
    CHECK_FALSE(ir::kNoNode.valid());
    CHECK(ir::kNoValue.raw() == -1);
    CHECK(ir::ValueId{std::size_t{3}} == ir::ValueId{3});
    CHECK(ir::ValueId{2} < ir::ValueId{3});
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::NodeId n{i};
      CHECK(n.index() == i);
      CHECK(&g.node(n) == &g.nodes[i]);
      for (std::size_t k = 0; k < g.node(n).outputs.size(); ++k) {
        const ir::ValueId v = g.node(n).outputs[k];
        CHECK(v.valid());
        CHECK(&g.value(v) == &g.values[v.index()]);
        CHECK(g.value(v).node == n);  // the value names its producer
        CHECK(&g.producer(v) == &g.node(n));
      }
    }
    CHECK(g.value_of(ir::NodeId{2}) == g.nodes[2].outputs[0]);
    CHECK(g.next_node() == ir::NodeId{g.nodes.size()});
    CHECK(g.next_value() == ir::ValueId{g.values.size()});
    std::unordered_set<ir::ValueId> seen(g.outputs.begin(), g.outputs.end());
    CHECK(seen.size() == 2);
    CHECK(seen.count(g.outputs[1]) == 1);
    CHECK(seen.count(ir::ValueId{999}) == 0);
    ir::IdTable<ir::ValueId, int> uses(g.values.size(), 0);
    for (const Node& n : g.nodes)
      for (ir::ValueId v : n.inputs) ++uses[v];
    CHECK(uses[g.nodes[2].outputs[0]] == 1);  // the matmul's value is read by relu only
    CHECK(uses[g.outputs[0]] == 0);
    std::ostringstream os;
    os << g.outputs[0];
    CHECK(os.str() == std::to_string(g.outputs[0].index()));
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
      b.value(b.nodes[2].outputs[0]).type.shape = {2, 5};
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
      b.outputs.push_back(ir::ValueId{999});
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
    ir::Value i32{{int32, {4}}, ir::NodeId{0}, 0, false};
    ir::Value half{{float32, {}}, ir::NodeId{1}, 0, true};
    const std::vector<ir::Value> vals{i32, half};
    const std::vector<Scalar> sc{0, 0.5};
    const ops::TensorType t = ir::infer_elementwise(ops::ew_op_find("mul"), vals, sc);
    CHECK(t.dtype == float32);  // int tensor * float number -> float32
    CHECK(t.shape == Shape{4});
    ir::Value f16{{float16, {2, 1}}, ir::NodeId{0}, 0, false};
    ir::Value f32{{float32, {3}}, ir::NodeId{0}, 0, false};
    const std::vector<ir::Value> v2{f16, f32};
    const ops::TensorType t2 = ir::infer_elementwise(ops::ew_op_find("add"), v2, sc);
    CHECK(t2.dtype == float32);
    CHECK(t2.shape == Shape{2, 3});
    ir::Value bad{{float32, {4}}, ir::NodeId{0}, 0, false};
    const std::vector<ir::Value> v3{bad, f32};
    CHECK_THROWS_AS(ir::infer_elementwise(ops::ew_op_find("add"), v3, sc), ShapeError);
  }
}
