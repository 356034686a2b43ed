// ms::onnx::export_model: models of the Fashion-MNIST examples and transformer
// pieces exported and checked by ONNX's own C++ checker and strict shape
// inference (and by python3's onnx when installed); names, opsets, dim_params,
// initializers; errors; docs/onnx_ops.md in sync with the mapping table;
// scaled_dot_product_attention and the GPT language model (symbolic batch and
// sequence) run back through GraphCell and NumPy as ms computes them.
#include <doctest/doctest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ms/cell.hpp"
#include "ms/jit/jit.hpp"
#include "ms/nn/transformer.hpp"
#include "ms/onnx/export.hpp"
#include "ms/onnx/graph_cell.hpp"
#include "ms/ops/attention.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/op.hpp"
#include "ms/ops/random.hpp"
#include "ms/ops/samples.hpp"
#include "onnx/onnx_test_models.hpp"
#include "temp_dir.hpp"

namespace {

using MLP128 = ms_onnx_test::Mlp<128>;
using ms_onnx_test::CNN;

::onnx::ModelProto load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ::onnx::ModelProto m;
  REQUIRE(m.ParseFromIstream(&in));
  return m;
}

// ONNX's full check: the checker, then shape inference with type checks, strict.
::onnx::ModelProto full_check(const std::string& path) {
  ::onnx::ModelProto m = load(path);
  CHECK_NOTHROW(::onnx::checker::check_model(m));
  CHECK_NOTHROW(::onnx::shape_inference::InferShapes(m, ::onnx::OpSchemaRegistry::Instance(),
                                                     ::onnx::ShapeInferenceOptions(true, 1)));
  return m;
}

// "N,10" / "batch,10": the dims of a value's tensor type.
std::string dims(const ::onnx::ValueInfoProto& vi) {
  std::string s;
  for (const auto& d : vi.type().tensor_type().shape().dim())
    s += (s.empty() ? "" : ",") +
         (d.has_dim_param() ? d.dim_param() : std::to_string(d.dim_value()));
  return s;
}

