// GraphCell's interpreter (ms/onnx/graph_cell.hpp): each ONNX node of a
// Program run with ms ops, so that ms::jit traces it into ms's IR and ms::grad
// differentiates it. Nodes whose inputs are all constants (Constant, Shape,
// non-float initializers and what is computed from them only) run eagerly
// even while a trace records, so that shapes and axes computed in the graph
// (Shape -> Gather -> Concat -> Reshape) are known numbers.
#include <algorithm>
#include <limits>
#include <numeric>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "graph_program.hpp"
#include "ms/core/error.hpp"
#include "ms/ops/elementwise.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/linalg.hpp"
#include "ms/ops/nn.hpp"
#include "ms/ops/op.hpp"
#include "ms/ops/reduce.hpp"

namespace ms::onnx::detail {
namespace {

using I64s = std::vector<std::int64_t>;

/// The values of one run: tensors and which of them are constants.
struct Run {
  const Program& p;
  std::vector<Tensor> env;
  std::vector<char> konst;
};

/// Suspends the active tracer: constant nodes run eagerly on concrete tensors.
struct NoTrace {
  ops::Tracer* saved = ops::set_active_tracer(nullptr);
  NoTrace() = default;
  NoTrace(const NoTrace&) = delete;
  NoTrace& operator=(const NoTrace&) = delete;
  ~NoTrace() { ops::set_active_tracer(saved); }
};

/// One node being run.
struct Ctx {
  Run& r;
  const GNode& n;

