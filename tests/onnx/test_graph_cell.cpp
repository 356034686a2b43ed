// ms::GraphCell: models exported by ms::onnx::export_model loaded back and run
// eagerly and under ms::jit at two batch sizes, gradients through the loaded
// model, its parameters saved as safetensors; hand-built malformed models for
// each error; models written by python3's onnx helper (an independent
// producer) with NumPy's results.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "../../src/onnx/graph_program.hpp"
#include "ms/autodiff/grad.hpp"
#include "ms/cell.hpp"
#include "ms/io/npy.hpp"
#include "ms/io/safetensors.hpp"
#include "ms/onnx/export.hpp"
#include "ms/onnx/graph_cell.hpp"
#include "ms/ops/random.hpp"
#include "onnx/onnx_test_models.hpp"
#include "temp_dir.hpp"

namespace {

using MLP = ms_onnx_test::Mlp<32>;
using ms_onnx_test::CNN;

// A transformer encoder's pieces: embedding, layer norm, causal attention
// scores, softmax, gelu, a residual, slicing, concatenation, reductions.
struct Encoder : ms::Cell<Encoder> {
  ms::nn::Embedding emb{50, 8};
  ms::nn::LayerNorm ln{{8}};
  ms::nn::Dense q{8, 8}, k{8, 8}, ff{8, 8};
  Encoder() { register_cells("emb", emb, "ln", ln, "q", q, "k", k, "ff", ff); }
  ms::Tensor construct(const ms::Tensor& ids) {
    const ms::Tensor x = ln(emb(ids));
    ms::Tensor s = ms::matmul(q(x), k(x).transpose(1, 2)) * (1.0 / std::sqrt(8.0));
    const std::int64_t t = ids.dim(1);
    const ms::Tensor causal = ms::triu(ms::ones({t, t}, ms::bool_), {.diagonal = 1});
    s = ms::softmax(ms::masked_fill(s, causal, -1e9), -1);
    ms::Tensor h = x + ms::gelu(ff(ms::matmul(s, x)));
    h = ms::concat({h.slice(2, 0, 4), ms::tanh(h.slice(2, 4, 8))}, 2);
    return ms::var(h, {2}, 1) + ms::sigmoid(ms::mean(h, {2})) + ms::sum(ms::exp(-ms::abs(h)), {2});
  }
};

using ms_onnx_test::max_rel_diff;

// Every parameter of `net` is a parameter of `g` with the same name and value.
template <class Net>
void check_names(Net& net, ms::GraphCell& g) {
  const ms::StateDict gs = g.state_dict();
  for (const auto& [name, p] : net.parameters_and_names()) {
    INFO(name);
    REQUIRE(gs.contains(name));
    CHECK(max_rel_diff(gs.at(name), p) == 0);
  }
}

// Exports `net` (batch dim 0 symbolic), loads it, and compares eager and jit
// outputs at the two batch sizes.
template <class Net>
void round_trip(Net& net, const std::vector<ms::Tensor>& xs, int opset) {
  ms::test::TempDir dir("ms_graph_cell");
  const std::string path = dir.file("m.onnx");
  ms::onnx::export_model(net, xs[0], path,
                         {.input_names = {"x"},
                          .output_names = {"y"},
                          .opset_version = opset,
                          .dynamic_axes = {{"x", {{0, "batch"}}}, {"y", {{0, "batch"}}}}});
  ms::GraphCell g(path);
  CHECK(g.opset() == opset);
  CHECK(g.input_names() == std::vector<std::string>{"x"});
  CHECK(g.output_names() == std::vector<std::string>{"y"});
  REQUIRE(g.get_inputs().size() == 1);
  CHECK(g.get_inputs()[0].shape[0].is_named());
  check_names(net, g);
  auto jg = ms::jit(g);
  for (const ms::Tensor& x : xs) {
    INFO(x.shape());
    const ms::Tensor want = net(x);
    CHECK(max_rel_diff(g(x), want) < 1e-6);
    CHECK(max_rel_diff(jg(x), want) < 1e-6);
  }
  CHECK(jg.compile_count() == 1);  // the batch dim is dynamic: one graph for both sizes
}

}  // namespace

