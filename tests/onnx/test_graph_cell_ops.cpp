// ms::GraphCell, op by op on small hand-built models: integer Div truncates
// exactly and rejects a zero divisor, a Reshape target whose sizes overflow,
// window attributes below 1 and input dims that overflow,
// BOOL initializers with bytes other than 0 and 1, Trilu's k, Split and
// ConstantOfShape (the patterns of PyTorch's exporter) with their errors.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ms/cell.hpp"
#include "ms/onnx/graph_cell.hpp"
#include "onnx/onnx_test_models.hpp"

namespace {

using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;
using I64s = std::vector<std::int64_t>;

/// A model built value by value (opset 17; dims of -1 are the dim_param "N").
struct Model {
  ModelProto m;
  ::onnx::GraphProto* g = m.mutable_graph();

  Model() {
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(17);
    g->set_name("ops");
  }
  void typed(::onnx::ValueInfoProto* v, const std::string& name, int elem, const I64s& dims,
             bool input) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* s = tt->mutable_shape();
    for (std::int64_t d : dims) {
      auto* dim = s->add_dim();
      if (d >= 0) dim->set_dim_value(d);
      if (d < 0 && input) dim->set_dim_param("N");
    }
  }
  void input(const std::string& name, int elem, const I64s& dims) {
    typed(g->add_input(), name, elem, dims, true);
  }
  /// An output of element type `elem` and rank dims.size() (-1: an unknown size).
  void output(const std::string& name, int elem, const I64s& dims) {
    typed(g->add_output(), name, elem, dims, false);
  }
  TensorProto* init(const std::string& name, int elem, const I64s& dims) {
    TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(elem);
    for (std::int64_t d : dims) t->add_dims(d);
    return t;
  }
  /// An int64 initializer that is also a graph input (ONNX's shape inference
  /// then does not read its values: the checks reached are GraphCell's).
  void ints_input(const std::string& name, const I64s& v) {
    TensorProto* t = init(name, TensorProto::INT64, {static_cast<std::int64_t>(v.size())});
    for (std::int64_t x : v) t->add_int64_data(x);
    input(name, TensorProto::INT64, {static_cast<std::int64_t>(v.size())});
  }
  NodeProto* node(const std::string& op, const std::vector<std::string>& in,
                  const std::vector<std::string>& out) {
    NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op == "Identity" ? "id" : out[0]);
    for (const auto& i : in) n->add_input(i);
    for (const auto& o : out) n->add_output(o);
    return n;
  }
  std::string bytes() const {
    std::string s;
    REQUIRE(m.SerializeToString(&s));
    return s;
  }
};

void attr_i(NodeProto* n, const char* name, std::int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

void attr_ints(NodeProto* n, const char* name, const I64s& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (std::int64_t x : v) a->add_ints(x);
}

ms::Tensor ints(const I64s& v) {
  ms::Tensor t = ms::empty(ms::Shape({static_cast<std::int64_t>(v.size())}), ms::int64);
  std::memcpy(t.data<std::int64_t>(), v.data(), v.size() * sizeof(std::int64_t));
  return t;
}
I64s values(const ms::Tensor& t) {
  return ms::cast(t, ms::int64).contiguous().to_vector<I64s::value_type>();
}

/// The message of the ValueError loading `m` raises.
std::string load_error(const Model& m) {
  return ms_onnx_test::error_of<ms::ValueError>([&] { ms::GraphCell g(m.bytes(), "<test>"); });
}

/// Same shape and values.
bool same(const ms::Tensor& a, const ms::Tensor& b) {
  return a.shape() == b.shape() && ms::allclose(a, b, 0, 0);
}

/// The message of the error of class E that running `cell` on `in` raises.
template <class E, class Cell>
std::string run_error(Cell& cell, const std::vector<ms::Tensor>& in) {
  return ms_onnx_test::error_of<E>([&] { cell(in); });
}

using ms_onnx_test::has;

/// y = Div(a, b), int64 or int32 vectors of 4.
Model div_model(int elem) {
  Model m;
  m.input("a", elem, {4});
  m.input("b", elem, {4});
  m.node("Div", {"a", "b"}, {"y"});
  m.output("y", elem, {4});
  return m;
}

}  // namespace