  std::string where() const { return "GraphCell: node '" + n.name + "' (" + n.op + ")"; }
  bool has(std::size_t i) const { return i < n.in.size() && n.in[i] >= 0; }
  const Tensor& in(std::size_t i) const {
    MS_CHECK(has(i), ValueError, where(), ": input ", i, " is required, the node gives ",
             n.in.size());
    return r.env[static_cast<std::size_t>(n.in[i])];
  }
  /// Input i as numbers: it must be a constant of the graph.
  I64s ints(std::size_t i) const {
    const Tensor& t = in(i);
    MS_CHECK(r.konst[static_cast<std::size_t>(n.in[i])], ValueError, where(), ": input ", i, " ('",
             r.p.values[static_cast<std::size_t>(n.in[i])],
             "') must be a constant (Constant, Shape or an integer initializer, or computed from "
             "those only); it depends on the graph inputs or a float initializer");
    NoTrace nt;
    return cast(t, int64).contiguous().to_vector<std::int64_t>();
  }
  bool has_attr(const char* a) const { return n.attrs.count(a) > 0; }
  std::int64_t attr_i(const char* a, std::int64_t def) const {
    auto it = n.attrs.find(a);
    return it == n.attrs.end() ? def : it->second.i;
  }
  double attr_f(const char* a, double def) const {
    auto it = n.attrs.find(a);
    return it == n.attrs.end() ? def : it->second.f;
  }
  I64s attr_ints(const char* a, I64s def = {}) const {
    auto it = n.attrs.find(a);
    return it == n.attrs.end() ? def : it->second.ints;
  }
  std::string attr_s(const char* a, std::string def) const {
    auto it = n.attrs.find(a);
    return it == n.attrs.end() ? def : it->second.s;
  }
  /// Axes from input i when given, else from attribute "axes" (opset differences).
  I64s axes(std::size_t i) const { return has(i) ? ints(i) : attr_ints("axes"); }
  void out(std::size_t i, const Tensor& t) {
    if (i < n.out.size() && n.out[i] >= 0) r.env[static_cast<std::size_t>(n.out[i])] = t;
  }
  /// ValueError unless only the first `k` outputs are used.
  void only_outputs(std::size_t k) const {
    for (std::size_t i = k; i < n.out.size(); ++i)
      MS_CHECK(n.out[i] < 0, ValueError, where(), ": output ", i,
               " is not supported by GraphCell (only the first ", k, ")");
  }
  std::int64_t rank(std::size_t i = 0) const { return in(i).shape().rank(); }
};

std::int64_t norm(std::int64_t a, std::int64_t rank) { return a < 0 ? a + rank : a; }
// Attribute axis `a` of node `c` normalized into [0, rank) ([0, rank] when
// `inclusive`); a ValueError naming the node otherwise (a hostile file's axis
// must not index past a shape).
std::int64_t axis_in(const Ctx& c, std::int64_t a, std::int64_t rank, bool inclusive = false) {
  const std::int64_t n = norm(a, rank);
  MS_CHECK(n >= 0 && (inclusive ? n <= rank : n < rank), ValueError, c.where(), ": axis ", a,
           " is out of range for rank ", rank);
  return n;
}

using Fn = void (*)(Ctx&);

// ---------------------------------------------------------------- elementwise

template <auto F>
void unary(Ctx& c) {
  c.out(0, Tensor(F(c.in(0))));
}
template <auto F>
void binary(Ctx& c) {
  c.out(0, Tensor(F(c.in(0), c.in(1))));
}
/// Max / Min of any number of operands.
template <auto F>
void variadic(Ctx& c) {
  Tensor acc = c.in(0);
  for (std::size_t i = 1; i < c.n.in.size(); ++i) acc = Tensor(F(acc, c.in(i)));
  c.out(0, acc);
}
/// a / b of integer tensors, truncating toward zero (ONNX); computed on
/// concrete values in T (int64, or uint64 for uint64), so that every value
/// is exact and a zero divisor is a ValueError naming the node.
template <class T>
Tensor int_div(const Ctx& c, const Tensor& a, const Tensor& b) {
  const Shape s = shape_broadcast(a.shape(), b.shape(), "GraphCell: Div");
  const DType wide = std::is_signed_v<T> ? int64 : DType::UInt64;
  const auto x = cast(broadcast_to(a, s), wide).contiguous().template to_vector<T>();
  const auto y = cast(broadcast_to(b, s), wide).contiguous().template to_vector<T>();
  Tensor q = empty(s, wide);
  T* out = q.template data<T>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    MS_CHECK(y[i] != 0, ValueError, c.where(),
             ": integer division by zero (the divisor holds a 0)");
    if constexpr (std::is_signed_v<T>)
      MS_CHECK(x[i] != std::numeric_limits<T>::min() || y[i] != -1, ValueError, c.where(), ": ",
               x[i], " / -1 overflows int64");
    out[i] = x[i] / y[i];  // C++ integer division truncates toward zero, as ONNX's
  }
  return cast(q, a.dtype());
}
void div_op(Ctx& c) {
  const Tensor &a = c.in(0), &b = c.in(1);
  if (dtype_is_float(a.dtype())) return c.out(0, Tensor(ms::div(a, b)));
  MS_CHECK(a.dtype() == b.dtype(), TypeError, c.where(), ": the operands are ",
           dtype_name(a.dtype()), " and ", dtype_name(b.dtype()), "; Div needs one type");
  MS_CHECK(ops::active_tracer() == nullptr, ValueError, c.where(),
           ": integer division of values computed from the graph inputs is not supported while "
           "ms::jit or ms::grad traces the model (GraphCell divides integers exactly on concrete "
           "values: constants, or in a plain eager call)");
  NoTrace nt;
  c.out(0, a.dtype() == DType::UInt64 ? int_div<std::uint64_t>(c, a, b)
                                      : int_div<std::int64_t>(c, a, b));
}
void where_op(Ctx& c) { c.out(0, Tensor(ms::where(c.in(0), c.in(1), c.in(2)))); }
void identity(Ctx& c) { c.out(0, c.in(0)); }
void cast_op(Ctx& c) {
  c.out(0, cast(c.in(0), dtype_from_onnx(static_cast<int>(c.attr_i("to", 0)), c.where())));
}
void constant(Ctx& c) {
  const auto& a = c.n.attrs;
  Tensor t;
  if (auto it = a.find("value"); it != a.end())
    t = it->second.t;
  else if (auto f = a.find("value_float"); f != a.end())
    t = tensor(f->second.f, float32);
  else if (auto i = a.find("value_int"); i != a.end())
    t = tensor(i->second.i, int64);
  else if (auto fs = a.find("value_floats"); fs != a.end()) {
    t = empty(Shape({static_cast<std::int64_t>(fs->second.floats.size())}), float32);
    std::copy(fs->second.floats.begin(), fs->second.floats.end(), t.data<float>());
  } else if (auto is = a.find("value_ints"); is != a.end()) {
    t = empty(Shape({static_cast<std::int64_t>(is->second.ints.size())}), int64);
    std::copy(is->second.ints.begin(), is->second.ints.end(), t.data<std::int64_t>());
  }
  MS_CHECK(t.defined(), ValueError, c.where(),
           ": needs one of the attributes value, value_float(s), value_int(s)");
  c.out(0, t);
}

// ---------------------------------------------------------------- linalg, nn

void gemm(Ctx& c) {
  Tensor a = c.in(0), b = c.in(1);
  if (c.attr_i("transA", 0)) a = a.transpose(0, 1);
  if (c.attr_i("transB", 0)) b = b.transpose(0, 1);
  Tensor y = matmul(a, b);
  const double alpha = c.attr_f("alpha", 1), beta = c.attr_f("beta", 1);
  if (alpha != 1) y = Tensor(y * alpha);
  if (c.has(2)) y = Tensor(y + (beta == 1 ? c.in(2) : Tensor(c.in(2) * beta)));
  c.out(0, y);
}

/// ONNX's pads [b0, b1, e0, e1] as ms's symmetric padding; ValueError otherwise.
I64s sym_pads(const Ctx& c) {
  const std::string ap = c.attr_s("auto_pad", "NOTSET");
  MS_CHECK(ap == "NOTSET" || ap == "VALID", ValueError, c.where(), ": auto_pad '", ap,
           "' is not supported (give explicit pads)");
  const I64s p = c.attr_ints("pads", {0, 0, 0, 0});
  MS_CHECK(p.size() == 4 && p[0] == p[2] && p[1] == p[3], ValueError, c.where(),
           ": pads must be 4 numbers, equal at both ends of each axis (ms pads symmetrically)");
  return {p[0], p[1]};
}
void check_2d(const Ctx& c) {
  MS_CHECK(c.rank() == 4, ValueError, c.where(),
           ": only 2-D (NCHW) inputs are supported, got rank ", c.rank());
}
void conv(Ctx& c) {
  check_2d(c);
  const Conv2dOptions o{.stride = c.attr_ints("strides", {1, 1}),
                        .padding = sym_pads(c),
                        .dilation = c.attr_ints("dilations", {1, 1}),
                        .groups = c.attr_i("group", 1)};
  c.out(0, conv2d(c.in(0), c.in(1), c.has(2) ? std::optional<Tensor>(c.in(2)) : std::nullopt, o));
}
void max_pool(Ctx& c) {
  check_2d(c);
  c.only_outputs(1);
  MS_CHECK(c.attr_i("storage_order", 0) == 0, ValueError, c.where(),
           ": storage_order 1 is not supported");
  const I64s k = c.attr_ints("kernel_shape");
  c.out(0, max_pool2d(c.in(0), {.kernel = k,
                                .stride = c.attr_ints("strides", {1, 1}),
                                .padding = sym_pads(c),
                                .dilation = c.attr_ints("dilations", {1, 1}),
                                .ceil_mode = c.attr_i("ceil_mode", 0) != 0}));
}
void avg_pool(Ctx& c) {
  check_2d(c);
  c.out(0, avg_pool2d(c.in(0), {.kernel = c.attr_ints("kernel_shape"),
                                .stride = c.attr_ints("strides", {1, 1}),
                                .padding = sym_pads(c),
                                .ceil_mode = c.attr_i("ceil_mode", 0) != 0,
                                .count_include_pad = c.attr_i("count_include_pad", 0) != 0}));
}
void batch_norm(Ctx& c) {
  MS_CHECK(c.attr_i("training_mode", 0) == 0, ValueError, c.where(),
           ": training_mode 1 is not supported (inference only)");
  c.only_outputs(1);
  I64s shape(static_cast<std::size_t>(c.rank()), 1);
  MS_CHECK(shape.size() >= 2, ValueError, c.where(), ": the input needs rank >= 2");
  shape[1] = c.in(0).shape()[1];
  auto r = [&](std::size_t i) { return reshape(c.in(i), Shape(shape)); };
  const double eps = c.attr_f("epsilon", 1e-5);
  const Tensor inv = Tensor(r(1) * ms::rsqrt(r(4) + eps));
  c.out(0, Tensor((c.in(0) - r(3)) * inv + r(2)));
}
void layer_norm(Ctx& c) {
  const std::int64_t rk = c.rank(), axis = axis_in(c, c.attr_i("axis", -1), rk);
  I64s axes;
  for (std::int64_t a = axis; a < rk; ++a) axes.push_back(a);
  const double eps = c.attr_f("epsilon", 1e-5);
  const Tensor& x = c.in(0);
  const Tensor m = mean(x, axes, true);
  const Tensor d = Tensor(x - m);
  const Tensor inv = Tensor(ms::rsqrt(mean(Tensor(ms::square(d)), axes, true) + eps));
  Tensor y = Tensor(d * inv * c.in(1));
  if (c.has(2)) y = Tensor(y + c.in(2));
  c.out(0, y);
  c.out(1, m);
  c.out(2, inv);
}
template <bool Log>
void softmax_op(Ctx& c) {
  const std::int64_t axis = c.attr_i("axis", -1);
  c.out(0, Log ? log_softmax(c.in(0), axis) : softmax(c.in(0), axis));
}

// ---------------------------------------------------------------- layout

Shape shape_of(const I64s& v) { return Shape(v); }

void reshape_op(Ctx& c) {
  const Tensor& x = c.in(0);
  I64s t = c.ints(1);
  const bool allow_zero = c.attr_i("allowzero", 0) != 0;
  std::int64_t known = 1, infer = -1;
  for (std::size_t a = 0; a < t.size(); ++a) {
    if (t[a] == 0 && !allow_zero) {
      MS_CHECK(static_cast<std::int64_t>(a) < x.shape().rank(), ShapeError, c.where(),
               ": target dim ", a, " is 0 (copy) but the input has rank ", x.shape().rank());
      t[a] = x.shape()[a];
    }
    if (t[a] == -1) {
      MS_CHECK(infer < 0, ShapeError, c.where(), ": the target has two -1 dims");
      infer = static_cast<std::int64_t>(a);
    } else {
      MS_CHECK(t[a] >= 0, ShapeError, c.where(), ": target dim ", a, " is ", t[a],
               " (a size, 0 or -1)");
      MS_CHECK(t[a] == 0 || known <= std::numeric_limits<std::int64_t>::max() / t[a], ShapeError,
               c.where(), ": the target's sizes multiply past int64 at dim ", a, " (size ", t[a],
               ")");
      known *= t[a];
    }
  }
  if (infer >= 0) {
    MS_CHECK(known > 0 && x.numel() % known == 0, ShapeError, c.where(),
             ": cannot infer the -1 dim of ", shape_of(t), " for an input of shape ", x.shape());
    t[static_cast<std::size_t>(infer)] = x.numel() / known;
  }
  c.out(0, reshape(x, Shape(t)));
}
void transpose_op(Ctx& c) {
  I64s perm = c.attr_ints("perm");
  if (perm.empty())
    for (std::int64_t a = c.rank() - 1; a >= 0; --a) perm.push_back(a);
  // A swap of two axes (an exported Dense's weight, [1, 0]) is ms::transpose,
  // the form the jit's matmul passes recognize (bench/bm_onnx.cpp at batch 1).
  std::vector<std::int64_t> moved;
  for (std::size_t a = 0; a < perm.size(); ++a)
    if (perm[a] != static_cast<std::int64_t>(a)) moved.push_back(static_cast<std::int64_t>(a));
  if (moved.size() == 2 && perm[static_cast<std::size_t>(moved[0])] == moved[1] &&
      perm[static_cast<std::size_t>(moved[1])] == moved[0])
    return c.out(0, transpose(c.in(0), moved[0], moved[1]));
  c.out(0, permute(c.in(0), perm));
}
void squeeze_op(Ctx& c) {
  I64s axes = c.axes(1);
  if (axes.empty()) return c.out(0, squeeze(c.in(0)));
  for (auto& a : axes) a = axis_in(c, a, c.rank());
  std::sort(axes.rbegin(), axes.rend());
  Tensor y = c.in(0);
  for (std::int64_t a : axes) y = squeeze(y, a);
  c.out(0, y);
}
void unsqueeze_op(Ctx& c) {
  I64s axes = c.axes(1);
  const auto r = c.rank() + static_cast<std::int64_t>(axes.size());
  for (auto& a : axes) a = axis_in(c, a, r);
  std::sort(axes.begin(), axes.end());
  Tensor y = c.in(0);
  for (std::int64_t a : axes) y = unsqueeze(y, a);
  c.out(0, y);
}
void flatten_op(Ctx& c) {
  const Shape& s = c.in(0).shape();
  const std::int64_t axis = axis_in(c, c.attr_i("axis", 1), s.rank(), true);
  std::int64_t outer = 1;
  for (std::int64_t a = 0; a < axis; ++a) outer *= s[static_cast<std::size_t>(a)];
  c.out(0, reshape(c.in(0), Shape({outer, outer == 0 ? 0 : c.in(0).numel() / outer})));
}
void expand_op(Ctx& c) {
  const I64s t = c.ints(1);
  I64s xs = c.in(0).shape().to_vector();
  const std::size_t r = std::max(t.size(), xs.size());
  I64s out(r, 1);
  for (std::size_t k = 0; k < r; ++k) {
    const std::int64_t a = k < r - xs.size() ? 1 : xs[k - (r - xs.size())];
    const std::int64_t b = k < r - t.size() ? 1 : t[k - (r - t.size())];
    MS_CHECK(a == b || a == 1 || b == 1, ShapeError, c.where(), ": shape ", c.in(0).shape(),
             " does not broadcast to ", shape_of(t));
    out[k] = a == 1 ? b : a;
  }
  c.out(0, broadcast_to(c.in(0), Shape(out)));
}
void concat_op(Ctx& c) {
  std::vector<Tensor> xs;
  for (std::size_t i = 0; i < c.n.in.size(); ++i) xs.push_back(c.in(i));
  c.out(0, concat(xs, c.attr_i("axis", 0)));
}
void slice_op(Ctx& c) {
  const I64s st = c.ints(1), en = c.ints(2);
  I64s axes = c.has(3) ? c.ints(3) : I64s{};
  const I64s steps = c.has(4) ? c.ints(4) : I64s(st.size(), 1);
  if (axes.empty())
    for (std::size_t a = 0; a < st.size(); ++a) axes.push_back(static_cast<std::int64_t>(a));
  MS_CHECK(en.size() == st.size() && axes.size() == st.size() && steps.size() == st.size(),
           ValueError, c.where(), ": starts, ends, axes and steps must have the same length");
  Tensor y = c.in(0);
  for (std::size_t k = 0; k < st.size(); ++k) {
    MS_CHECK(steps[k] > 0, ValueError, c.where(), ": step ", steps[k],
             " is not supported (ms slices with positive steps)");
    y = y.slice(axis_in(c, axes[k], c.rank()), st[k], en[k], steps[k]);
  }
  c.out(0, y);
}
void gather_op(Ctx& c) {
  const Tensor& x = c.in(0);
  const std::int64_t axis = axis_in(c, c.attr_i("axis", 0), c.rank());
  Tensor idx = c.in(1);
  if (c.r.konst[static_cast<std::size_t>(c.n.in[1])]) {  // negative indices count from the end
    NoTrace nt;
    const std::int64_t d = x.shape()[static_cast<std::size_t>(axis)];
    idx = Tensor(ms::where(idx < 0, Tensor(idx + d), idx));
  }
  const Tensor flat = index_select(x, axis, reshape(idx, Shape({idx.numel()})));
  I64s shape = x.shape().to_vector();
  shape.erase(shape.begin() + axis);
  const I64s id = idx.shape().to_vector();
  shape.insert(shape.begin() + axis, id.begin(), id.end());
  c.out(0, reshape(flat, Shape(shape)));
}
void gather_elements(Ctx& c) { c.out(0, gather(c.in(0), c.attr_i("axis", 0), c.in(1))); }
void scatter_elements(Ctx& c) {
  const std::string red = c.attr_s("reduction", "none");
  MS_CHECK(red == "none", ValueError, c.where(), ": reduction '", red,
           "' is not supported (only none)");
  c.out(0, scatter(c.in(0), c.attr_i("axis", 0), c.in(1), c.in(2)));
}
void trilu(Ctx& c) {
  const I64s ks = c.has(1) ? c.ints(1) : I64s{0};  // an absent k is 0
  MS_CHECK(ks.size() == 1, ValueError, c.where(), ": input 1 (k) must hold one value, it holds ",
           ks.size());
  const std::int64_t k = ks[0];
  c.out(0, c.attr_i("upper", 1) ? triu(c.in(0), {.diagonal = k}) : tril(c.in(0), {.diagonal = k}));
}
/// CumSum(x, axis): running sums along the constant axis; `exclusive` leaves
/// each element out of its own sum, `reverse` sums from the end.
void cumsum_op(Ctx& c) {
  const I64s ax = c.ints(1);
  MS_CHECK(ax.size() == 1, ValueError, c.where(), ": input 1 (axis) must hold one value, it holds ",
           ax.size());
  const Tensor& x = c.in(0);
  const std::int64_t axis = axis_in(c, ax[0], c.rank());
  c.out(0, cumsum(x, {.axis = axis,
                      .exclusive = c.attr_i("exclusive", 0) != 0,
                      .reverse = c.attr_i("reverse", 0) != 0}));
}
/// Range(start, limit, delta): one-element constants of the graph, as
/// ms::arange in start's dtype.
void range_op(Ctx& c) {
  double v[3] = {};
  for (std::size_t i = 0; i < 3; ++i) {
    MS_CHECK(c.in(i).numel() == 1 && c.r.konst[static_cast<std::size_t>(c.n.in[i])], ValueError,
             c.where(), ": input ", i,
             " must be a one-element constant (Constant, Shape or an integer initializer, or "
             "computed from those only), got shape ",
             c.in(i).shape());
    NoTrace nt;
    v[i] = cast(c.in(i), float64).contiguous().to_vector<double>()[0];
  }
  MS_CHECK(v[2] != 0 && std::isfinite(v[0]) && std::isfinite(v[1]) && std::isfinite(v[2]),
           ValueError, c.where(), ": start, limit and delta must be finite and delta not 0, got ",
           v[0], ", ", v[1], ", ", v[2]);
  // ONNX's count: max(ceil((limit - start) / delta), 0) elements.
  const double n = std::max(std::ceil((v[1] - v[0]) / v[2]), 0.0);
  MS_CHECK(n <= static_cast<double>(kMaxElements), ValueError, c.where(), ": Range(", v[0], ", ",
           v[1], ", ", v[2], ") has ", n, " elements, more than 2^40");
  MS_CHECK(dtype_is_float(c.in(0).dtype()) ||
               (std::abs(v[0]) <= 0x1p53 && std::abs(v[1]) <= 0x1p53 && std::abs(v[2]) <= 0x1p53),
           ValueError, c.where(),
           ": integer start, limit and delta must be at most 2^53 in magnitude (computed "
           "exactly in double), got ",
           v[0], ", ", v[1], ", ", v[2]);
  NoTrace nt;
  c.out(0, arange(v[0], v[1], v[2], c.in(0).dtype()));
}
void shape_op(Ctx& c) {
  const I64s d = c.in(0).shape().to_vector();
  const auto r = static_cast<std::int64_t>(d.size());
  const std::int64_t s = std::clamp(norm(c.attr_i("start", 0), r), std::int64_t{0}, r);
  const std::int64_t e = std::clamp(norm(c.attr_i("end", r), r), s, r);
  Tensor t = empty(Shape({e - s}), int64);
  std::copy(d.begin() + s, d.begin() + e, t.data<std::int64_t>());
  c.out(0, t);
}

void split_op(Ctx& c) {
  const Tensor& x = c.in(0);
  const std::int64_t axis = axis_in(c, c.attr_i("axis", 0), c.rank());
  const std::int64_t d = x.shape()[static_cast<std::size_t>(axis)];
  const std::size_t n = c.n.out.size();
  I64s sizes = c.has(1) ? c.ints(1) : I64s{};
  if (sizes.empty()) {  // equal parts, one per output
    MS_CHECK(d % static_cast<std::int64_t>(n) == 0, ValueError, c.where(), ": axis ", axis,
             " has size ", d, ", which does not split into ", n,
             " equal parts (give the sizes as input 1)");
    sizes.assign(n, d / static_cast<std::int64_t>(n));
  }
  MS_CHECK(sizes.size() == n, ValueError, c.where(), ": input 1 gives ", sizes.size(),
           " sizes for ", n, " outputs");
  std::int64_t start = 0;
  for (std::size_t i = 0; i < n; ++i) {
    MS_CHECK(sizes[i] >= 0 && sizes[i] <= d - start, ValueError, c.where(), ": split size ",
             sizes[i], " of output ", i, " is negative or runs past size ", d, " of axis ", axis);
    c.out(i, x.slice(axis, start, start + sizes[i], 1));
    start += sizes[i];
  }
  MS_CHECK(start == d, ValueError, c.where(), ": the split sizes add up to ", start, ", axis ",
           axis, " has size ", d);
}
void constant_of_shape(Ctx& c) {
  const I64s dims = c.ints(0);
  std::int64_t numel = 1;
  for (std::int64_t d : dims) {
    MS_CHECK(d >= 0, ValueError, c.where(), ": the shape (input 0) has a negative size ", d);
    MS_CHECK(d == 0 || numel <= kMaxElements / d, ValueError, c.where(),
             ": the shape (input 0) has more than 2^40 elements");
    numel *= d;
  }
  Tensor v = tensor(0.0, float32);  // ONNX's default value: a float 0
  if (auto it = c.n.attrs.find("value"); it != c.n.attrs.end()) {
    v = it->second.t;
    MS_CHECK(v.defined() && v.numel() == 1, ValueError, c.where(),
             ": attribute value must be a tensor of one element, it has ",
             v.defined() ? v.numel() : 0);
  }
  c.out(0, broadcast_to(reshape(v, Shape(I64s{})), Shape(dims)).contiguous());
}

// ---------------------------------------------------------------- reductions

/// ReduceX: axes from input 1 (ReduceSum from opset 13, every reduction from 18) or the attribute.
template <int K>
void reduce_op(Ctx& c) {
  const I64s axes = c.axes(1);
  const bool keep = c.attr_i("keepdims", 1) != 0;
  if (axes.empty() && c.attr_i("noop_with_empty_axes", 0)) return c.out(0, c.in(0));
  const Tensor& x = c.in(0);
  switch (K) {
    case 0: return c.out(0, sum(x, axes, keep));
    case 1: return c.out(0, mean(x, axes, keep));
    case 2: return c.out(0, max(x, axes, keep));
    case 3: return c.out(0, min(x, axes, keep));
    default: return c.out(0, prod(x, axes, keep));
  }
}
template <bool Max>
void arg_op(Ctx& c) {
  MS_CHECK(c.attr_i("select_last_index", 0) == 0, ValueError, c.where(),
           ": select_last_index 1 is not supported");
  const std::int64_t axis = c.attr_i("axis", 0);
  const bool keep = c.attr_i("keepdims", 1) != 0;
  const Tensor r = Max ? argmax(c.in(0), axis, keep) : argmin(c.in(0), axis, keep);
  c.out(0, r.dtype() == int64 ? r : cast(r, int64));
}

// ---------------------------------------------------------------- the table

const std::unordered_map<std::string_view, Fn>& table() {
  static const std::unordered_map<std::string_view, Fn> t = {
      {"Abs", unary<ms::abs>},
      {"Neg", unary<ms::neg>},
      {"Exp", unary<ms::exp>},
      {"Log", unary<ms::log>},
      {"Sqrt", unary<ms::sqrt>},
      {"Reciprocal", unary<ms::reciprocal>},
      {"Sign", unary<ms::sign>},
      {"Floor", unary<ms::floor>},
      {"Ceil", unary<ms::ceil>},
      {"Sin", unary<ms::sin>},
      {"Cos", unary<ms::cos>},
      {"Tanh", unary<ms::tanh>},
      {"Sigmoid", unary<ms::sigmoid>},
      {"Relu", unary<ms::relu>},
      {"Erf", unary<ms::erf>},
      {"Softplus", unary<ms::softplus>},
      {"Not", unary<ms::logical_not>},
      {"Add", binary<ms::add>},
      {"Sub", binary<ms::sub>},
      {"Mul", binary<ms::mul>},
      {"Div", div_op},
      {"Pow", binary<ms::pow>},
      {"Equal", binary<ms::eq>},
      {"Less", binary<ms::lt>},
      {"LessOrEqual", binary<ms::le>},
      {"Greater", binary<ms::gt>},
      {"GreaterOrEqual", binary<ms::ge>},
      {"And", binary<ms::logical_and>},
      {"Or", binary<ms::logical_or>},
      {"Max", variadic<ms::maximum>},
      {"Min", variadic<ms::minimum>},
      {"Where", where_op},
      {"Identity", identity},
      {"Cast", cast_op},
      {"Constant", constant},
      {"MatMul", binary<ms::matmul>},
      {"Gemm", gemm},
      {"Conv", conv},
      {"MaxPool", max_pool},
      {"AveragePool", avg_pool},
      {"BatchNormalization", batch_norm},
      {"LayerNormalization", layer_norm},
      {"Softmax", softmax_op<false>},
      {"LogSoftmax", softmax_op<true>},
      {"Reshape", reshape_op},
      {"Transpose", transpose_op},
      {"Squeeze", squeeze_op},
      {"Unsqueeze", unsqueeze_op},
      {"Flatten", flatten_op},
      {"Expand", expand_op},
      {"Concat", concat_op},
      {"Slice", slice_op},
      {"Gather", gather_op},
      {"GatherElements", gather_elements},
      {"ScatterElements", scatter_elements},
      {"Trilu", trilu},
      {"Shape", shape_op},
      {"Split", split_op},
      {"ConstantOfShape", constant_of_shape},
      {"Range", range_op},
      {"CumSum", cumsum_op},
      {"ReduceSum", reduce_op<0>},
      {"ReduceMean", reduce_op<1>},
      {"ReduceMax", reduce_op<2>},
      {"ReduceMin", reduce_op<3>},
      {"ReduceProd", reduce_op<4>},
      {"ArgMax", arg_op<true>},
      {"ArgMin", arg_op<false>},
  };
  return t;
}

void check_inputs(const Program& p, std::span<const Tensor> inputs) {
  MS_CHECK(inputs.size() == p.inputs.size(), ValueError, "GraphCell: ", p.origin, " takes ",
           p.inputs.size(), " inputs, given ", inputs.size());
  std::unordered_map<std::string, std::int64_t> named;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const GInput& g = p.inputs[i];
    const Tensor& t = inputs[i];
    MS_CHECK(t.dtype() == g.dtype, TypeError, "GraphCell: input '", g.name, "' is declared ",
             dtype_name(g.dtype), ", given ", dtype_name(t.dtype()));
    MS_CHECK(t.shape().rank() == static_cast<std::int64_t>(g.dims.size()), ShapeError,
             "GraphCell: input '", g.name, "' is declared with rank ", g.dims.size(), ", given ",
             t.shape());
    for (std::size_t a = 0; a < g.dims.size(); ++a) {
      const std::int64_t d = t.shape()[a];
      MS_CHECK(g.dims[a] < 0 || g.dims[a] == d, ShapeError, "GraphCell: input '", g.name,
               "' is declared with size ", g.dims[a], " at axis ", a, ", given ", t.shape());
      if (g.dim_names[a].empty()) continue;
      auto [it, fresh] = named.emplace(g.dim_names[a], d);
      MS_CHECK(fresh || it->second == d, ShapeError, "GraphCell: dim '", g.dim_names[a], "' is ",
               it->second, " in an earlier input and ", d, " in input '", g.name, "'");
    }
  }
}