TEST_CASE("GraphCell: the exported MLP runs as the original, eagerly and under jit") {
  ms::manual_seed(1);
  MLP net;
  for (int opset : {13, 17}) {
    CAPTURE(opset);
    round_trip(net, {ms::normal({2, 784}), ms::normal({5, 784})}, opset);
  }
}

TEST_CASE("GraphCell: the exported CNN (conv, pool, batch norm) runs as the original") {
  ms::manual_seed(2);
  CNN net;
  net.set_train(false);
  ms::assign(net.bn.moving_mean, ms::normal({8}) * 0.1f);
  ms::assign(net.bn.moving_variance, ms::uniform({8}) + 0.5f);
  for (int opset : {13, 17}) {
    CAPTURE(opset);
    round_trip(net, {ms::normal({2, 1, 28, 28}), ms::normal({3, 1, 28, 28})}, opset);
  }
}

TEST_CASE("GraphCell: the exported transformer block runs as the original") {
  ms::manual_seed(3);
  Encoder net;
  const ms::Tensor a = ms::tensor({{1, 2, 3, 4}, {5, 6, 7, 8}}).to(ms::int64);
  const ms::Tensor b = ms::tensor({{9, 8, 7, 6}, {5, 4, 3, 2}, {0, 1, 0, 1}}).to(ms::int64);
  for (int opset : {13, 17}) {
    CAPTURE(opset);
    round_trip(net, {a, b}, opset);
  }
}

TEST_CASE("GraphCell: ms::grad through the loaded MLP matches the original's gradients") {
  ms::manual_seed(4);
  MLP net;
  ms::test::TempDir dir("ms_graph_cell");
  const std::string path = dir.file("mlp.onnx");
  const ms::Tensor x = ms::normal({4, 784});
  const ms::Tensor labels = ms::tensor({1, 3, 5, 7}).to(ms::int32);
  ms::onnx::export_model(net, x, path);
  ms::GraphCell g(path);
  auto grads_of = [&](auto& cell, const ms::ParameterList& params) {
    auto loss = [&](const ms::Tensor& in) {
      return ms::mean(ms::softmax_cross_entropy(cell(in), labels));
    };
    return ms::grad(loss, {.position = std::nullopt, .weights = params})(x);
  };
  ms::ParameterList gp;
  for (const auto& [name, p] : net.parameters_and_names()) gp.push_back(g.get_parameter(name));
  const auto want = grads_of(net, net.trainable_params());
  const auto got = grads_of(g, gp);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(gp[i].name());
    CHECK(max_rel_diff(got[i], want[i]) < 1e-5);
  }
  // Under jit too.
  auto jloss = ms::jit(ms::grad(
      [&](const ms::Tensor& in) { return ms::mean(ms::softmax_cross_entropy(g(in), labels)); },
      {.position = std::nullopt, .weights = gp}));
  const auto jgot = jloss(x);
  for (std::size_t i = 0; i < jgot.size(); ++i) CHECK(max_rel_diff(jgot[i], want[i]) < 1e-5);
}

TEST_CASE("GraphCell: its parameters save as safetensors and load back") {
  ms::manual_seed(5);
  MLP net;
  ms::test::TempDir dir("ms_graph_cell");
  const std::string path = dir.file("mlp.onnx");
  const ms::Tensor x = ms::normal({3, 784});
  ms::onnx::export_model(net, x, path);
  ms::GraphCell g(path);
  const ms::Tensor before = g(x);
  ms::io::save_safetensors(dir.file("g.safetensors"), g.state_dict());
  // The file's names are the original model's; the original loads it too.
  const ms::io::SafetensorsFile f = ms::io::load_safetensors(dir.file("g.safetensors"));
  CHECK(f.contains("fc1.weight"));
  CHECK(f.contains("fc2.bias"));
  ms::assign(g.get_parameter("fc1.weight"), ms::zeros({32, 784}));
  CHECK(max_rel_diff(g(x), before) > 1e-3);
  g.load_state_dict(f.tensors);
  CHECK(max_rel_diff(g(x), before) == 0);
  MLP other;
  other.load_state_dict(f.tensors, /*strict=*/false);
  CHECK(max_rel_diff(other(x), before) < 1e-6);
}

TEST_CASE("GraphCell: the interpreter implements every op the loader accepts") {
  auto loaded = ms::onnx::detail::supported_ops();
  std::sort(loaded.begin(), loaded.end());
  CHECK(loaded == ms::onnx::detail::implemented_ops());
}