const ::onnx::TensorProto* initializer(const ::onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

std::set<std::string> op_types(const ::onnx::ModelProto& m) {
  std::set<std::string> s;
  for (const auto& n : m.graph().node()) s.insert(n.op_type());
  return s;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("onnx: MLP exports with named inputs, outputs, dim_params and initializers") {
  ms::test::TempDir dir("ms_onnx");
  MLP128 net;
  const std::string path = dir.file("mlp.onnx");
  ms::onnx::export_model(net, ms::zeros({2, 784}), path,
                         {.input_names = {"x"},
                          .output_names = {"logits"},
                          .dynamic_axes = {{"x", {{0, "batch"}}}, {"logits", {{0, "batch"}}}},
                          .doc_string = "Fashion-MNIST MLP"});
  const ::onnx::ModelProto m = full_check(path);
  CHECK(m.opset_import(0).version() == 17);
  CHECK(m.producer_name() == "ms");
  CHECK(m.doc_string() == "Fashion-MNIST MLP");
  REQUIRE(m.graph().input_size() == 1);
  CHECK(m.graph().input(0).name() == "x");
  CHECK(dims(m.graph().input(0)) == "batch,784");
  REQUIRE(m.graph().output_size() == 1);
  CHECK(m.graph().output(0).name() == "logits");
  CHECK(dims(m.graph().output(0)) == "batch,10");
  CHECK(m.graph().initializer_size() == 4);
  for (const auto& [name, p] : net.parameters_and_names()) {
    const ::onnx::TensorProto* t = initializer(m, name);
    REQUIRE_MESSAGE(t != nullptr, name);
    CHECK(t->data_type() == ::onnx::TensorProto::FLOAT);
    const ms::Tensor c = p.contiguous();
    REQUIRE(t->raw_data().size() == static_cast<std::size_t>(c.nbytes()));
    CHECK(std::memcmp(t->raw_data().data(), c.raw_data(), t->raw_data().size()) == 0);
  }
  CHECK(op_types(m).count("MatMul") == 1);
  CHECK(op_types(m).count("Relu") == 1);
}

TEST_CASE("onnx: CNN with set_inputs exports at opsets 13 and 17 with a symbolic batch") {
  ms::test::TempDir dir("ms_onnx");
  CNN net;
  net.set_train(false);
  net.set_inputs({ms::TensorSpec({ms::Dim("N"), 1, 28, 28}, ms::float32)});
  for (int opset : {13, 17}) {
    CAPTURE(opset);
    const std::string path = dir.file("cnn" + std::to_string(opset) + ".onnx");
    ms::onnx::export_model(net, ms::ones({3, 1, 28, 28}), path, {.opset_version = opset});
    const ::onnx::ModelProto m = full_check(path);
    CHECK(m.opset_import(0).version() == opset);
    CHECK(m.graph().input(0).name() == "input_0");
    CHECK(dims(m.graph().input(0)) == "N,1,28,28");
    CHECK(dims(m.graph().output(0)) == "N,10");
    const std::set<std::string> ops = op_types(m);
    for (const char* op : {"Conv", "MaxPool", "Reshape", "LogSoftmax"})
      CHECK_MESSAGE(ops.count(op), op);
    CHECK(initializer(m, "conv1.weight") != nullptr);
    CHECK(initializer(m, "bn.moving_mean") != nullptr);
    // The flatten's target keeps the batch symbolic: Reshape(h, [0, -1]) (the
    // other reshapes are batch norm's parameters to [1, 8, 1, 1]).
    std::vector<std::vector<std::int64_t>> targets;
    for (const auto& n : m.graph().node())
      if (n.op_type() == "Reshape") {
        const ::onnx::TensorProto* t = initializer(m, n.input(1));
        REQUIRE(t != nullptr);
        std::vector<std::int64_t> v(t->raw_data().size() / 8);
        std::memcpy(v.data(), t->raw_data().data(), t->raw_data().size());
        targets.push_back(v);
      }
    CHECK(std::count(targets.begin(), targets.end(), std::vector<std::int64_t>{0, -1}) == 1);
    CHECK(std::count(targets.begin(), targets.end(), std::vector<std::int64_t>{1, 8, 1, 1}) ==
          static_cast<std::ptrdiff_t>(targets.size() - 1));
  }
}

namespace {

// A transformer block's pieces: embedding, layer norm, attention scores with a
// causal mask, softmax, gelu, a residual, slicing and concatenation.
struct Block : ms::Cell<Block> {
  ms::nn::Embedding emb{50, 8};
  ms::nn::LayerNorm ln{{8}};
  ms::nn::Dense q{8, 8}, k{8, 8}, ff{8, 8};
  Block() { register_cells("emb", emb, "ln", ln, "q", q, "k", k, "ff", ff); }
  ms::Tensor construct(const ms::Tensor& ids) {
    const ms::Tensor x = ln(emb(ids));  // [B, T, 8]
    ms::Tensor s = ms::matmul(q(x), k(x).transpose(1, 2)) * (1.0 / std::sqrt(8.0));
    const std::int64_t t = ids.dim(1);
    const ms::Tensor causal = ms::triu(ms::ones({t, t}, ms::bool_), {.diagonal = 1});
    s = ms::softmax(ms::masked_fill(s, causal, -1e9), -1);
    ms::Tensor h = x + ms::gelu(ff(ms::matmul(s, x)));
    h = ms::concat({h.slice(2, 0, 4), ms::tanh(h.slice(2, 4, 8))}, 2);
    const ms::Tensor soft = ms::sqrt(ms::exp(-ms::abs(h)));
    return ms::var(h, {2}, 1) + ms::sigmoid(ms::mean(h, {2})) + ms::sum(soft, {2});
  }
};

}  // namespace

TEST_CASE("onnx: transformer pieces pass ONNX's full check at opsets 13 and 17") {
  ms::test::TempDir dir("ms_onnx");
  Block net;
  const ms::Tensor ids = ms::tensor({{1, 2, 3, 4}, {5, 6, 7, 8}}).to(ms::int64);
  std::map<int, int> reduce_means;
  for (int opset : {13, 17}) {
    CAPTURE(opset);
    const std::string path = dir.file("block.onnx");
    ms::onnx::export_model(net, ids, path,
                           {.opset_version = opset, .dynamic_axes = {{"input_0", {{0, "B"}}}}});
    const ::onnx::ModelProto m = full_check(path);
    CHECK(dims(m.graph().input(0)) == "B,4");
    CHECK(dims(m.graph().output(0)) == "B,4");
    CHECK(m.graph().input(0).type().tensor_type().elem_type() == ::onnx::TensorProto::INT64);
    const std::set<std::string> ops = op_types(m);
    CHECK(ops.count("Gather") == 1);
    CHECK(ops.count("Softmax") == 1);
    CHECK(ops.count("Erf") == 1);
    CHECK(ops.count("Concat") == 1);
    CHECK(ops.count("Slice") == 1);
    CHECK(initializer(m, "emb.embedding_table") != nullptr);
    // nn::LayerNorm: one LayerNormalization from opset 17, its definition written out before.
    CHECK(ops.count("LayerNormalization") == (opset >= 17 ? 1 : 0));
    for (const auto& n : m.graph().node()) reduce_means[opset] += n.op_type() == "ReduceMean";
    CHECK(initializer(m, "ln.gamma") != nullptr);
    if (opset >= 17)
      for (const auto& n : m.graph().node())
        if (n.op_type() == "LayerNormalization") {
          CHECK(n.input(1) == "ln.gamma");
          CHECK(n.input(2) == "ln.beta");
          CHECK(n.attribute(0).i() == 2);
          CHECK(n.attribute(1).f() == doctest::Approx(1e-7));
        }
  }
  CHECK(reduce_means[13] == reduce_means[17] + 2);  // the mean and the variance at opset 13
}

TEST_CASE("onnx: triu and tril become Trilu at opset 14+, a masked Where at 13") {
  ms::test::TempDir dir("ms_onnx");
  auto fn = [](const ms::Tensor& x) { return ms::triu(x, {.diagonal = 1}) + ms::tril(x); };
  for (int opset : {13, 14, 17}) {
    CAPTURE(opset);
    const std::string path = dir.file("tri.onnx");
    ms::onnx::export_model(fn, ms::ones({3, 4}), path, {.opset_version = opset});
    const ::onnx::ModelProto m = full_check(path);
    CHECK(op_types(m).count("Trilu") == (opset >= 14 ? 1 : 0));
    CHECK(op_types(m).count("Where") == (opset >= 14 ? 0 : 1));
  }
}

TEST_CASE("onnx: export_params and keep_initializers_as_inputs") {
  ms::test::TempDir dir("ms_onnx");
  MLP128 net;
  const std::string path = dir.file("mlp.onnx");
  ms::onnx::export_model(net, ms::zeros({1, 784}), path, {.keep_initializers_as_inputs = true});
  ::onnx::ModelProto m = full_check(path);
  CHECK(m.graph().input_size() == 5);
  CHECK(m.graph().initializer_size() == 4);
  CHECK(m.graph().input(0).name() == "input_0");
  ms::onnx::export_model(net, ms::zeros({1, 784}), path, {.export_params = false});
  m = full_check(path);
  CHECK(m.graph().initializer_size() == 0);
  REQUIRE(m.graph().input_size() == 5);
  std::set<std::string> inputs;
  for (const auto& i : m.graph().input()) inputs.insert(i.name());
  CHECK(m.graph().input(0).name() == "input_0");  // the arguments first
  CHECK(inputs.count("fc1.weight") == 1);
  CHECK(inputs.count("fc2.bias") == 1);
}

TEST_CASE("onnx: enable_dynamic and input_signature give named dim_params") {
  ms::test::TempDir dir("ms_onnx");
  MLP128 net;
  const std::string path = dir.file("mlp.onnx");
  ms::onnx::export_model(
      ms::enable_dynamic(net, ms::TensorSpec({ms::Dim("rows"), 784}, ms::float32)),
      ms::zeros({2, 784}), path);
  ::onnx::ModelProto m = full_check(path);
  CHECK(dims(m.graph().input(0)) == "rows,784");
  CHECK(dims(m.graph().output(0)) == "rows,10");
  CHECK(initializer(m, "fc1.weight") != nullptr);
  // An unnamed -1 gets the input's name and axis.
  ms::onnx::export_model(
      net, ms::zeros({2, 784}), path,
      {.input_names = {"x"}, .input_signature = {ms::TensorSpec({-1, 784}, ms::float32)}});
  m = full_check(path);
  CHECK(dims(m.graph().input(0)) == "x_dim0,784");
  CHECK(dims(m.graph().output(0)) == "x_dim0,10");
  // A dim the function pins cannot be symbolic.
  CHECK_THROWS_WITH_AS(ms::onnx::export_model(net, ms::zeros({2, 784}), path,
                                              {.dynamic_axes = {{"input_0", {{1, "features"}}}}}),
                       doctest::Contains("cannot be symbolic"), ms::ValueError);
}

TEST_CASE("onnx: an op without a mapping is an error naming it; the old file stays") {
  ms::test::TempDir dir("ms_onnx");
  const std::string path = dir.file("bad.onnx");
  { std::ofstream(path) << "old"; }
  auto fn = [](const ms::Tensor& x) {
    return ms::ops::call1(ms::ops::op("relu_grad"), {x, ms::relu(x)});
  };
  CHECK_THROWS_WITH_AS(ms::onnx::export_model(fn, ms::ones({2, 3}), path),
                       doctest::Contains("op 'relu_grad'"), ms::ValueError);
  CHECK(read_text(path) == "old");
  CHECK(dir.entries() == 1);
}

TEST_CASE("onnx: options are validated") {
  ms::test::TempDir dir("ms_onnx");
  MLP128 net;
  const std::string path = dir.file("m.onnx");
  const ms::Tensor x = ms::zeros({1, 784});
  using O = ms::onnx::ExportOptions;
  CHECK_THROWS_WITH_AS(ms::onnx::export_model(net, x, path, O{.opset_version = 10}),
                       doctest::Contains("opset_version must be between 13 and 17, got 10"),
                       ms::ValueError);
  CHECK_THROWS_WITH_AS(ms::onnx::export_model(net, x, path, O{.opset_version = 18}),
                       doctest::Contains("got 18"), ms::ValueError);
  CHECK_THROWS_WITH_AS(ms::onnx::export_model(net, x, path, O{.input_names = {"a", "b"}}),
                       doctest::Contains("input_names has 2 names for 1 inputs"), ms::ValueError);
  CHECK_THROWS_WITH_AS(ms::onnx::export_model(net, x, path, O{.output_names = {"a", "b"}}),
                       doctest::Contains("output_names has 2 names for 1 outputs"), ms::ValueError);
  CHECK_THROWS_WITH_AS(
      ms::onnx::export_model(net, x, path, O{.input_names = {"a"}, .output_names = {"a"}}),
      doctest::Contains("'a' is given twice"), ms::ValueError);
  CHECK_THROWS_WITH_AS(ms::onnx::export_model(net, x, path, O{.dynamic_axes = {{"y", {{0, "n"}}}}}),
                       doctest::Contains("neither an input nor an output"), ms::ValueError);
  CHECK_THROWS_WITH_AS(
      ms::onnx::export_model(net, x, path, O{.dynamic_axes = {{"input_0", {{2, "n"}}}}}),
      doctest::Contains("axis 2 of an input of rank 2"), ms::ValueError);
  CHECK_THROWS_WITH_AS(
      ms::onnx::export_model(net, x, path,
                             O{.input_signature = {ms::TensorSpec({-1, 100}, ms::float32)}}),
      doctest::Contains("requires 100"), ms::ShapeError);
  CHECK_FALSE(std::ifstream(path).good());
}

TEST_CASE("onnx: every op of the table is listed; docs/onnx_ops.md is in sync") {
  const std::vector<ms::onnx::OpSupport> rows = ms::onnx::op_support();
  REQUIRE(rows.size() == ms::ops::registry().size());
  std::set<std::string> names;
  for (const auto& r : rows) {
    names.insert(r.op);
    CHECK_MESSAGE((r.supported ? !r.onnx.empty() : !r.note.empty()), r.op);
  }
  for (const char* op : {"matmul", "conv2d",  "max_pool2d",   "avg_pool2d",  "relu",
                         "gelu",   "softmax", "log_softmax",  "reshape",     "transpose",
                         "concat", "slice",   "index_select", "masked_fill", "triu",
                         "tril",   "cast",    "where",        "mean",        "sum"}) {
    CAPTURE(op);
    CHECK(names.count(op) == 1);
  }
  const std::string docs = read_text(std::string(MS_SOURCE_ROOT) + "/docs/onnx_ops.md");
  CHECK_MESSAGE(
      docs == ms::onnx::op_support_markdown(),
      "docs/onnx_ops.md is out of date: build/tests/onnx/onnx_ops_table > docs/onnx_ops.md");
}

namespace {

// Evaluates an exported model with NumPy (onnx 1.12 has no onnx.reference and
// no runtime is installed: an implementation of the ONNX ops independent of
// ms) on argv[2] (shape argv[3], dtype argv[5], float32 when absent) and
// compares its first output with argv[4] (float32).
constexpr const char* kNumpyEval = R"(
import math, sys, numpy as np, onnx
from onnx import helper, numpy_helper
m = onnx.load(sys.argv[1])
shape = [int(d) for d in sys.argv[3].split(',')]
env = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
in_dtype = np.dtype(sys.argv[5]) if len(sys.argv) > 5 else np.float32
env[m.graph.input[0].name] = np.fromfile(sys.argv[2], dtype=in_dtype).reshape(shape)
def layer_norm(x, scale, bias, axis=-1, epsilon=1e-5):
    axes = tuple(range(axis % x.ndim, x.ndim))
    c = x - x.mean(axis=axes, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=axes, keepdims=True) + epsilon) * scale + bias
def conv(x, w, b=None, kernel_shape=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
         group=1):
    assert group == 1 and list(dilations) == [1, 1]
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    kh, kw = w.shape[2:]
    oh, ow = (xp.shape[2] - kh) // strides[0] + 1, (xp.shape[3] - kw) // strides[1] + 1
    y = np.zeros((x.shape[0], w.shape[0], oh, ow), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + oh * strides[0]:strides[0], j:j + ow * strides[1]:strides[1]]
            y += np.einsum('nchw,oc->nohw', patch, w[:, :, i, j])
    return (y if b is None else y + b.reshape(1, -1, 1, 1)).astype(x.dtype)
def max_pool(x, kernel_shape, strides, pads=(0, 0, 0, 0), dilations=(1, 1), ceil_mode=0):
    assert ceil_mode == 0 and list(dilations) == [1, 1]
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
                constant_values=-np.inf)
    (kh, kw), (sh, sw) = kernel_shape, strides
    oh, ow = (xp.shape[2] - kh) // sh + 1, (xp.shape[3] - kw) // sw + 1
    return np.max([xp[:, :, i:i + oh * sh:sh, j:j + ow * sw:sw]
                   for i in range(kh) for j in range(kw)], axis=0)
def pad(x, pads, value=None, mode='constant'):
    assert mode in ('constant', b'constant')
    r = x.ndim
    return np.pad(x, list(zip(pads[:r], pads[r:])), constant_values=0 if value is None else value)
def reshape(x, shape):
    return x.reshape([x.shape[i] if d == 0 else d for i, d in enumerate(shape)])
def log_softmax(x, axis=-1):
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))
def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
def reduce(f):
    def r(x, axes=None, keepdims=1):
        return f(x, axis=None if axes is None else tuple(axes), keepdims=bool(keepdims))
    return r