void run_node(Run& r, const GNode& n) {
  Ctx c{r, n};
  bool all_const = !n.in.empty() || n.op == "Constant";
  for (int v : n.in)
    if (v >= 0 && !r.konst[static_cast<std::size_t>(v)]) all_const = false;
  const Fn fn = table().at(n.op);
  if (all_const) {
    NoTrace nt;
    fn(c);
  } else {
    fn(c);
  }
  for (int v : n.out)
    if (v >= 0) r.konst[static_cast<std::size_t>(v)] = all_const || n.op == "Shape";
}

}  // namespace

std::vector<std::string> implemented_ops() {
  std::vector<std::string> v;
  for (const auto& [k, fn] : table()) v.emplace_back(k);
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<Tensor> run_program(const Program& p, std::span<const Tensor> inits,
                                std::span<const Tensor> inputs) {
  check_inputs(p, inputs);
  Run r{p, std::vector<Tensor>(p.values.size()), std::vector<char>(p.values.size(), 0)};
  for (std::size_t i = 0; i < inits.size(); ++i) {
    const auto v = static_cast<std::size_t>(p.init_values[i]);
    r.env[v] = inits[i];
    r.konst[v] = !dtype_is_float(inits[i].dtype());
  }
  for (std::size_t i = 0; i < inputs.size(); ++i)
    r.env[static_cast<std::size_t>(p.inputs[i].value)] = inputs[i];
  for (const GNode& n : p.nodes) run_node(r, n);
  std::vector<Tensor> outs;
  for (int v : p.outputs) {
    const Tensor& t = r.env[static_cast<std::size_t>(v)];
    MS_CHECK(t.defined(), ValueError, "GraphCell: output '", p.values[static_cast<std::size_t>(v)],
             "' was not computed (an omitted optional output)");
    outs.push_back(t);
  }
  return outs;
}

}  // namespace ms::onnx::detail