namespace {

using ::onnx::ModelProto;
using ::onnx::TensorProto;

// A valid model: y = Relu(x + b), x float [N, 3] (N a dim_param), b an initializer [3].
ModelProto tiny(int opset = 17) {
  ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("tiny");
  auto* x = g->add_input();
  x->set_name("x");
  auto* tt = x->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("N");
  tt->mutable_shape()->add_dim()->set_dim_value(3);
  auto* b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(TensorProto::FLOAT);
  b->add_dims(3);
  for (float v : {1.f, -2.f, 0.5f}) b->add_float_data(v);
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add");
  add->add_input("x");
  add->add_input("b");
  add->add_output("s");
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->add_input("s");
  relu->add_output("y");
  auto* y = g->add_output();
  y->set_name("y");
  auto* yt = y->mutable_type()->mutable_tensor_type();
  yt->set_elem_type(TensorProto::FLOAT);
  yt->mutable_shape()->add_dim()->set_dim_param("N");
  yt->mutable_shape()->add_dim()->set_dim_value(3);
  return m;
}

using ms_onnx_test::bytes_of;

// The message of the error loading `m` raises, which must be of class E.
template <class E>
std::string load_error(const std::string& bytes) {
  return ms_onnx_test::error_of<E>([&] { ms::GraphCell g(bytes, "<test>"); });
}

using ms_onnx_test::has;

}  // namespace

TEST_CASE("GraphCell: the hand-built model loads and runs; its dim_param is a named dim") {
  ms::GraphCell g(bytes_of(tiny()), "<tiny>");
  CHECK(g.get_inputs()[0].shape[0].name() == "N");
  const ms::Tensor x = ms::tensor({{-1.f, 1.f, 0.f}, {0.f, 3.f, -1.f}});
  CHECK(max_rel_diff(g(x), ms::tensor({{0.f, 0.f, 0.5f}, {1.f, 1.f, 0.f}})) == 0);
  CHECK(g.get_parameter("b").shape() == ms::Shape({3}));
}

TEST_CASE("GraphCell errors: bytes that are not a ModelProto") {
  CHECK(has(load_error<ms::ValueError>("\xff\xff\xff not a model"), "does not parse"));
  CHECK(has(load_error<ms::ValueError>(bytes_of(tiny()).substr(0, 20)), "GraphCell"));
}

TEST_CASE("GraphCell errors: unknown op, other domain, unsupported opset") {
  ModelProto m = tiny();
  m.mutable_graph()->mutable_node(1)->set_op_type("FancyRelu");
  const std::string e = load_error<ms::ValueError>(bytes_of(m));
  CHECK(has(e, "node 'relu' (FancyRelu)"));
  CHECK(has(e, "no ms mapping"));
  m = tiny();
  m.mutable_graph()->mutable_node(1)->set_domain("com.example");
  CHECK(has(load_error<ms::ValueError>(bytes_of(m)), "domain 'com.example'"));
  CHECK(has(load_error<ms::ValueError>(bytes_of(tiny(9))), "opset 9"));
  CHECK(has(load_error<ms::ValueError>(bytes_of(tiny(18))), "opsets 13 to 17"));
}

TEST_CASE("GraphCell errors: a missing initializer or input, a value defined twice") {
  ModelProto m = tiny();
  m.mutable_graph()->clear_initializer();
  const std::string e = load_error<ms::ValueError>(bytes_of(m));
  CHECK(has(e, "node 'add' (Add) reads 'b'"));
  m = tiny();
  m.mutable_graph()->mutable_output(0)->set_name("z");
  CHECK(has(load_error<ms::ValueError>(bytes_of(m)), "graph output reads 'z'"));
  m = tiny();
  m.mutable_graph()->mutable_node(1)->set_output(0, "s");
  CHECK(has(load_error<ms::ValueError>(bytes_of(m)), "'s', which is already defined"));
}

TEST_CASE("GraphCell errors: a cycle") {
  ModelProto m = tiny();
  // add reads y (relu's output) instead of x: add -> s -> relu -> y -> add.
  m.mutable_graph()->mutable_node(0)->set_input(0, "y");
  CHECK(has(load_error<ms::ValueError>(bytes_of(m)), "is on a cycle"));
}