def split(x, sizes, axis=0):
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)
def cumsum(x, axis, exclusive=0, reverse=0):
    a = int(axis)
    y = np.cumsum(np.flip(x, a) if reverse else x, axis=a)
    if exclusive:  # shifted by one along the axis, a 0 first
        y = np.concatenate([np.zeros_like(np.take(y, [0], axis=a)),
                            np.take(y, range(y.shape[a] - 1), axis=a)], axis=a)
    return np.flip(y, a) if reverse else y
def scatter_elements(data, indices, updates, axis=0):
    out = data.copy()
    np.put_along_axis(out, indices, updates, axis)
    return out
def slice_(x, starts, ends, axes=None, steps=None):
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[a] = slice(s, e, st)
    return x[tuple(index)]
ops = {'MatMul': lambda a, b: a @ b, 'Add': np.add, 'Sub': np.subtract, 'Mul': np.multiply,
       'Div': np.divide, 'Sqrt': np.sqrt, 'Reciprocal': np.reciprocal, 'Exp': np.exp,
       'Log': np.log, 'Tanh': np.tanh, 'Relu': lambda a: np.maximum(a, 0),
       'Identity': lambda a: a, 'Shape': lambda a: np.array(a.shape),
       'Erf': lambda a: np.vectorize(math.erf)(a).astype(a.dtype),
       'Transpose': lambda a, perm: np.transpose(a, perm), 'Where': np.where,
       'Gather': lambda a, i, axis=0: np.take(a, i, axis=axis), 'Range': np.arange,
       'CumSum': cumsum,
       'Unsqueeze': lambda a, axes: np.expand_dims(a, tuple(axes)),
       'Squeeze': lambda a, axes: np.squeeze(a, tuple(axes)),
       'LessOrEqual': np.less_equal, 'Equal': np.equal, 'And': np.logical_and,
       'ReduceMean': reduce(np.mean), 'ReduceMax': reduce(np.max), 'ReduceSum': reduce(np.sum),
       'LayerNormalization': layer_norm, 'Softmax': softmax, 'LogSoftmax': log_softmax,
       'Conv': conv, 'MaxPool': max_pool, 'Pad': pad, 'Reshape': reshape,
       'Cast': lambda a, to: a.astype(helper.tensor_dtype_to_np_dtype(to)), 'Split': split,
       'Slice': slice_, 'Concat': lambda *xs, axis: np.concatenate(xs, axis=axis),
       'Expand': lambda a, shape: a * np.ones(shape, dtype=a.dtype),
       'ScatterElements': scatter_elements}