TEST_CASE(
    "GraphCell: integer Div truncates toward zero, exactly, and a zero divisor names the node") {
  ms::GraphCell g(div_model(TensorProto::INT64).bytes(), "<div>");
  const I64s big = {16777217, -7, 7, (std::int64_t{1} << 62) + 1};
  const std::vector<ms::Tensor> y = g(std::vector<ms::Tensor>{ints(big), ints({1, 2, -2, 1})});
  CHECK(y[0].dtype() == ms::int64);
  CHECK(values(y[0]) == I64s{16777217, -3, -3, (std::int64_t{1} << 62) + 1});
  ms::GraphCell g32(div_model(TensorProto::INT32).bytes(), "<div32>");
  const auto a32 = ms::cast(ints({-9, 9, 2147483647, 5}), ms::int32);
  const auto y32 = g32(std::vector<ms::Tensor>{a32, ms::cast(ints({4, -4, 1, 5}), ms::int32)});
  CHECK(y32[0].dtype() == ms::int32);
  CHECK(values(y32[0]) == I64s{-2, -2, 2147483647, 1});
  CHECK(has(run_error<ms::ValueError>(g, {ints({1, 2, 3, 4}), ints({1, 0, 1, 1})}),
            "GraphCell: node 'y' (Div): integer division by zero (the divisor holds a 0)"));
  CHECK(has(run_error<ms::ValueError>(g, {ints({INT64_MIN, 2, 3, 4}), ints({-1, 1, 1, 1})}),
            "GraphCell: node 'y' (Div): -9223372036854775808 / -1 overflows int64"));
  // Under ms::jit, integers computed from the inputs are not concrete: an error, not float math.
  ms::GraphCell gv(div_model(TensorProto::INT64).bytes(), "<div>", {.set_inputs = false});
  auto f = ms::jit(gv);
  CHECK(has(run_error<ms::ValueError>(f, {ints(big), ints({1, 2, -2, 1})}),
            "node 'y' (Div): integer division of values computed from the graph inputs"));
  // So is ms::grad's trace, which the message names.
  Model m;
  m.input("x", TensorProto::FLOAT, {4});
  m.input("n", TensorProto::INT64, {4});
  TensorProto* two = m.init("two", TensorProto::INT64, {4});
  for (int i = 0; i < 4; ++i) two->add_int64_data(2);
  m.node("Div", {"n", "two"}, {"h"});
  attr_i(m.node("Cast", {"h"}, {"hf"}), "to", TensorProto::FLOAT);
  m.node("Mul", {"x", "hf"}, {"y"});
  m.output("y", TensorProto::FLOAT, {4});
  ms::GraphCell gm(m.bytes(), "<div-grad>");
  const ms::Tensor n = ints({3, 4, 5, 6});
  auto loss = [&](const ms::Tensor& x) { return ms::sum(gm(std::vector<ms::Tensor>{x, n})[0]); };
  CHECK(values(loss(ms::ones({4}))) == I64s{8});  // 1 + 2 + 2 + 3: truncated
  CHECK_THROWS_WITH_AS(ms::grad(loss)(ms::ones({4})),
                       doctest::Contains("while ms::jit or ms::grad traces the model"),
                       ms::ValueError);
}

TEST_CASE("GraphCell errors: a Reshape target whose sizes multiply past int64") {
  // 274177 * 67280421310721 = 2^64 + 1: wrapped, the product would be 1 and
  // the -1 dim would be inferred as the input's size.
  Model m;
  m.input("x", TensorProto::FLOAT, {2, 3});
  m.ints_input("t", {-1, 274177, 67280421310721});
  m.node("Reshape", {"x", "t"}, {"y"});
  m.output("y", TensorProto::FLOAT, {-1, -1, -1});
  ms::GraphCell g(m.bytes(), "<reshape>");
  CHECK(has(run_error<ms::ShapeError>(g, {ms::ones({2, 3})}),
            "GraphCell: node 'y' (Reshape): the target's sizes multiply past int64 at dim 2"));
}

TEST_CASE("GraphCell errors: a stride, dilation, window or group below 1 names the node") {
  // ONNX's shape inference divides by the strides before it checks them.
  const auto conv = [](const char* name, const I64s& v) {
    Model m;
    m.input("x", TensorProto::FLOAT, {-1, 2, 9, 9});
    TensorProto* w = m.init("w", TensorProto::FLOAT, {4, 1, 3, 3});
    for (int i = 0; i < 36; ++i) w->add_float_data(0.5f);
    NodeProto* n = m.node("Conv", {"x", "w"}, {"y"});
    attr_i(n, "group", std::string(name) == "group" ? v[0] : 2);
    if (std::string(name) != "group") attr_ints(n, name, v);
    m.output("y", TensorProto::FLOAT, {-1, 4, -1, -1});
    return m;
  };
  CHECK(has(load_error(conv("strides", {0, 2})),
            "GraphCell: node 'y' (Conv): every value of attribute strides must be at least 1, "
            "got 0"));
  CHECK(has(load_error(conv("dilations", {1, -1})), "attribute dilations must be at least 1"));
  CHECK(has(load_error(conv("kernel_shape", {3, 0})), "attribute kernel_shape must be at least 1"));
  CHECK(has(load_error(conv("group", {0})),
            "GraphCell: node 'y' (Conv): attribute group must be at least 1, got 0"));
  // The same model with valid attributes loads and runs.
  ms::GraphCell g(conv("strides", {2, 2}).bytes(), "<conv>");
  CHECK(g(ms::ones({1, 2, 9, 9})).shape() == ms::Shape{1, 4, 4, 4});

  Model p;
  p.input("x", TensorProto::FLOAT, {1, 1, 4, 4});
  attr_ints(p.node("MaxPool", {"x"}, {"y"}), "kernel_shape", {2, 2});
  attr_ints(p.g->mutable_node(0), "strides", {2, 0});
  p.output("y", TensorProto::FLOAT, {1, 1, -1, -1});
  CHECK(has(load_error(p), "node 'y' (MaxPool): every value of attribute strides"));
}