TEST_CASE("GraphCell errors: external data in bytes loaded without a directory") {
  ModelProto m = tiny();
  TensorProto* b = m.mutable_graph()->mutable_initializer(0);
  b->clear_float_data();
  b->set_data_location(TensorProto::EXTERNAL);
  auto* loc = b->add_external_data();
  loc->set_key("location");
  loc->set_value("../../etc/passwd");
  const std::string e = load_error<ms::ValueError>(bytes_of(m));
  CHECK(has(e, "initializer 'b'"));
  CHECK(has(e, "external file"));
}

TEST_CASE("GraphCell errors: sizes that overflow or do not match the data") {
  ModelProto m = tiny();
  TensorProto* b = m.mutable_graph()->mutable_initializer(0);
  b->clear_dims();
  for (int i = 0; i < 3; ++i) b->add_dims(std::int64_t{1} << 30);
  CHECK(has(load_error<ms::ValueError>(bytes_of(m)), "overflow"));
  b->clear_dims();
  b->add_dims(-3);
  CHECK(has(load_error<ms::ValueError>(bytes_of(m)), "negative dim"));
  b->clear_dims();
  b->add_dims(4);
  CHECK(has(load_error<ms::ValueError>(bytes_of(m)), "holds 3 values, its dims say 4"));
  b->clear_float_data();
  b->set_raw_data(std::string(7, '\0'));
  CHECK(has(load_error<ms::ValueError>(bytes_of(m)), "7 bytes of raw data"));
}

TEST_CASE("GraphCell errors: ONNX's checker and shape inference") {
  ModelProto m = tiny();
  m.clear_ir_version();
  CHECK(has(load_error<ms::ValueError>(bytes_of(m)), "ONNX's checker rejects <test>"));
  m = tiny();
  // b of shape [4] does not broadcast with x's [N, 3]: strict shape inference says so.
  TensorProto* b = m.mutable_graph()->mutable_initializer(0);
  b->set_dims(0, 4);
  b->add_float_data(0.f);
  CHECK(has(load_error<ms::ValueError>(bytes_of(m)), "shape inference rejects"));
}