with np.errstate(divide='ignore', invalid='ignore'):
    for n in m.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        out = ops[n.op_type](*[env[i] for i in n.input], **attrs)
        for name, o in zip(n.output, out if n.op_type == 'Split' else [out]):
            env[name] = o
got = env[m.graph.output[0].name]
want = np.fromfile(sys.argv[4], dtype=np.float32).reshape(got.shape)
print('numpy evaluation of', sys.argv[1], ': max abs difference', np.abs(got - want).max())
sys.exit(0 if np.allclose(got, want, rtol=1e-4, atol=1e-4) else 1)
)";

struct Head : ms::Cell<Head> {
  ms::nn::LayerNorm ln{{16}, 1e-5};
  ms::nn::Dense fc{16, 8};
  Head() {
    register_cells("ln", ln, "fc", fc);
    ln.gamma.copy_(ms::uniform({16}, 0.5, 1.5));
    ln.beta.copy_(ms::uniform({16}, -0.5, 0.5));
  }
  ms::Tensor construct(const ms::Tensor& x) { return ms::softmax(ms::gelu(fc(ln(x))), -1); }
};

void write_raw(const std::string& path, const ms::Tensor& t) {
  const ms::Tensor c = t.contiguous();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(c.raw_data()), static_cast<std::streamsize>(c.nbytes()));
}

}  // namespace

TEST_CASE("onnx: python3's onnx accepts the exported models; NumPy evaluates them as ms") {
  const std::string py = ms_onnx_test::python_with_onnx();
  if (py.empty()) {
    MESSAGE(
        "skipped: no python3 with the onnx and numpy modules (apt-get install python3-onnx "
        "python3-numpy)");
    return;
  }
  ms::test::TempDir dir("ms_onnx");
  MLP128 mlp;
  CNN cnn;
  cnn.set_train(false);
  ms::onnx::export_model(mlp, ms::zeros({2, 784}), dir.file("mlp.onnx"),
                         {.dynamic_axes = {{"input_0", {{0, "batch"}}}}});
  ms::onnx::export_model(cnn, ms::zeros({2, 1, 28, 28}), dir.file("cnn.onnx"),
                         {.opset_version = 13});
  for (const char* f : {"mlp.onnx", "cnn.onnx"}) {
    const std::string cmd = py + " -c \"import onnx; onnx.checker.check_model(onnx.load('" +
                            dir.file(f) + "'), full_check=True)\"";
    CHECK_MESSAGE(std::system(cmd.c_str()) == 0, f);
  }
  // At batch 5 (the model was traced at 2): the batch is symbolic.
  ms::Generator gen(7);
  const ms::Tensor x = ms::normal({5, 784}, 0.0, 1.0, gen);
  write_raw(dir.file("x.bin"), x);
  write_raw(dir.file("y.bin"), mlp(x));
  { std::ofstream(dir.file("eval.py")) << kNumpyEval; }
  const std::string cmd = py + " " + dir.file("eval.py") + " " + dir.file("mlp.onnx") + " " +
                          dir.file("x.bin") + " 5,784 " + dir.file("y.bin");
  CHECK(std::system(cmd.c_str()) == 0);
  // The CNN (batch norm in inference mode, a symbolic batch: traced at 2, run at 3).
  cnn.bn.moving_mean.copy_(ms::normal({8}, 0.0, 0.1, gen));
  cnn.bn.moving_variance.copy_(ms::uniform({8}, 0.5, 1.5, gen));
  const ms::Tensor img = ms::normal({3, 1, 28, 28}, 0.0, 1.0, gen);
  write_raw(dir.file("img.bin"), img);
  write_raw(dir.file("logp.bin"), cnn(img));
  ms::onnx::export_model(cnn, ms::zeros({2, 1, 28, 28}), dir.file("cnn.onnx"),
                         {.dynamic_axes = {{"input_0", {{0, "N"}}}}});
  CHECK(std::system((py + " " + dir.file("eval.py") + " " + dir.file("cnn.onnx") + " " +
                     dir.file("img.bin") + " 3,1,28,28 " + dir.file("logp.bin"))
                        .c_str()) == 0);
  // index_copy (ScatterElements) along the middle axis of a symbolic batch.
  const ms::Tensor slots = ms::tensor({3, 0}), rows = ms::normal({4, 2, 5}, 0.0, 1.0, gen);
  const auto copy_rows = [&](const ms::Tensor& c) {
    return ms::index_copy(c, 1, slots, rows) * 2.f;
  };
  const ms::Tensor cache = ms::normal({4, 6, 5}, 0.0, 1.0, gen);
  write_raw(dir.file("cache.bin"), cache);
  write_raw(dir.file("copied.bin"), copy_rows(cache));
  ms::onnx::export_model(copy_rows, ms::zeros({4, 6, 5}), dir.file("index_copy.onnx"));
  CHECK(std::system((py + " " + dir.file("eval.py") + " " + dir.file("index_copy.onnx") + " " +
                     dir.file("cache.bin") + " 4,6,5 " + dir.file("copied.bin"))
                        .c_str()) == 0);
  // Layer norm (LayerNormalization at 17, its ops at 13), gelu's erf form, softmax.
  Head head;
  const ms::Tensor h = ms::normal({3, 4, 16}, 0.0, 1.0, gen);
  write_raw(dir.file("h.bin"), h);
  write_raw(dir.file("hy.bin"), head(h));
  for (int opset : {13, 17}) {
    CAPTURE(opset);
    const std::string f = dir.file("head" + std::to_string(opset) + ".onnx");
    ms::onnx::export_model(head, ms::zeros({1, 4, 16}), f,
                           {.opset_version = opset, .dynamic_axes = {{"input_0", {{0, "B"}}}}});
    CHECK(std::system((py + " " + dir.file("eval.py") + " " + f + " " + dir.file("h.bin") +
                       " 3,4,16 " + dir.file("hy.bin"))
                          .c_str()) == 0);
  }
}