TEST_CASE("GraphCell errors: a graph input whose declared dims multiply past 2^40") {
  // ONNX's shape inference multiplies known dims in int64 (a Reshape's -1).
  Model m;
  const std::int64_t big = std::int64_t{1} << 31;
  m.input("x", TensorProto::FLOAT, {big, big, -1});
  m.node("Relu", {"x"}, {"y"});
  m.output("y", TensorProto::FLOAT, {-1, -1, -1});
  CHECK(has(load_error(m), "graph input 'x' has more than 2^40 elements"));
}

TEST_CASE("GraphCell: BOOL initializers with bytes other than 0 and 1 load as true") {
  for (bool raw : {true, false}) {
    CAPTURE(raw);
    Model m;
    TensorProto* b = m.init("b", TensorProto::BOOL, {4});
    if (raw)
      b->set_raw_data(std::string("\x00\x02\x01\xff", 4));
    else
      for (int v : {0, 2, 1, 256}) b->add_int32_data(v);
    m.node("Identity", {"b"}, {"y"});
    m.output("y", TensorProto::BOOL, {4});
    ms::GraphCell g(m.bytes(), "<bool>");
    const ms::Tensor y = g(std::vector<ms::Tensor>{})[0].contiguous();
    REQUIRE(y.dtype() == ms::bool_);
    std::vector<unsigned char> bytes(4);
    std::memcpy(bytes.data(), y.raw_data(), 4);
    CHECK(bytes == std::vector<unsigned char>{0, 1, 1, 1});
  }
}

TEST_CASE("GraphCell: Trilu's k: absent is 0, empty is a ValueError naming the node") {
  Model m;
  m.input("x", TensorProto::FLOAT, {3, 3});
  m.ints_input("k", {});
  m.node("Trilu", {"x", ""}, {"u"});
  m.node("Trilu", {"x", "k"}, {"y"});
  m.output("u", TensorProto::FLOAT, {3, 3});
  m.output("y", TensorProto::FLOAT, {3, 3});
  ms::GraphCell g(m.bytes(), "<trilu>");
  CHECK(has(run_error<ms::ValueError>(g, {ms::ones({3, 3})}),
            "GraphCell: node 'y' (Trilu): input 1 (k) must hold one value, it holds 0"));
  m.g->mutable_node(1)->set_input(1, "");
  ms::GraphCell g0(m.bytes(), "<trilu>");
  const ms::Tensor x = ms::normal({3, 3});
  const auto out = g0(std::vector<ms::Tensor>{x});
  CHECK(same(out[0], ms::triu(x)));
  CHECK(same(out[1], ms::triu(x)));
}

TEST_CASE("GraphCell: Split into given sizes or equal parts, and its errors") {
  Model m;
  m.input("x", TensorProto::FLOAT, {-1, 6});
  m.ints_input("s", {1, 5});
  attr_i(m.node("Split", {"x", "s"}, {"a", "b"}), "axis", 1);
  m.node("Split", {"x"}, {"c", "d"});  // axis 0, equal parts
  for (const char* o : {"a", "b", "c", "d"}) m.output(o, TensorProto::FLOAT, {-1, -1});
  ms::GraphCell g(m.bytes(), "<split>");
  ms::GraphCell gv(m.bytes(), "<split>", {.set_inputs = false});  // the vector form under jit
  const ms::Tensor x = ms::normal({4, 6});
  auto f = ms::jit(gv);
  for (const auto& out : {g(std::vector<ms::Tensor>{x}), f(std::vector<ms::Tensor>{x})}) {
    REQUIRE(out.size() == 4);
    CHECK(same(out[0], x.slice(1, 0, 1, 1)));
    CHECK(same(out[1], x.slice(1, 1, 6, 1)));
    CHECK(same(out[2], x.slice(0, 0, 2, 1)));
    CHECK(same(out[3], x.slice(0, 2, 4, 1)));
  }
  CHECK(has(run_error<ms::ValueError>(g, {ms::ones({3, 6})}),
            "GraphCell: node 'c' (Split): axis 0 has size 3, which does not split into 2 equal"));
  // Sizes that do not add up: ONNX's shape inference sees it when the dim is
  // known, GraphCell when it is not.
  m.g->mutable_initializer(0)->set_int64_data(1, 4);
  CHECK(has(load_error(m), "Mismatch between the sum of 'split' (5)"));
  m.g->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(1)
      ->Clear();
  ms::GraphCell bad(m.bytes(), "<split>");
  CHECK(has(run_error<ms::ValueError>(bad, {ms::ones({2, 6})}),
            "GraphCell: node 'a' (Split): the split sizes add up to 5, axis 1 has size 6"));
}