TEST_CASE("GraphCell errors: a tensor that does not fit the declared input") {
  ms::GraphCell g(bytes_of(tiny()), "<tiny>");
  auto call_error = [&](auto&& call) -> std::string {
    try {
      call();
    } catch (const ms::Error& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK_THROWS_AS(g(ms::ones({2, 4})), ms::ShapeError);
  CHECK(has(call_error([&] { g(ms::ones({2, 4})); }), "declared with size 3 at axis 1"));
  CHECK_THROWS_AS(g(ms::ones({3})), ms::ShapeError);
  CHECK_THROWS_AS(g(ms::ones({2, 3}, ms::float64)), ms::TypeError);
  CHECK(has(call_error([&] {
              g(ms::ones({2, 3}, ms::float64));
            }),
            "declared Float32, given Float64"));
  CHECK_THROWS_AS(g(ms::ones({2, 3}), ms::ones({2, 3})), ms::ValueError);
  CHECK(has(call_error([&] { g(std::vector<ms::Tensor>{}); }), "takes 1 inputs, given 0"));
}

TEST_CASE("GraphCell errors: an attribute ms cannot express names the node") {
  ModelProto m = tiny();
  auto* g = m.mutable_graph();
  auto* sm = g->mutable_node(1);
  sm->set_op_type("ArgMax");
  auto* a = sm->add_attribute();
  a->set_name("select_last_index");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(1);
  auto* yt = g->mutable_output(0)->mutable_type()->mutable_tensor_type();
  yt->set_elem_type(TensorProto::INT64);
  yt->mutable_shape()->mutable_dim(0)->set_dim_value(1);  // axis 0 kept
  ms::GraphCell cell(bytes_of(m), "<argmax>");
  try {
    cell(ms::ones({2, 3}));
    FAIL("no error");
  } catch (const ms::ValueError& e) {
    CHECK(has(e.what(), "GraphCell: node 'relu' (ArgMax): select_last_index 1"));
  }
}

TEST_CASE("GraphCell: models written by python3's onnx helper give NumPy's results") {
  const std::string py = ms_onnx_test::python_with_onnx();
  if (py.empty()) {
    MESSAGE("skipped: no python3 with onnx and numpy (apt-get install python3-onnx)");
    return;
  }
  ms::test::TempDir dir("ms_graph_cell_py");
  const std::string cmd = py + " " + MS_SOURCE_ROOT + "/tests/onnx/graph_cell_fixtures.py " +
                          dir.file("") + " > " + dir.file("log.txt") + " 2>&1";
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, cmd);
  std::ifstream manifest(dir.file("manifest.txt"));
  std::string name;
  std::size_t n_in = 0, n_out = 0;
  int models = 0;
  while (manifest >> name >> n_in >> n_out) {
    INFO(name);
    ++models;
    ms::GraphCell g(dir.file(name + ".onnx"));
    std::vector<ms::Tensor> in;
    for (std::size_t i = 0; i < n_in; ++i)
      in.push_back(ms::io::load_npy(dir.file(name + ".in" + std::to_string(i) + ".npy")));
    const std::vector<ms::Tensor> eager = g(in);
    // set_inputs specs describe tensor arguments: the vector form compiles
    // without them (auto-dynamic shapes).
    ms::GraphCell gv(dir.file(name + ".onnx"), {.set_inputs = false});
    CHECK(gv.get_inputs().empty());
    const std::vector<ms::Tensor> jitted = ms::jit(gv)(in);
    REQUIRE(eager.size() == n_out);
    REQUIRE(jitted.size() == n_out);
    for (std::size_t i = 0; i < n_out; ++i) {
      INFO("output " << i);
      const ms::Tensor want =
          ms::io::load_npy(dir.file(name + ".out" + std::to_string(i) + ".npy"));
      CHECK(max_rel_diff(eager[i], want) < 1e-5);
      CHECK(max_rel_diff(jitted[i], want) < 1e-5);
    }
  }
  CHECK(models == 4);
}

TEST_CASE("GraphCell: a reshape target computed with Shape follows a dynamic batch under jit") {
  // y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0), [0]), [-1])), x [N, 2, 3].
  ModelProto m = tiny();
  auto* g = m.mutable_graph();
  g->clear_node();
  g->clear_initializer();
  auto* in_shape = g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  in_shape->add_dim();
  in_shape->mutable_dim(1)->set_dim_value(2);
  in_shape->mutable_dim(2)->set_dim_value(3);
  auto* out_shape = g->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  out_shape->mutable_dim(1)->set_dim_value(6);
  auto ints = [&](const std::string& name, std::vector<std::int64_t> v) {
    TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::INT64);
    t->add_dims(static_cast<std::int64_t>(v.size()));
    for (std::int64_t x : v) t->add_int64_data(x);
  };
  ints("idx", {0});
  ints("minus1", {-1});
  auto node = [&](const char* op, std::vector<std::string> in, const char* out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  node("Shape", {"x"}, "shape");
  node("Gather", {"shape", "idx"}, "batch");
  auto* cat = node("Concat", {"batch", "minus1"}, "target");
  auto* axis = cat->add_attribute();
  axis->set_name("axis");
  axis->set_type(::onnx::AttributeProto::INT);
  axis->set_i(0);
  node("Reshape", {"x", "target"}, "y");
  ms::GraphCell cell(bytes_of(m), "<reshape>");
  auto f = ms::jit(cell);
  for (std::int64_t n : {2, 5, 3}) {
    const ms::Tensor x = ms::normal({n, 2, 3});
    CHECK(max_rel_diff(f(x), x.reshape({n, 6})) == 0);
    CHECK(max_rel_diff(cell(x), x.reshape({n, 6})) == 0);
  }
  CHECK(f.compile_count() == 1);  // one generalized graph: the folded target follows N
}

TEST_CASE("GraphCell: the loaded CNN fine-tunes: conv gradients match, SGD steps lower the loss") {
  ms::manual_seed(6);
  CNN net;
  net.set_train(false);
  ms::test::TempDir dir("ms_graph_cell");
  const std::string path = dir.file("cnn.onnx");
  const ms::Tensor x = ms::normal({4, 1, 28, 28});
  const ms::Tensor labels = ms::tensor({0, 2, 4, 6}).to(ms::int32);
  ms::onnx::export_model(net, x, path);
  ms::GraphCell g(path);
  auto loss_of = [&](auto& cell) {
    return
        [&](const ms::Tensor& in) { return ms::mean(ms::softmax_cross_entropy(cell(in), labels)); };
  };
  // The original's trainable parameters, and the GraphCell's of the same names.
  ms::ParameterList np, gp;
  for (const auto& [name, p] : net.parameters_and_names()) {
    np.push_back(p);
    gp.push_back(g.get_parameter(name));
  }
  const auto want = ms::grad(loss_of(net), {.position = std::nullopt, .weights = np})(x);
  const auto got = ms::grad(loss_of(g), {.position = std::nullopt, .weights = gp})(x);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(gp[i].name());
    CHECK(max_rel_diff(got[i], want[i]) < 1e-5);
  }
  // A compiled training step on the GraphCell's parameters.
  ms::optim::SGD opt(g.trainable_params(), {.lr = 0.05});
  auto step = ms::jit(
      ms::value_and_grad(loss_of(g), {.position = std::nullopt, .weights = g.trainable_params()}));
  const double first = loss_of(g)(x).item<double>();
  for (int i = 0; i < 5; ++i) {
    auto [loss, grads] = step(x);
    opt(grads);
  }
  CHECK(loss_of(g)(x).item<double>() < first - 1e-3);
}

