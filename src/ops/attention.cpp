// Scaled dot-product attention: its entry, backward entry, gradient, samples
// and public function (see ms/ops/attention.hpp). `infer` checks everything
// types and attributes allow; `eval` makes q, k, v dense and calls the fused
// kernels of ms/kernels/attention.hpp.
#include "ms/ops/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ms/core/detail/strides.hpp"
#include "ms/expr/expr.hpp"
#include "ms/kernels/attention.hpp"
#include "ms/ops/detail/entry_impl.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/linalg.hpp"
#include "ms/ops/op.hpp"
#include "ms/ops/random.hpp"
#include "ms/ops/reduce.hpp"

namespace ms::ops {
namespace {

using Types = std::span<const TensorType>;
using Inputs = std::span<const Tensor>;
using TypeList = std::vector<TensorType>;
using TensorList = std::vector<Tensor>;

constexpr std::string_view kOp = "scaled_dot_product_attention";

using detail::u;

// a and b agree unless both are known and differ; the known one wins.
std::int64_t merge_dim(std::int64_t a, std::int64_t b) { return is_known_dim(a) ? a : b; }

void check_dtypes(Types in) {
  const DType dt = in[0].dtype;
  MS_CHECK(dt == float32 || dt == float64 || dt == bfloat16 || dt == float16, TypeError, kOp,
           ": q must have dtype Float32, Float64, BFloat16 or Float16, got ", dt);
  const char* names[] = {"q", "k", "v"};
  for (std::size_t i = 1; i < 3; ++i)
    MS_CHECK(in[i].dtype == dt, TypeError, kOp, ": ", names[i], " has dtype ", in[i].dtype,
             ", expected q's dtype ", dt, " (cast it with .to())");
}

// The leading (batch) dims, equal in q, k and v (unknown dims merged).
Shape check_ranks(Types in) {
  const char* names[] = {"q", "k", "v"};
  const char* forms[] = {"[..., Tq, E]", "[..., Tk, E]", "[..., Tk, Ev]"};
  for (std::size_t i = 0; i < 3; ++i)
    MS_CHECK(in[i].shape.rank() >= 2, ShapeError, kOp, ": ", names[i], " must have rank >= 2 (",
             forms[i], "), got shape ", in[i].shape, " of rank ", in[i].shape.rank());
  const Shape &q = in[0].shape, &k = in[1].shape, &v = in[2].shape;
  MS_CHECK(q.rank() == k.rank() && q.rank() == v.rank(), ShapeError, kOp,
           ": q, k and v must have the same rank (equal leading dims, no broadcasting), got q ", q,
           ", k ", k, ", v ", v);
  std::vector<std::int64_t> lead(u(q.rank() - 2));
  for (std::size_t d = 0; d < lead.size(); ++d) {
    for (std::size_t i = 1; i < 3; ++i) {
      const std::int64_t a = q[d], b = in[i].shape[d];
      MS_CHECK(!is_known_dim(a) || !is_known_dim(b) || a == b, ShapeError, kOp,
               ": leading dims of q ", q, " and ", names[i], " ", in[i].shape, " differ at axis ",
               d, " (", a, " vs ", b, "; attention does not broadcast them)");
    }
    lead[d] = merge_dim(q[d], merge_dim(k[d], v[d]));
  }
  const std::int64_t e = q[u(q.rank() - 1)], ek = k[u(k.rank() - 1)];
  MS_CHECK(!is_known_dim(e) || !is_known_dim(ek) || e == ek, ShapeError, kOp, ": q ", q, " and k ",
           k, ": feature sizes E differ (", e, " vs ", ek, ")");
  const std::int64_t tk = k[u(k.rank() - 2)], tv = v[u(v.rank() - 2)];
  MS_CHECK(!is_known_dim(tk) || !is_known_dim(tv) || tk == tv, ShapeError, kOp, ": k ", k,
           " and v ", v, ": key counts Tk differ (", tk, " vs ", tv, ")");
  return Shape(std::move(lead));
}

void check_mask(const TensorType& m, DType dt, const Shape& scores) {
  MS_CHECK(m.dtype == bool_ || m.dtype == dt, TypeError, kOp, ": mask must have dtype Bool ",
           "(true keeps) or q's dtype ", dt, " (added to the scores), got ", m.dtype);
  if (m.shape.is_any_rank()) return;
  const Shape& s = m.shape;
  MS_CHECK(s.rank() <= scores.rank(), ShapeError, kOp, ": mask of shape ", s,
           " does not broadcast to the scores' shape ", scores, " (rank ", s.rank(), " > ",
           scores.rank(), ")");
  for (std::int64_t d = 1; d <= s.rank(); ++d) {
    const std::int64_t md = s[u(s.rank() - d)], sd = scores[u(scores.rank() - d)];
    MS_CHECK(md == 1 || !is_known_dim(md) || !is_known_dim(sd) || md == sd, ShapeError, kOp,
             ": mask of shape ", s, " does not broadcast to the scores' shape ", scores,
             " [..., Tq, Tk]: axis ", -d, " has size ", md, " (expected ", sd, " or 1)");
  }
}

// The dtype of lse and delta: the kernels' compute dtype (float32 for
// bfloat16 and float16 inputs).
DType stat_dtype(DType dt) { return dt == float64 ? float64 : float32; }

// out and lse types of the forward (the inputs checked).
TypeList forward_types(const AttentionAttrs& a, Types in) {
  check_dtypes(in);
  MS_CHECK(!a.scale || std::isfinite(*a.scale), ValueError, kOp, ": scale must be finite, got ",
           *a.scale);
  const DType dt = in[0].dtype, st = stat_dtype(dt);
  for (std::size_t i = 0; i < 3; ++i)
    if (in[i].shape.is_any_rank()) return {{dt, Shape{kAnyRank}}, {st, Shape{kAnyRank}}};
  const Shape lead = check_ranks(in);
  const Shape &q = in[0].shape, &k = in[1].shape, &v = in[2].shape;
  const std::int64_t tq = q[u(q.rank() - 2)];
  const std::int64_t tk = merge_dim(k[u(k.rank() - 2)], v[u(v.rank() - 2)]);
  Shape scores = lead, out = lead, lse = lead;
  scores.push_back(tq);
  scores.push_back(tk);
  if (in.size() > 3) check_mask(in[3], dt, scores);
  out.push_back(tq);
  out.push_back(v[u(v.rank() - 1)]);
  lse.push_back(tq);
  if (out.is_static()) shape_numel(out, kOp);
  return {{dt, std::move(out)}, {st, std::move(lse)}};
}

Tensor alloc(const TensorType& t) {
  return detail::alloc_output(t, "scaled_dot_product_attention");
}

// The kernels' view of a call whose inputs `in` (q, k, v, then `rest`
// tensors, then maybe the mask) infer checked.
kernels::AttentionProblem problem(const AttentionAttrs& a, Inputs in, std::size_t mask_at) {
  const Shape& q = in[0].shape();
  const Shape& v = in[2].shape();
  kernels::AttentionProblem p;
  p.tq = q[u(q.rank() - 2)];
  p.e = q[u(q.rank() - 1)];
  p.tk = v[u(v.rank() - 2)];
  p.ev = v[u(v.rank() - 1)];
  p.batch = 1;
  for (std::int64_t d = 0; d + 2 < q.rank(); ++d) p.batch *= q[u(d)];
  p.scale = a.scale ? *a.scale : (p.e > 0 ? 1.0 / std::sqrt(static_cast<double>(p.e)) : 1.0);
  p.causal = a.causal;
  if (in.size() > mask_at) {
    std::vector<std::int64_t> s(q.begin(), q.end() - 1);
    s.push_back(p.tk);
    p.mask = ::ms::detail::expand_view(in[mask_at], Shape(std::move(s)));
  }
  return p;
}

using detail::dense;

// q, k, v, dout as the kernels read them: any view whose rows are dense (the
// heads of a [B, T, H, D] tensor seen as [B, H, T, D]) as it is, else a copy.
Tensor dense_rows(const Tensor& t) {
  if (t.rank() >= 2 && (t.shape().at(-1) <= 1 || t.strides().back() == 1)) return t;
  return dense(t);
}

// A result of type t laid out as `ref` (q for the output, each input for its
// gradient): dense, with its dims in the order of ref's strides when ref's
// rows are dense but its dims are in another order (heads split out of [B,
// T, H, D], or out of a packed [B, T, 3, H, D] projection), so that merging
// the heads back is a view; else contiguous. Query rows alone (Tq 1) stay
// contiguous.
Tensor alloc_like(const TensorType& t, const Tensor& ref) {
  Tensor out = alloc(t);
  const std::size_t n = ref.shape().size();
  if (ref.is_contiguous() || t.shape.size() != n || n < 3 || t.shape[n - 2] <= 1) return out;
  const std::vector<std::int64_t> order = ::ms::detail::stride_order(ref.strides());
  if (order.back() != static_cast<std::int64_t>(n - 1) || ref.strides().back() != 1) return out;
  if (std::is_sorted(order.begin(), order.end())) return out;  // ref's order: contiguous
  return Tensor(out.storage(), t.dtype, t.shape, ::ms::detail::dense_strides(t.shape.dims(), order),
                0);
}

}  // namespace

TypeList ScaledDotProductAttention::infer(const Attrs& a, Types in) { return forward_types(a, in); }

TensorList ScaledDotProductAttention::eval(const Attrs& a, Inputs in) {
  const TypeList t = infer(a, types_of(in));
  Tensor out = alloc_like(t[0], in[0]), lse = alloc(t[1]);
  kernels::attention_forward(problem(a, in, 3), dense_rows(in[0]), dense_rows(in[1]),
                             dense_rows(in[2]), out, lse);
  return {out, lse};
}

// The weights P = exp(s - lse) are recomputed by the backward op; delta
// folds lse's own gradient in: d lse / d s = P, so dS = P * (dP - delta)
// with delta = rowsum(dout * out) - dlse (in lse's dtype). A floating mask's
// gradient is dS summed to its shape, by its own fused op: unused (a mask
// that is a constant), it is dropped with the rest of the dead graph.
TensorList ScaledDotProductAttention::vjp(const Attrs& a, const GradContext& c) {
  const Tensor& out = c.outputs[0];
  const DType st = c.outputs[1].dtype();
  const Tensor dout = c.out_grads[0].defined() ? c.out_grads[0] : zeros(out.shape(), out.dtype());
  Tensor delta = sum(dout.to(st) * out.to(st), {-1});
  if (c.out_grads[1].defined()) delta = delta - c.out_grads[1];
  TensorList args{c.inputs[0], c.inputs[1], c.inputs[2], dout, c.outputs[1], delta};
  if (c.inputs.size() > 3) args.push_back(c.inputs[3]);
  TensorList g = invoke<ScaledDotProductAttentionGrad>(std::span<const Tensor>(args), a);
  if (c.inputs.size() > 3) {
    if (c.inputs[3].dtype() == bool_)
      g.emplace_back();  // a Bool mask has no gradient
    else
      g.push_back(invoke<ScaledDotProductAttentionMaskGrad>(std::span<const Tensor>(args), a)[0]);
  }
  return g;
}

namespace {

// The backward ops' inputs checked (as `api`): q, k, v and the mask as the
// forward, dout, lse and delta of the forward's output types.
TypeList grad_types(const AttentionAttrs& a, Types in, std::string_view api) {
  std::vector<TensorType> fwd{in[0], in[1], in[2]};
  if (in.size() > 6) fwd.push_back(in[6]);
  const TypeList t = forward_types(a, fwd);
  const char* names[] = {"dout", "lse", "delta"};
  const TensorType* want[] = {&t[0], &t[1], &t[1]};
  for (std::size_t i = 0; i < 3; ++i) {
    const TensorType& g = in[3 + i];
    MS_CHECK(g.dtype == want[i]->dtype, TypeError, api, ": ", names[i], " has dtype ", g.dtype,
             ", expected ", want[i]->dtype);
    bool ok = g.shape.rank() == want[i]->shape.rank() || g.shape.is_any_rank() ||
              want[i]->shape.is_any_rank();
    for (std::size_t d = 0;
         ok && !g.shape.is_any_rank() && !want[i]->shape.is_any_rank() && d < g.shape.size(); ++d)
      ok = !is_known_dim(g.shape[d]) || !is_known_dim(want[i]->shape[d]) ||
           g.shape[d] == want[i]->shape[d];
    MS_CHECK(ok, ShapeError, api, ": ", names[i], " has shape ", g.shape, ", expected ",
             want[i]->shape);
  }
  return {in[0], in[1], in[2]};
}

// The backward recomposed from ops, [..., Tq, Tk] materialized: the
// weights P, dP = dout v^T and dS = P * (dP - delta), in lse's dtype.
struct Naive {
  Tensor q, k, v, dout, lse, delta, p, dp, ds;
  double scale = 1;
};

Naive naive_backward(const AttentionAttrs& a, Inputs in) {
  const DType st = in[4].dtype();
  Naive n{in[0].to(st), in[1].to(st), in[2].to(st), in[3].to(st), in[4], in[5], {}, {}, {}};
  const Shape &qs = n.q.shape(), &ks = n.k.shape();
  MS_CHECK(!qs.is_any_rank() && !ks.is_any_rank(), ValueError, ScaledDotProductAttentionGrad::name,
           ": its gradient needs the ranks of q and k known; got q ", qs, " and k ", ks);
  const std::int64_t e = qs.at(-1), tq = qs.at(-2), tk = ks.at(-2);
  MS_CHECK((a.scale || e >= 0) && (!a.causal || (tq >= 0 && tk >= 0)), ValueError,
           ScaledDotProductAttentionGrad::name,
           ": its gradient needs E known (or a scale), and Tq and Tk known with causal; got q ", qs,
           " and k ", ks);
  n.scale = a.scale ? *a.scale : (e > 0 ? 1.0 / std::sqrt(static_cast<double>(e)) : 1.0);
  Tensor s = matmul(n.q, n.k.transpose(-2, -1)) * n.scale;
  std::optional<Tensor> keep;
  if (in.size() > 6 && in[6].dtype() == bool_) keep = in[6];
  if (in.size() > 6 && in[6].dtype() != bool_) s = s + in[6].to(st);
  if (a.causal) {
    const Tensor band = tril(ones({tq, tk}, bool_), {.diagonal = tk - tq});
    keep = keep ? Tensor(logical_and(*keep, band)) : band;
  }
  // A row that keeps no key has lse -inf and P 0; masked entries are 0.
  const Tensor lse =
      unsqueeze(where(n.lse == -std::numeric_limits<double>::infinity(), 0.0, n.lse), -1);
  n.p = keep ? Tensor(where(*keep, exp(where(*keep, s, lse) - lse), 0.0)) : Tensor(exp(s - lse));
  n.dp = matmul(n.dout, n.v.transpose(-2, -1));
  n.ds = n.p * (n.dp - unsqueeze(n.delta, -1));
  return n;
}

// The gradients of the backward's inputs q, k, v, dout, lse, delta (and a
// floating mask) from those of dq, dk, dv (and the mask's gradient; any may
// be undefined), by differentiating the recomposition by hand.
TensorList naive_vjp(const AttentionAttrs& a, Inputs in, const Tensor& gq, const Tensor& gk,
                     const Tensor& gv, const Tensor& gm) {
  const Naive n = naive_backward(a, in);
  const DType st = n.p.dtype();
  Tensor dq, dk, dv, ddout, gds, gp;
  if (gq.defined()) {
    gds = detail::add_defined(gds, matmul(gq.to(st), n.k.transpose(-2, -1)) * n.scale);
    dk = detail::add_defined(dk, matmul(n.ds.transpose(-2, -1), gq.to(st)) * n.scale);
  }
  if (gk.defined()) {
    gds = detail::add_defined(gds, matmul(n.q, gk.to(st).transpose(-2, -1)) * n.scale);
    dq = detail::add_defined(dq, matmul(n.ds, gk.to(st)) * n.scale);
  }
  if (gv.defined()) {
    gp = matmul(n.dout, gv.to(st).transpose(-2, -1));
    ddout = matmul(n.p, gv.to(st));
  }
  if (gm.defined()) gds = detail::add_defined(gds, gm.to(st) + zeros_like(n.ds));
  Tensor ddelta;
  if (gds.defined()) {
    gp = detail::add_defined(gp, gds * (n.dp - unsqueeze(n.delta, -1)));
    const Tensor gdp = gds * n.p;
    ddelta = -sum(gdp, {-1});
    ddout = detail::add_defined(ddout, matmul(gdp, n.v));
    dv = matmul(gdp.transpose(-2, -1), n.dout);
  }
  TensorList g{dq, dk, dv, ddout, Tensor(), ddelta};
  if (in.size() > 6) g.emplace_back();
  if (!gp.defined()) return g;
  const Tensor gs = gp * n.p;
  g[0] = detail::add_defined(dq, matmul(gs, n.k) * n.scale);
  g[1] = detail::add_defined(dk, matmul(gs.transpose(-2, -1), n.q) * n.scale);
  g[4] = -sum(gs, {-1});
  if (in.size() > 6 && in[6].dtype() != bool_) g[6] = detail::sum_to(gs, in[6].shape());
  return g;
}

}  // namespace

TypeList ScaledDotProductAttentionGrad::infer(const Attrs& a, Types in) {
  return grad_types(a, in, name);
}

namespace {

// dq, dk and dv in one buffer laid out as q, k and v lie in theirs, when
// they are three equally spaced pieces of one dense buffer with the same
// strides (heads split out of a packed [B, T, 3 E] projection): merging the
// heads of the gradients back and concatenating them (split's gradient) are
// then views (concat_view in layout.cpp). Empty otherwise.
TensorList alloc_packed(const TypeList& t, Inputs in) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  const std::int64_t step = k.offset() - q.offset();
  if (q.storage() != k.storage() || q.storage() != v.storage() || step <= 0 ||
      v.offset() - k.offset() != step || q.rank() < 2 || q.strides().back() != 1)
    return {};
  for (std::size_t i = 0; i < 3; ++i)
    if (in[i].dtype() != t[i].dtype || in[i].shape() != t[i].shape ||
        !std::ranges::equal(in[i].strides(), q.strides()))
      return {};
  // q's dims and a dim of the 3 pieces `step` apart: dense in some order?
  std::vector<std::int64_t> sizes(q.shape().dims().begin(), q.shape().dims().end());
  std::vector<std::int64_t> strides(q.strides().begin(), q.strides().end());
  sizes.push_back(3);
  strides.push_back(step);
  if (!::ms::detail::dense_in(sizes, strides, ::ms::detail::stride_order(strides))) return {};
  const Tensor buf = alloc(TensorType{t[0].dtype, Shape{3 * q.numel()}});
  TensorList out;
  for (std::int64_t i = 0; i < 3; ++i)
    out.emplace_back(buf.storage(), t[0].dtype, t[0].shape, DimVector(q.strides()), i * step);
  return out;
}

}  // namespace