TEST_CASE("GraphCell: ConstantOfShape fills a computed shape; a negative size names the node") {
  Model m;
  m.input("x", TensorProto::FLOAT, {-1, 2});
  m.ints_input("s", {2, 3});
  NodeProto* n = m.node("ConstantOfShape", {"s"}, {"y"});
  auto* v = n->add_attribute();
  v->set_name("value");
  v->set_type(::onnx::AttributeProto::TENSOR);
  v->mutable_t()->set_data_type(TensorProto::INT32);
  v->mutable_t()->add_dims(1);
  v->mutable_t()->add_int32_data(7);
  m.node("Shape", {"x"}, {"sx"});
  m.node("ConstantOfShape", {"sx"}, {"z"});  // float zeros of x's shape
  m.output("y", TensorProto::INT32, {-1, -1});
  m.output("z", TensorProto::FLOAT, {-1, -1});
  ms::GraphCell g(m.bytes(), "<cos>");
  const auto out = g(std::vector<ms::Tensor>{ms::ones({4, 2})});
  CHECK(out[0].dtype() == ms::int32);
  CHECK(values(out[0]) == I64s{7, 7, 7, 7, 7, 7});
  CHECK(out[0].shape() == ms::Shape({2, 3}));
  CHECK(same(out[1], ms::zeros({4, 2})));
  m.g->mutable_initializer(0)->set_int64_data(1, -3);
  ms::GraphCell bad(m.bytes(), "<cos>");
  CHECK(has(run_error<ms::ValueError>(bad, {ms::ones({4, 2})}),
            "GraphCell: node 'y' (ConstantOfShape): the shape (input 0) has a negative size -3"));
}

TEST_CASE(
    "GraphCell: CumSum inclusive and exclusive-reverse; an axis past the rank names the node") {
  Model m;
  m.input("x", TensorProto::FLOAT, {2, 4});
  m.init("axis", TensorProto::INT64, {})->add_int64_data(1);
  m.node("CumSum", {"x", "axis"}, {"y"});
  NodeProto* ex = m.node("CumSum", {"x", "axis"}, {"z"});
  attr_i(ex, "exclusive", 1);
  attr_i(ex, "reverse", 1);
  m.output("y", TensorProto::FLOAT, {2, 4});
  m.output("z", TensorProto::FLOAT, {2, 4});
  ms::GraphCell g(m.bytes(), "<cumsum>");
  const ms::Tensor x = ms::cast(ms::arange(1, 9).reshape({2, 4}), ms::float32);
  const auto out = g(std::vector<ms::Tensor>{x});
  CHECK(values(out[0]) == I64s{1, 3, 6, 10, 5, 11, 18, 26});
  CHECK(values(out[1]) == I64s{9, 7, 4, 0, 21, 15, 8, 0});
  // Exclusive sums leave each element out, not subtract it: an inf or a huge
  // element does not spoil its own slot.
  const float inf = std::numeric_limits<float>::infinity();
  const ms::Tensor big = ms::tensor({{1.f, inf, 1e20f, 1.f}, {1.f, 1e20f, 1.f, 1.f}});
  const std::vector<float> z = g(std::vector<ms::Tensor>{big})[1].contiguous().to_vector<float>();
  CHECK(z == std::vector<float>{inf, 1e20f + 1.f, 1.f, 0.f, 1e20f + 2.f, 2.f, 1.f, 0.f});
  m.g->mutable_initializer(0)->set_int64_data(0, 2);
  ms::GraphCell bad(m.bytes(), "<cumsum>");
  CHECK(has(run_error<ms::ValueError>(bad, {x}),
            "GraphCell: node 'y' (CumSum): axis 2 is out of range for rank 2"));
}