TEST_CASE("GraphCell: initializers listed as inputs, and weights fed as inputs") {
  ms::manual_seed(8);
  MLP net;
  ms::test::TempDir dir("ms_graph_cell");
  const ms::Tensor x = ms::normal({2, 784});
  const ms::Tensor want = net(x);
  ms::onnx::export_model(net, x, dir.file("a.onnx"), {.keep_initializers_as_inputs = true});
  ms::GraphCell a(dir.file("a.onnx"));
  CHECK(a.input_names() == std::vector<std::string>{"input_0"});
  CHECK(max_rel_diff(a(x), want) < 1e-6);
  // Without parameters: the weights are inputs, in the exporter's order.
  ms::onnx::export_model(net, x, dir.file("b.onnx"), {.export_params = false});
  ms::GraphCell b(dir.file("b.onnx"));
  CHECK(b.parameters().empty());
  const std::vector<std::string> names = b.input_names();
  REQUIRE(names.size() == 5);
  std::vector<ms::Tensor> in;
  for (const std::string& n : names)
    in.push_back(n == "input_0" ? x : ms::Tensor(net.get_parameter(n)));
  CHECK(max_rel_diff(b(in)[0], want) < 1e-6);
  CHECK(max_rel_diff(b(in[0], in[1], in[2], in[3], in[4]), want) < 1e-6);
}

TEST_CASE(
    "GraphCell errors: the tensor form of a model with several outputs; a shape input "
    "computed from the graph's input values") {
  ModelProto m = tiny();
  auto* s = m.mutable_graph()->add_output();
  *s = m.graph().output(0);
  s->set_name("s");
  ms::GraphCell two(bytes_of(m), "<two>");
  const ms::Tensor x = ms::ones({2, 3});
  CHECK(two(std::vector<ms::Tensor>{x}).size() == 2);
  try {
    two(x);
    FAIL("no error");
  } catch (const ms::ValueError& e) {
    CHECK(has(e.what(), "the model has 2 outputs"));
  }
  // Expand(b, Cast(x)): the target depends on x's values, which ms ops take as attributes.
  m = tiny();
  auto* g = m.mutable_graph();
  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::INT64);
  auto* shp = g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shp->clear_dim();
  shp->add_dim()->set_dim_value(2);
  g->clear_node();
  auto* ex = g->add_node();
  ex->set_op_type("Expand");
  ex->set_name("expand");
  ex->add_input("b");
  ex->add_input("x");
  ex->add_output("y");
  auto* yshape = g->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  yshape->mutable_dim(0)->set_dim_param("R");
  yshape->mutable_dim(1)->set_dim_param("C");
  ms::GraphCell expand(bytes_of(m), "<expand>");
  try {
    expand(ms::tensor({2, 3}).to(ms::int64));
    FAIL("no error");
  } catch (const ms::ValueError& e) {
    CHECK(has(e.what(), "node 'expand' (Expand): input 1 ('x') must be a constant"));
  }
}