namespace {

// Exports one call of `def` on `inputs` (each a graph input) at `opset`.
void export_call(const ms::ops::OpDef& def, const std::vector<ms::Tensor>& inputs,
                 const ms::ops::Attrs& attrs, const std::string& path, int opset) {
  ms::onnx::detail::ExportRequest req;
  req.trace = [&](std::span<const ms::Tensor> in) { return ms::ops::call(def, in, attrs); };
  req.examples = inputs;
  ms::onnx::detail::export_request(req, path, {.opset_version = opset});
}

// Inputs for an elementwise op without samples of its own: float32 [2, 3]
// (bool for the logical ops and where's condition).
std::vector<ms::Tensor> elementwise_inputs(const ms::ops::OpDef& def) {
  const std::string_view n = def.name;
  const bool logical = n.starts_with("logical_");
  std::vector<ms::Tensor> in;
  for (int i = 0; i < def.min_inputs; ++i) {
    ms::Tensor t = ms::uniform({2, 3}, 0.5, 2.0);
    in.push_back((logical || (n == "where" && i == 0)) ? t > 1.0 : t);
  }
  return in;
}

}  // namespace

TEST_CASE("onnx: every mapped op's samples pass ONNX's full check at opsets 13 and 17") {
  ms::test::TempDir dir("ms_onnx");
  const std::string path = dir.file("op.onnx");
  int exported = 0, rejected = 0;
  std::set<std::string, std::less<>> supported;
  for (const auto& r : ms::onnx::op_support())
    if (r.supported) supported.insert(r.op);
  for (const ms::ops::OpDef* def : ms::ops::registry()) {
    if (!supported.contains(def->name)) continue;
    std::vector<std::pair<std::vector<ms::Tensor>, ms::ops::Attrs>> calls;
    if (def->samples != nullptr) {
      for (const ms::ops::Sample& s : def->samples().cases) calls.emplace_back(s.inputs, s.attrs);
    } else {
      calls.emplace_back(elementwise_inputs(*def), ms::ops::Attrs{});
    }
    for (const auto& [inputs, attrs] : calls)
      for (int opset : {13, 17}) {
        CAPTURE(def->name);
        CAPTURE(attrs.to_string());
        CAPTURE(opset);
        // Floating inputs must export; an integer, bool or complex one may be
        // a TypeError when no ONNX op of this opset takes its dtype.
        bool floating = true;
        for (const ms::Tensor& t : inputs) floating &= ms::dtype_is_float(t.dtype());
        try {
          export_call(*def, inputs, attrs, path, opset);
        } catch (const ms::TypeError& err) {
          CHECK_MESSAGE(!floating, err.what());
          CHECK(std::string(err.what()).find("has no op for this dtype") != std::string::npos);
          ++rejected;
          continue;
        }
        full_check(path);
        ++exported;
      }
  }
  CHECK(exported > 150);
  CHECK(rejected < 10);
  MESSAGE(exported, " calls exported, ", rejected, " rejected for their dtype");
}

TEST_CASE("onnx: training constructs are errors that say what to do") {
  ms::test::TempDir dir("ms_onnx");
  const std::string path = dir.file("m.onnx");
  ms::nn::Dropout drop(0.5);
  drop.set_train(true);
  CHECK_THROWS_WITH_AS(ms::onnx::export_model(drop, ms::ones({2, 3}), path),
                       doctest::Contains("set_train(false)"), ms::ValueError);
  drop.set_train(false);  // eval mode: the identity
  ms::onnx::export_model(drop, ms::ones({2, 3}), path);
  CHECK(full_check(path).graph().output(0).name() == "output_0");
  ms::Parameter w(ms::zeros({2, 3}), "w");
  auto step = [&](const ms::Tensor& x) {
    ms::assign(w, w + x);
    return w * 2.f;
  };
  CHECK_THROWS_WITH_AS(ms::onnx::export_model(step, ms::ones({2, 3}), path),
                       doctest::Contains("updates the parameter 'w'"), ms::ValueError);
}

TEST_CASE("onnx: a parameter captured by a lambda keeps its name; weak numbers follow the tensor") {
  ms::test::TempDir dir("ms_onnx");
  const std::string path = dir.file("m.onnx");
  ms::Parameter w(ms::full({3}, 0.5, ms::float16), "scale");
  auto fn = [&](const ms::Tensor& x) { return (x * w + 1) / 3 > 0.25; };
  ms::onnx::export_model(fn, ms::ones({2, 3}, ms::float16), path, {.opset_version = 13});
  const ::onnx::ModelProto m = full_check(path);
  REQUIRE(initializer(m, "scale") != nullptr);
  CHECK(initializer(m, "scale")->data_type() == ::onnx::TensorProto::FLOAT16);
  CHECK(m.graph().output(0).type().tensor_type().elem_type() == ::onnx::TensorProto::BOOL);
}

TEST_CASE("onnx: several outputs, an output that is an input, and an output given twice") {
  ms::test::TempDir dir("ms_onnx");
  const std::string path = dir.file("m.onnx");
  auto fn = [](const ms::Tensor& x, const ms::Tensor& y) {
    const ms::Tensor s = ms::relu(x) + y;
    return std::make_tuple(s, x, s, ms::argmax(y, 1));
  };
  ms::onnx::export_model(
      fn, std::make_tuple(ms::ones({2, 3}), ms::ones({2, 3})), path,
      {.input_names = {"x", "y"}, .output_names = {"sum", "same_x", "sum_again"}});
  const ::onnx::ModelProto m = full_check(path);
  REQUIRE(m.graph().output_size() == 4);
  CHECK(m.graph().output(0).name() == "sum");
  CHECK(m.graph().output(1).name() == "same_x");
  CHECK(m.graph().output(2).name() == "sum_again");
  CHECK(m.graph().output(3).name() == "output_3");
  CHECK(m.graph().output(3).type().tensor_type().elem_type() == ::onnx::TensorProto::INT64);
  CHECK(dims(m.graph().output(3)) == "2");
  CHECK(m.graph().input(1).name() == "y");
}

TEST_CASE("onnx: an argument the function does not read stays a graph input") {
  ms::test::TempDir dir("ms_onnx");
  const std::string path = dir.file("m.onnx");
  auto fn = [](const ms::Tensor& x, const ms::Tensor&) { return x + 1; };
  ms::onnx::export_model(fn, std::make_tuple(ms::ones({2}), ms::ones({3})), path,
                         {.input_names = {"x", "unused"}});
  const ::onnx::ModelProto m = full_check(path);
  REQUIRE(m.graph().input_size() == 2);
  CHECK(m.graph().input(1).name() == "unused");
  CHECK(dims(m.graph().input(1)) == "3");
}