TensorList ScaledDotProductAttentionGrad::eval(const Attrs& a, Inputs in) {
  const TypeList t = infer(a, types_of(in));
  TensorList g = alloc_packed(t, in);
  if (g.empty()) g = {alloc_like(t[0], in[0]), alloc_like(t[1], in[1]), alloc_like(t[2], in[2])};
  kernels::attention_backward(problem(a, in, 6), dense_rows(in[0]), dense_rows(in[1]),
                              dense_rows(in[2]), dense_rows(in[3]), dense(in[4]), dense(in[5]),
                              g[0], g[1], g[2]);
  return g;
}

// Second derivatives: the backward recomposed from ops and differentiated
// (correct, and [..., Tq, Tk] materialized).
TensorList ScaledDotProductAttentionGrad::vjp(const Attrs& a, const GradContext& c) {
  return naive_vjp(a, c.inputs, c.out_grads[0], c.out_grads[1], c.out_grads[2], Tensor());
}

TypeList ScaledDotProductAttentionMaskGrad::infer(const Attrs& a, Types in) {
  (void)grad_types(a, in, name);
  MS_CHECK(in[6].dtype != bool_, TypeError, name, ": mask must be floating (q's dtype ",
           in[0].dtype, "), got Bool: a Bool mask has no gradient");
  return {in[6]};
}