namespace {

using ms_onnx_test::max_rel_diff;

// q [2, 3, tq, 8], k [2, 3, tk, 8], v [2, 3, tk, 6], normal draws from `seed`.
std::vector<ms::Tensor> qkv(std::int64_t tq, std::int64_t tk, std::uint64_t seed) {
  ms::Generator gen(seed);
  return {ms::normal({2, 3, tq, 8}, 0.0, 1.0, gen), ms::normal({2, 3, tk, 8}, 0.0, 1.0, gen),
          ms::normal({2, 3, tk, 6}, 0.0, 1.0, gen)};
}

// scaled_dot_product_attention(q, k, v, {mask (when given), causal, scale})
// exported (Tq and Tk symbolic), checked by ONNX, loaded as a GraphCell and
// run eagerly and under jit on each of `runs` ({q, k, v[, mask]}) against ms's op.
void attention_round_trip(const std::vector<std::vector<ms::Tensor>>& runs, bool causal,
                          std::optional<double> scale = {}) {
  ms::test::TempDir dir("ms_onnx");
  const std::string path = dir.file("sdpa.onnx");
  const bool masked = runs[0].size() > 3;
  auto sdpa = [&](const std::vector<ms::Tensor>& in) {
    const ms::AttentionOptions o{
        .mask = masked ? std::optional(in[3]) : std::nullopt, .causal = causal, .scale = scale};
    return ms::scaled_dot_product_attention(in[0], in[1], in[2], o);
  };
  for (int opset : {13, 17}) {
    CAPTURE(opset);
    auto fn3 = [&](const ms::Tensor& q, const ms::Tensor& k, const ms::Tensor& v) {
      return sdpa({q, k, v});
    };
    auto fn4 = [&](const ms::Tensor& q, const ms::Tensor& k, const ms::Tensor& v,
                   const ms::Tensor& m) {
      return sdpa({q, k, v, m});
    };
    const std::vector<ms::Tensor>& x = runs[0];
    ms::onnx::ExportOptions o{
        .input_names = {"q", "k", "v", "mask"},
        .opset_version = opset,
        .dynamic_axes = {{"q", {{2, "tq"}}}, {"k", {{2, "tk"}}}, {"v", {{2, "tk"}}}}};
    if (masked) {
      const std::int64_t r = x[3].rank();
      o.dynamic_axes["mask"] = {{r - 2, "tq"}, {r - 1, "tk"}};
    }
    if (masked)
      ms::onnx::export_model(fn4, std::make_tuple(x[0], x[1], x[2], x[3]), path, o);
    else
      ms::onnx::export_model(
          fn3, std::make_tuple(x[0], x[1], x[2]), path,
          {.input_names = {"q", "k", "v"}, .opset_version = opset, .dynamic_axes = o.dynamic_axes});
    const ::onnx::ModelProto m = full_check(path);
    CHECK(op_types(m).count("Softmax") == 1);
    CHECK(op_types(m).count("Range") == (causal ? 1 : 0));
    ms::GraphCell g(path, {.set_inputs = false});
    auto jg = ms::jit(g);
    for (const auto& in : runs) {
      CAPTURE(in[0].shape());
      CAPTURE(in[1].shape());
      const ms::Tensor want = sdpa(in);
      CHECK(max_rel_diff(g(in)[0], want) < 1e-6);
      CHECK(max_rel_diff(jg(in)[0], want) < 1e-6);
    }
  }
}

}  // namespace

TEST_CASE("onnx: scaled_dot_product_attention without a mask round-trips through GraphCell") {
  attention_round_trip({qkv(5, 7, 1), qkv(3, 4, 2)}, false);
  attention_round_trip({qkv(4, 4, 3), qkv(6, 2, 4)}, false, 0.3);
}

TEST_CASE("onnx: scaled_dot_product_attention with Bool and additive masks, fully masked rows") {
  // Bool [5, 7]: row 2 keeps no key.
  ms::Generator gen(11);
  ms::Tensor keep = ms::uniform({5, 7}, 0.0, 1.0, gen) > 0.4;
  keep = ms::logical_and(keep, ms::arange(0, 5, 1, ms::int64).reshape({5, 1}) != 2);
  std::vector<ms::Tensor> a = qkv(5, 7, 5);
  a.push_back(keep);
  const ms::Tensor out = ms::scaled_dot_product_attention(a[0], a[1], a[2], {.mask = keep});
  REQUIRE(ms::all(out.select(2, 2) == 0).item<bool>());  // ms's rule the export must keep
  attention_round_trip({a}, false);
  // Additive [1, 5, 7] (broadcast over batch): -inf entries, row 4 all -inf.
  ms::Tensor add = ms::normal({1, 5, 7}, 0.0, 1.0, gen);
  add = ms::where(ms::uniform({1, 5, 7}, 0.0, 1.0, gen) > 0.7, -INFINITY, add);
  add = ms::where(ms::arange(0, 5, 1, ms::int64).reshape({5, 1}) == 4, -INFINITY, add);
  std::vector<ms::Tensor> b = qkv(5, 7, 6);
  b.push_back(add);
  attention_round_trip({b}, false);
  // Both with causal: Bool [5, 7] and the band (Tq < Tk), queries at the end of the keys.
  attention_round_trip({a}, true);
}

TEST_CASE("onnx: causal scaled_dot_product_attention follows symbolic Tq and Tk") {
  // Tq < Tk (decoding against a longer history), Tq == Tk, and Tq > Tk (the
  // first rows see no key and give 0).
  attention_round_trip({qkv(3, 7, 21), qkv(1, 5, 22), qkv(6, 6, 23), qkv(7, 4, 24)}, true);
  const std::vector<ms::Tensor> x = qkv(7, 4, 24);
  const ms::Tensor out = ms::scaled_dot_product_attention(x[0], x[1], x[2], {.causal = true});
  CHECK(ms::all(out.slice(2, 0, 3) == 0).item<bool>());
}

TEST_CASE("onnx: attention's dropout > 0 and a symbolic head size are errors naming the op") {
  ms::test::TempDir dir("ms_onnx");
  const std::string path = dir.file("m.onnx");
  const std::vector<ms::Tensor> x = qkv(4, 4, 31);
  auto drop = [](const ms::Tensor& q, const ms::Tensor& k, const ms::Tensor& v) {
    return ms::scaled_dot_product_attention(q, k, v, {.causal = true, .dropout = 0.1});
  };
  const auto args = std::make_tuple(x[0], x[1], x[2]);
  std::string msg;
  try {
    ms::onnx::export_model(drop, args, path);
  } catch (const ms::ValueError& e) {
    msg = e.what();
  }
  CHECK_MESSAGE(msg.find("op 'random'") != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("scaled_dot_product_attention with dropout > 0: pass dropout 0") !=
                    std::string::npos,
                msg);
  auto plain = [](const ms::Tensor& q, const ms::Tensor& k, const ms::Tensor& v) {
    return ms::scaled_dot_product_attention(q, k, v);
  };
  const ms::onnx::ExportOptions symbolic_e{
      .dynamic_axes = {{"input_0", {{3, "e"}}}, {"input_1", {{3, "e"}}}}};
  CHECK_THROWS_WITH_AS(ms::onnx::export_model(plain, args, path, symbolic_e),
                       doctest::Contains("op 'scaled_dot_product_attention' has a scale"),
                       ms::ValueError);
  // With a scale given, E may be symbolic.
  auto scaled = [](const ms::Tensor& q, const ms::Tensor& k, const ms::Tensor& v) {
    return ms::scaled_dot_product_attention(q, k, v, {.scale = 0.25});
  };
  ms::onnx::export_model(scaled, args, path, symbolic_e);
  full_check(path);
  // No keys in the example: the export is the no-key form, so Tk cannot be symbolic.
  const auto no_keys = std::make_tuple(x[0], ms::zeros({2, 3, 0, 8}), ms::zeros({2, 3, 0, 6}));
  CHECK_THROWS_WITH_AS(ms::onnx::export_model(
                           plain, no_keys, path,
                           {.dynamic_axes = {{"input_1", {{2, "tk"}}}, {"input_2", {{2, "tk"}}}}}),
                       doctest::Contains("no keys (Tk = 0) in the example"), ms::ValueError);
  ms::onnx::export_model(plain, no_keys, path);  // static: out 0
  ms::GraphCell g(path);
  CHECK(ms::all(g(std::get<0>(no_keys), std::get<1>(no_keys), std::get<2>(no_keys)) == 0)
            .item<bool>());
}