TensorList ScaledDotProductAttentionMaskGrad::eval(const Attrs& a, Inputs in) {
  const TypeList t = infer(a, types_of(in));
  Tensor dmask = alloc(t[0]);
  const kernels::AttentionProblem p = problem(a, in, 6);
  std::vector<std::int64_t> padded(u(in[0].rank() - dmask.rank()), 1);
  padded.insert(padded.end(), dmask.shape().begin(), dmask.shape().end());
  const Tensor view =
      ::ms::detail::expand_view(dmask.reshape(Shape(std::move(padded))), p.mask.shape());
  kernels::attention_mask_backward(p, dense_rows(in[0]), dense_rows(in[1]), dense_rows(in[2]),
                                   dense_rows(in[3]), dense(in[4]), dense(in[5]), view);
  return {dmask};
}

TensorList ScaledDotProductAttentionMaskGrad::vjp(const Attrs& a, const GradContext& c) {
  return naive_vjp(a, c.inputs, Tensor(), Tensor(), Tensor(), c.out_grads[0]);
}

}  // namespace ms::ops

// ---------------------------------------------------------------- samples

namespace ms::ops {
namespace {

using A = AttentionAttrs;
constexpr double kInf = std::numeric_limits<double>::infinity();

using detail::f64;

// v = [[1, 2], [3, 4], [5, 6]]: with q = 0 every kept key weighs the same,
// so out is the mean of the kept rows of v and lse the log of their count.
Tensor v3() { return f64({{1, 2}, {3, 4}, {5, 6}}); }
Tensor k3() { return ::ms::ops::detail::sample_tensor({3, 4}, 90, -2, 2, float64); }

Sample valued(std::string label, std::vector<Tensor> in, const A& a, Tensor out, Tensor lse) {
  Sample s = ::ms::ops::detail::sample(std::move(label), std::move(in), a,
                                       {std::move(out), std::move(lse)});
  s.tol = 1e-12;
  return s;
}

std::vector<Sample> valued_samples() {
  const Tensor z2 = zeros({2, 4}, float64), z3 = zeros({3, 4}, float64);
  const double l2 = std::log(2.0), l3 = std::log(3.0);
  return {
      valued("q = 0: out is the mean of v's rows", {z2, k3(), v3()}, A{}, f64({{3, 4}, {3, 4}}),
             tensor({l3, l3}, float64)),
      valued("causal, Tq == Tk", {z3, k3(), v3()}, A{.causal = true}, f64({{1, 2}, {2, 3}, {3, 4}}),
             tensor({0.0, l2, l3}, float64)),
      valued("causal, Tq < Tk: the band ends at the last key", {z2, k3(), v3()}, A{.causal = true},
             f64({{2, 3}, {3, 4}}), tensor({l2, l3}, float64)),
      valued("causal, Tq > Tk: the first row keeps no key and gives 0",
             {zeros({4, 4}, float64), k3(), v3()}, A{.causal = true},
             f64({{0, 0}, {1, 2}, {2, 3}, {3, 4}}), tensor({-kInf, 0.0, l2, l3}, float64)),
      valued("Bool mask keeping one key per row",
             {z2, k3(), v3(), tensor({{false, true, false}, {true, false, false}})}, A{},
             f64({{3, 4}, {1, 2}}), tensor({0.0, 0.0}, float64)),
      valued("fully masked row gives 0",
             {z2, k3(), v3(), tensor({{false, false, false}, {true, true, true}})}, A{},
             f64({{0, 0}, {3, 4}}), tensor({-kInf, l3}, float64)),
      valued("float mask [1, 3] with -inf, broadcast over rows",
             {z2, k3(), v3(), tensor({0.0, 0.0, -kInf}, float64).reshape({1, 3})}, A{},
             f64({{2, 3}, {2, 3}}), tensor({l2, l2}, float64)),
      valued("scale: weights 3/4 and 1/4", {f64({{1, 1}}), f64({{1, 1}, {0, 0}}), f64({{4}, {8}})},
             A{.scale = std::log(3.0) / 2}, f64({{5}}), tensor({std::log(4.0)}, float64)),
      valued("empty keys: rows give 0", {z2, zeros({0, 4}, float64), zeros({0, 2}, float64)}, A{},
             f64({{0, 0}, {0, 0}}), tensor({-kInf, -kInf}, float64)),
  };
}

using detail::rnd;

Sample graded(std::string label, std::vector<Tensor> in, const A& a) {
  return ::ms::ops::detail::sample(std::move(label), std::move(in), a, {}, {0, 1, 2});
}

// No gradient sample has a fully masked row: the table's check also
// differentiates lse, -inf there, where central differences give NaN
// (tests/ops/test_attention.cpp checks such rows' gradients).
std::vector<Sample> other_samples() {
  const Tensor bmask = tensor({{true, false, true, true, false},
                               {false, true, true, false, true},
                               {true, true, false, false, false},
                               {false, false, false, true, false}});
  return {
      ::ms::ops::detail::sample("float32 [2, 3, 5, 4]",
                                {rnd({2, 3, 5, 4}, 91, float32), rnd({2, 3, 5, 4}, 92, float32),
                                 rnd({2, 3, 5, 4}, 93, float32)},
                                A{}),
      ::ms::ops::detail::sample(
          "float32 [1, 2, 70, 16] causal, Tk 200: crosses row and key blocks",
          {rnd({1, 2, 70, 16}, 94, float32), rnd({1, 2, 200, 16}, 95, float32),
           rnd({1, 2, 200, 8}, 96, float32)},
          A{.causal = true}),
      graded("gradient [2, 3, 4], E 4, Ev 3",
             {rnd({2, 3, 4}, 97), rnd({2, 5, 4}, 98), rnd({2, 5, 3}, 99)}, A{}),
      graded("gradient causal [1, 2, 5, 3]",
             {rnd({1, 2, 5, 3}, 100), rnd({1, 2, 5, 3}, 101), rnd({1, 2, 5, 2}, 102)},
             A{.causal = true}),
      graded("gradient causal, Tq 3 < Tk 5, scale 0.7",
             {rnd({2, 3, 3}, 103), rnd({2, 5, 3}, 104), rnd({2, 5, 3}, 105)},
             A{.causal = true, .scale = 0.7}),
      graded("gradient, Bool mask [4, 5]",
             {rnd({2, 4, 3}, 106), rnd({2, 5, 3}, 107), rnd({2, 5, 2}, 108), bmask}, A{}),
      graded("gradient, float mask [2, 1, 4, 5] over heads, and causal",
             {rnd({2, 3, 4, 3}, 109), rnd({2, 3, 5, 3}, 110), rnd({2, 3, 5, 3}, 111),
              rnd({2, 1, 4, 5}, 112)},
             A{.causal = true}),
  };
}

std::vector<ErrorSample> error_samples() {
  const Tensor q = zeros({2, 3, 4}), k = zeros({2, 5, 4}), v = zeros({2, 5, 6});
  const auto err = [](std::string label, std::vector<Tensor> in, std::string_view kind,
                      std::string msg) {
    return ::ms::ops::detail::error_sample(std::move(label), std::move(in), A{}, kind,
                                           std::move(msg));
  };
  const std::string op(kOp);
  return {
      err("q of rank 1", {zeros({4}), k, v}, "ms::ShapeError",
          op + ": q must have rank >= 2 ([..., Tq, E]), got shape [4] of rank 1"),
      err("v of rank 1", {zeros({3, 4}), zeros({5, 4}), zeros({5})}, "ms::ShapeError",
          op + ": v must have rank >= 2"),
      err("E of q and k differ", {q, zeros({2, 5, 3}), v}, "ms::ShapeError",
          "feature sizes E differ (4 vs 3)"),
      err("Tk of k and v differ", {q, k, zeros({2, 4, 6})}, "ms::ShapeError",
          "key counts Tk differ (5 vs 4)"),
      err("leading dims differ", {q, zeros({1, 5, 4}), zeros({1, 5, 6})}, "ms::ShapeError",
          "leading dims of q [2, 3, 4] and k [1, 5, 4] differ at axis 0 (2 vs 1"),
      err("ranks differ", {q, zeros({5, 4}), zeros({5, 6})}, "ms::ShapeError",
          "q, k and v must have the same rank"),
      err("int32 q", {zeros({3, 4}, int32), zeros({5, 4}, int32), zeros({5, 6}, int32)},
          "ms::TypeError",
          op + ": q must have dtype Float32, Float64, BFloat16 or Float16, got Int32"),
      err("k of another dtype", {q, zeros({2, 5, 4}, float64), v}, "ms::TypeError",
          op + ": k has dtype Float64, expected q's dtype Float32"),
      err("mask does not broadcast", {q, k, v, zeros({3, 4}, bool_)}, "ms::ShapeError",
          op + ": mask of shape [3, 4] does not broadcast to the scores' shape [2, 3, 5] [..., "
               "Tq, Tk]: axis -1 has size 4 (expected 5 or 1)"),
      err("mask of higher rank", {q, k, v, zeros({1, 2, 3, 5}, bool_)}, "ms::ShapeError",
          "(rank 4 > 3)"),
      err("int32 mask", {q, k, v, zeros({3, 5}, int32)}, "ms::TypeError",
          op + ": mask must have dtype Bool (true keeps) or q's dtype Float32 (added to the "
               "scores), got Int32"),
      err("float64 mask for float32 q", {q, k, v, zeros({3, 5}, float64)}, "ms::TypeError",
          "got Float64"),
      ::ms::ops::detail::error_sample("scale NaN", {q, k, v},
                                      A{.scale = std::numeric_limits<double>::quiet_NaN()},
                                      "ms::ValueError", op + ": scale must be finite, got nan"),
  };
}

// The backward op's inputs for q, k, v (and a mask): dout drawn, lse and
// delta from the forward as its gradient computes them.
std::vector<Tensor> grad_inputs(std::vector<Tensor> fwd, const A& a, unsigned seed) {
  const std::vector<Tensor> y = call(def_of<ScaledDotProductAttention>(), fwd, attrs_to(a));
  const Tensor dout = rnd(y[0].shape(), seed, y[0].dtype());
  const Tensor delta = sum(dout * y[0], {-1});
  std::vector<Tensor> in{fwd[0], fwd[1], fwd[2], dout, y[1], delta};
  if (fwd.size() > 3) in.push_back(fwd[3]);
  return in;
}

// The backward ops as functions of all their inputs (lse and delta drawn,
// not the forward's): their gradients, the recomposition differentiated,
// against central differences of the fused kernels.
std::vector<Sample> second_order(std::vector<int> wrt) {
  const auto in = [](Tensor mask) {
    std::vector<Tensor> v{rnd({2, 3, 3}, 140), rnd({2, 4, 3}, 141),    rnd({2, 4, 2}, 142),
                          rnd({2, 3, 2}, 143), rnd({2, 3}, 144) + 2.0, rnd({2, 3}, 145)};
    if (mask.defined()) v.push_back(mask);
    return v;
  };
  const Tensor bm =
      tensor({{true, false, true, true}, {true, true, false, true}, {false, true, true, true}});
  std::vector<int> with_mask = wrt;
  with_mask.push_back(6);
  return {
      detail::sample("second order, causal, float mask [1, 4]", in(rnd({1, 4}, 146)),
                     A{.causal = true}, {}, with_mask),
      detail::sample("second order, float mask [2, 3, 4], scale 0.8", in(rnd({2, 3, 4}, 147)),
                     A{.scale = 0.8}, {}, with_mask),
      detail::sample("second order, Bool mask", in(bm), A{}, {}, wrt),
  };
}

}  // namespace

Samples ScaledDotProductAttentionGrad::samples() {
  // q = 0, k = [1, -1], v = [2, 4], dout = 1: P = [1/2, 1/2], out = 3,
  // delta = 3, dS = P * (v - 3) = [-1/2, 1/2]: dq = dS k = -1, dk = dS^T q = 0,
  // dv = P^T dout = 1/2.
  const Tensor q = f64({{0}}), k = f64({{1}, {-1}}), v = f64({{2}, {4}});
  const Tensor lse = tensor({std::log(2.0)}, float64), delta = tensor({3.0}, float64);
  Sample hand = detail::sample("Tq 1, Tk 2: by hand", {q, k, v, f64({{1}}), lse, delta}, A{},
                               {f64({{-1}}), f64({{0}, {0}}), f64({{0.5}, {0.5}})});
  hand.tol = 1e-15;
  const Tensor bm = rnd({5, 70}, 120) < 0.8;
  const auto qkv = [](std::int64_t tq, std::int64_t tk, unsigned seed) {
    return std::vector<Tensor>{rnd({2, tq, 8}, seed, float32), rnd({2, tk, 8}, seed + 1, float32),
                               rnd({2, tk, 4}, seed + 2, float32)};
  };
  std::vector<Tensor> masked = qkv(5, 70, 121);
  masked.push_back(bm);
  std::vector<Tensor> bad = grad_inputs(qkv(5, 7, 124), A{}, 127);
  bad[3] = zeros({2, 5, 3});
  std::vector<Sample> cases{
      std::move(hand),
      detail::sample("float32 [2, 40, 8], Tk 70, causal",
                     grad_inputs(qkv(40, 70, 130), A{.causal = true}, 133), A{.causal = true}),
      detail::sample("float32 Bool mask [5, 70]", grad_inputs(masked, A{}, 134), A{})};
  for (Sample& s : second_order({0, 1, 2, 3, 4, 5})) cases.push_back(std::move(s));
  return {.cases = std::move(cases),
          .errors = {detail::error_sample("dout of the wrong shape", bad, A{}, "ms::ShapeError",
                                          "scaled_dot_product_attention_grad: dout has shape "
                                          "[2, 5, 3], expected [2, 5, 4]")}};
}

Samples ScaledDotProductAttentionMaskGrad::samples() {
  // The by-hand case of the backward op with a float mask [1, 2] of zeros:
  // dmask = dS = [-1/2, 1/2]; batch 2 (the same problem twice) broadcast
  // over a mask [2] sums it: [-1, 1].
  const Tensor q = f64({{0}}), k = f64({{1}, {-1}}), v = f64({{2}, {4}});
  const Tensor lse = tensor({std::log(2.0)}, float64), delta = tensor({3.0}, float64);
  Sample hand = detail::sample("Tq 1, Tk 2: by hand",
                               {q, k, v, f64({{1}}), lse, delta, zeros({1, 2}, float64)}, A{},
                               {f64({{-0.5, 0.5}})});
  hand.tol = 1e-15;
  const auto twice = [](const Tensor& t) { return stack({t, t}); };
  Sample summed = detail::sample("batch 2, mask [2]: summed over batch and rows",
                                 {twice(q), twice(k), twice(v), twice(f64({{1}})), twice(lse),
                                  twice(delta), zeros({2}, float64)},
                                 A{}, {tensor({-1.0, 1.0}, float64)});
  summed.tol = 1e-15;
  std::vector<Sample> cases{std::move(hand), std::move(summed)};
  for (Sample& s : second_order({0, 1, 2, 3, 4, 5}))
    if (s.inputs[6].dtype() != bool_) cases.push_back(std::move(s));
  std::vector<Tensor> bad{q, k, v, f64({{1}}), lse, delta, tensor({{true, true}})};
  return {.cases = std::move(cases),
          .errors = {detail::error_sample("Bool mask", bad, A{}, "ms::TypeError",
                                          "scaled_dot_product_attention_mask_grad: mask must be "
                                          "floating (q's dtype Float64), got Bool")}};
}

Samples ScaledDotProductAttention::samples() {
  std::vector<Sample> cases = valued_samples();
  for (Sample& s : other_samples()) cases.push_back(std::move(s));
  return {.cases = std::move(cases), .errors = error_samples()};
}

}  // namespace ms::ops

// ---------------------------------------------------------------- public function

namespace ms {
namespace {

// The materialized form, for dropout on the weights: the same scores, mask,
// causal band and fully-masked-row rule as the fused kernel, then
// ms::dropout on the weights.
Tensor attention_dropout(std::span<const Tensor> in, const ops::AttentionAttrs& a, double p) {
  (void)ops::ScaledDotProductAttention::infer(a, ops::types_of(in));  // the entry's checks
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  MS_CHECK(!q.shape().is_any_rank() && !k.shape().is_any_rank(), ValueError,
           "scaled_dot_product_attention: dropout > 0 needs the ranks of q and k known; got q ",
           q.shape(), " and k ", k.shape());
  const std::int64_t e = q.shape()[q.shape().size() - 1];
  const std::int64_t tq = q.shape()[q.shape().size() - 2], tk = k.shape()[k.shape().size() - 2];
  MS_CHECK((a.scale || e >= 0) && (!a.causal || (tq >= 0 && tk >= 0)), ValueError,
           "scaled_dot_product_attention: dropout > 0 needs E known (or a scale), and Tq and Tk "
           "known with causal; got q ",
           q.shape(), " and k ", k.shape());
  const double scale = a.scale ? *a.scale : (e > 0 ? 1.0 / std::sqrt(static_cast<double>(e)) : 1.0);
  Tensor s = matmul(q, k.transpose(-2, -1)) * scale;
  std::optional<Tensor> keep;
  if (in.size() > 3) {
    if (in[3].dtype() == bool_)
      keep = in[3];
    else
      s = s + in[3];
  }
  if (a.causal) {
    const Tensor band = tril(ones({tq, tk}, bool_), {.diagonal = tk - tq});
    keep = keep ? Tensor(logical_and(*keep, band)) : band;
  }
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (keep) s = where(*keep, s, neg_inf);
  const Tensor none = max(s, {-1}, true) == neg_inf;  // rows that keep no key
  const Tensor w = where(none, 0.0, softmax(where(none, 0.0, s), -1));
  return matmul(dropout(w, p, true), v);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& opts) {
  MS_CHECK(opts.dropout >= 0 && opts.dropout <= 1, ValueError,
           "scaled_dot_product_attention: dropout must be in [0, 1], got ", opts.dropout);
  const ops::AttentionAttrs a{.causal = opts.causal, .scale = opts.scale};
  std::vector<Tensor> in{q, k, v};
  if (opts.mask && opts.mask->defined()) in.push_back(*opts.mask);
  const std::span<const Tensor> args(in);
  const std::int64_t tk = k.rank() >= 2 ? k.shape()[k.shape().size() - 2] : -1;
  if (opts.dropout > 0 && tk != 0) return attention_dropout(args, a, opts.dropout);
  return ops::invoke<ops::ScaledDotProductAttention>(args, a)[0];
}

}  // namespace ms

namespace ms::ops::detail {

void register_attention_ops() {
  register_entries<ScaledDotProductAttention, ScaledDotProductAttentionGrad,
                   ScaledDotProductAttentionMaskGrad>();
}

}  // namespace ms::ops::detail