TEST_CASE("onnx: depend exports as its value") {
  ms::test::TempDir dir("ms_onnx");
  const std::string path = dir.file("m.onnx");
  auto fn = [](const ms::Tensor& x) { return ms::depend(x * 2.f, {ms::exp(x)}) + 1.f; };
  const ms::Tensor x = ms::normal({2, 3});
  for (int opset : {13, 17}) {
    ms::onnx::export_model(fn, x, path, {.opset_version = opset});
    const ::onnx::ModelProto m = full_check(path);
    CHECK(op_types(m).count("Identity") == 1);
    ms::GraphCell g(path);
    CHECK(max_rel_diff(g(x), fn(x)) == 0);
  }
}

TEST_CASE("onnx: the GPT language model exports with symbolic batch and sequence and runs back") {
  ms::manual_seed(5);
  ms::nn::Gpt gpt({.vocab_size = 256, .block_size = 16, .n_layer = 2, .n_head = 4, .n_embd = 32});
  gpt.set_train(false);
  ms::Generator gen(9);
  auto ids = [&](std::int64_t b, std::int64_t t) { return ms::randint(0, 256, {b, t}, gen); };
  ms::test::TempDir dir("ms_onnx");
  const std::string py = ms_onnx_test::python_with_onnx();
  if (py.empty()) MESSAGE("NumPy evaluation skipped: no python3 with onnx and numpy");
  for (int opset : {13, 17}) {
    CAPTURE(opset);
    const std::string path = dir.file("gpt" + std::to_string(opset) + ".onnx");
    ms::onnx::export_model(gpt, ids(2, 5), path,
                           {.input_names = {"ids"},
                            .output_names = {"logits"},
                            .opset_version = opset,
                            .dynamic_axes = {{"ids", {{0, "batch"}, {1, "seq"}}}}});
    const ::onnx::ModelProto m = full_check(path);
    CHECK(dims(m.graph().input(0)) == "batch,seq");
    CHECK(dims(m.graph().output(0)) == "batch,seq,256");
    const std::set<std::string> ops = op_types(m);
    CHECK(ops.count("Range") == 1);   // the causal bands
    CHECK(ops.count("CumSum") == 1);  // the positions
    CHECK(ops.count("LayerNormalization") == (opset >= 17 ? 1 : 0));
    ms::GraphCell g(path);
    const ms::StateDict gs = g.state_dict();
    for (const auto& [name, p] : gpt.parameters_and_names()) {
      CAPTURE(name);
      REQUIRE(gs.contains(name));
      CHECK(max_rel_diff(gs.at(name), p) == 0);
    }
    auto jg = ms::jit(g);
    for (std::int64_t b : {1, 3})
      for (std::int64_t t : {4, 9}) {
        CAPTURE(b);
        CAPTURE(t);
        const ms::Tensor x = ids(b, t), want = gpt(x);
        CHECK(max_rel_diff(g(x), want) < 1e-6);
        CHECK(max_rel_diff(jg(x), want) < 1e-6);
        if (py.empty() || b != 3 || t != 9) continue;
        write_raw(dir.file("ids.bin"), x);
        write_raw(dir.file("logits.bin"), want);
        { std::ofstream(dir.file("gpt.py")) << kNumpyEval; }
        const std::string check = py + " -c \"import onnx; onnx.checker.check_model(onnx.load('" +
                                  path + "'), full_check=True)\"";
        CHECK(std::system(check.c_str()) == 0);
        CHECK(std::system((py + " " + dir.file("gpt.py") + " " + path + " " + dir.file("ids.bin") +
                           " 3,9 " + dir.file("logits.bin") + " int64")
                              .c_str()) == 0);
      }
    CHECK(jg.compile_count() == 1);  // batch and seq dynamic: one graph for every size
  }
}

TEST_CASE(
    "onnx: the GPT's increment step (index_copy into its caches) runs back through GraphCell") {
  ms::manual_seed(6);
  ms::nn::Gpt gpt({.vocab_size = 256, .block_size = 16, .n_layer = 2, .n_head = 4, .n_embd = 32});
  gpt.set_train(false);
  ms::Generator gen(10);
  const std::int64_t batch = 2, slots = 8, filled = 5;
  // One new token per row at slot `filled`; the slots after it are hidden.
  auto step = [&](const ms::Tensor& ids, const ms::Tensor& pos, const ms::Tensor& at,
                  const ms::Tensor& pad, const ms::Tensor& k0, const ms::Tensor& v0,
                  const ms::Tensor& k1, const ms::Tensor& v1) {
    std::vector<ms::nn::KvCache> caches{{k0, v0}, {k1, v1}};
    const ms::Tensor logits = gpt.forward_cached(ids, pos, caches, at, {.key_padding_mask = pad});
    return std::make_tuple(logits, caches[0].key, caches[0].value, caches[1].key, caches[1].value);
  };
  std::vector<ms::Tensor> in = {ms::randint(0, 256, {batch, 1}, gen),
                                ms::full({batch, 1}, filled, ms::int64), ms::tensor(filled),
                                ms::arange(0, slots).reshape({1, slots}) > filled};
  in[3] = ms::broadcast_to(in[3], {batch, slots}).contiguous();
  for (int c = 0; c < 4; ++c) in.push_back(ms::normal({batch, 4, slots, 8}, 0.0, 1.0, gen));
  const auto want = step(in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]);
  ms::test::TempDir dir("ms_onnx");
  const std::string path = dir.file("increment.onnx");
  ms::onnx::export_model(
      step, std::make_tuple(in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]), path);
  const ::onnx::ModelProto m = full_check(path);
  CHECK(op_types(m).count("ScatterElements") == 1);
  ms::GraphCell g(path);
  auto jg = ms::jit(g);
  for (const std::vector<ms::Tensor>& got : {g(in), jg(in)}) {
    REQUIRE(got.size() == 5);
    CHECK(max_rel_diff(got[0], std::get<0>(want)) < 1e-6);
    CHECK(max_rel_diff(got[1], std::get<1>(want)) < 1e-6);
    CHECK(max_rel_diff(got[2], std::get<2>(want)) < 1e-6);
    CHECK(max_rel_diff(got[3], std::get<3>(want)) < 1e-6);
    CHECK(max_rel_diff(got[4], std::get<4>(want)) < 1e-6);
  }
  // The slots before the one written are the inputs', exactly.
  for (const std::vector<ms::Tensor>& got : {g(in), jg(in)})
    for (int c = 0; c < 4; ++c)
      CHECK(max_rel_diff(got[static_cast<std::size_t>(c) + 1].slice(2, 0, filled),
                         in[static_cast<std::size_t>(c) + 4].slice(2, 0, filled)) == 0);
}

TEST_CASE("onnx: scatter exports as ScatterElements; GraphCell runs it and names its errors") {
  ms::test::TempDir dir("ms_onnx");
  const std::string path = dir.file("scatter.onnx");
  const ms::Tensor index = ms::tensor({{2, 0, 1}, {0, 2, 2}});
  auto fn = [&](const ms::Tensor& x, const ms::Tensor& src) {
    return ms::scatter(x, 0, index, src) + 1.f;
  };
  ms::Generator gen(12);
  const ms::Tensor x = ms::normal({3, 3}, 0.0, 1.0, gen), src = ms::normal({2, 3}, 0.0, 1.0, gen);
  for (int opset : {13, 17}) {
    ms::onnx::export_model(fn, std::make_tuple(x, src), path, {.opset_version = opset});
    const ::onnx::ModelProto m = full_check(path);
    CHECK(op_types(m).count("ScatterElements") == 1);
    ms::GraphCell g(path);
    CHECK(max_rel_diff(g(x, src), fn(x, src)) == 0);
  }
  // ScatterElements with a reduction: not mapped.
  ::onnx::ModelProto m = full_check(path);
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "ScatterElements") {
      auto* a = n.add_attribute();
      a->set_name("reduction");
      a->set_type(::onnx::AttributeProto::STRING);
      a->set_s("add");
      n.set_name("sc");
    }
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  ms::GraphCell added(bytes, "<scatter add>");
  CHECK_THROWS_WITH_AS(added(x, src),
                       doctest::Contains("node 'sc' (ScatterElements): reduction 'add' is not "
                                         "supported (only none)"),
                       ms::ValueError);
}

TEST_CASE("onnx: scaled_dot_product_attention's samples run back through GraphCell (out and lse)") {
  ms::test::TempDir dir("ms_onnx");
  const std::string path = dir.file("op.onnx");
  const ms::ops::OpDef& def = ms::ops::op("scaled_dot_product_attention");
  for (const ms::ops::Sample& s : def.samples().cases)
    for (int opset : {13, 17}) {
      CAPTURE(s.label);
      CAPTURE(opset);
      export_call(def, s.inputs, s.attrs, path, opset);
      ms::GraphCell g(path, {.set_inputs = false});
      const std::vector<ms::Tensor> got = g(s.inputs);
      const std::vector<ms::Tensor> want = ms::ops::call(def, s.inputs, s.attrs);
      REQUIRE(got.size() == 2);
      CHECK(max_rel_diff(got[0], want[0]) < 1e-6);
      // lse: -inf on the rows that keep no key, in both.
      const ms::Tensor inf = want[1] == -INFINITY;
      CHECK(ms::all((got[1] == -INFINITY) == inf).item<bool>());
      CHECK(max_rel_diff(ms::where(inf, 0.0, got[1]), ms::where(inf, 0.0, want[1])) < 1e-6);
    }
}

namespace {

// y = Range(start, limit, delta) + x: int64 0-d initializers, or `start` a
// graph input when `start_input` (then not a constant).
std::string range_model(std::int64_t start, std::int64_t limit, std::int64_t delta,
                        bool start_input) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("range");
  auto scalar_type = [](::onnx::ValueInfoProto* vi, const std::string& name) {
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::INT64);
    vi->mutable_type()->mutable_tensor_type()->mutable_shape();
  };
  auto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::INT64);
  x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("n");
  if (start_input) scalar_type(g->add_input(), "start");
  const std::pair<const char*, std::int64_t> inits[] = {
      {"start", start}, {"limit", limit}, {"delta", delta}};
  for (const auto& [name, v] : inits) {
    if (start_input && std::string(name) == "start") continue;
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_int64_data(v);
  }
  auto* r = g->add_node();
  r->set_op_type("Range");
  r->set_name("range");
  for (const char* in : {"start", "limit", "delta"}) r->add_input(in);
  r->add_output("r");
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add");
  add->add_input("r");
  add->add_input("x");
  add->add_output("y");
  auto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::INT64);
  y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("n");
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  return bytes;
}

}  // namespace

TEST_CASE(
    "GraphCell: Range of constants is arange; a start that is not a constant names the node") {
  ms::GraphCell g(range_model(1, 8, 3, false), "<range>");
  const ms::Tensor x = ms::tensor({10, 20, 30}).to(ms::int64);
  CHECK(ms::all(g(x) == ms::tensor({11, 24, 37}).to(ms::int64)).item<bool>());
  ms::GraphCell zero(range_model(0, 3, 0, false), "<range>");
  CHECK_THROWS_WITH_AS(zero(x),
                       doctest::Contains("node 'range' (Range): start, limit and delta "
                                         "must be finite and delta not 0, got 0, 3, 0"),
                       ms::ValueError);
  // A hostile count is an error before any allocation, and so are integers
  // double cannot hold exactly.
  ms::GraphCell huge(range_model(0, std::int64_t{1} << 50, 1, false), "<range>");
  CHECK_THROWS_WITH_AS(huge(x), doctest::Contains("elements, more than 2^40"), ms::ValueError);
  ms::GraphCell wide(range_model(std::int64_t{1} << 60, (std::int64_t{1} << 60) + 3, 1, false),
                     "<range>");
  CHECK_THROWS_WITH_AS(wide(x), doctest::Contains("must be at most 2^53 in magnitude"),
                       ms::ValueError);
  ms::GraphCell in(range_model(0, 3, 1, true), "<range>");
  CHECK_THROWS_WITH_AS(in(std::vector<ms::Tensor>{x, ms::tensor(0).to(ms::int64)}),
                       doctest::Contains("input 0 must be a one-element constant"), ms::ValueError);
}

TEST_CASE("onnx: reshape targets with several moved dims read the symbolic dims with Shape") {
  ms::test::TempDir dir("ms_onnx");
  const std::string path = dir.file("m.onnx");
  // [B, T, 8] -> [T, B, 8] (two symbols), and [T, B * 8] (a symbol and one -1).
  auto fn = [](const ms::Tensor& x) {
    const std::int64_t b = x.dim(0), t = x.dim(1);
    return std::make_tuple(x.reshape(ms::Shape({t, b, 8})) * 2.f,
                           x.reshape(ms::Shape({t, b * 8})) + 1.f);
  };
  for (int opset : {13, 17}) {
    CAPTURE(opset);
    ms::onnx::export_model(
        fn, ms::zeros({2, 3, 8}), path,
        {.opset_version = opset, .dynamic_axes = {{"input_0", {{0, "B"}, {1, "T"}}}}});
    const ::onnx::ModelProto m = full_check(path);
    CHECK(dims(m.graph().output(0)) == "T,B,8");
    CHECK(op_types(m).count("Concat") == 1);  // the runtime targets
    ms::GraphCell g(path);
    for (const ms::Tensor& x : {ms::normal({4, 5, 8}), ms::normal({1, 7, 8})}) {
      const std::vector<ms::Tensor> got = g(std::vector<ms::Tensor>{x});
      const auto [a, b] = fn(x);
      CHECK(max_rel_diff(got[0], a) == 0);
      CHECK(max_rel_diff(got[1], b) == 0);
    }
  }
}
