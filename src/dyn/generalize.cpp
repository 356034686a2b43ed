// Generalized signatures and symbolic graphs (see ms/dyn/detail/generalize.hpp).
#include "ms/dyn/detail/generalize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

namespace ms::dyn::detail {

// ---------------------------------------------------------------- signatures

int Signature::arguments() const {
  int n = 0;
  for (const SigItem& it : items)
    if (it.depth == 0 && it.kind != SigItem::Kind::Close) ++n;
  return n;
}

std::vector<const SigItem*> Signature::inputs() const {
  std::vector<const SigItem*> r;
  for (const SigItem& it : items)
    if (it.kind == SigItem::Kind::Tensor || it.kind == SigItem::Kind::Mutable) r.push_back(&it);
  return r;
}

std::string Generalized::symbol_name(int i) const {
  const auto k = static_cast<std::size_t>(i);
  return k < names.size() && !names[k].empty() ? names[k] : ::ms::detail::str_cat('s', i);
}

int Generalized::unknown_ranks() const {
  return static_cast<int>(
      std::count_if(inputs.begin(), inputs.end(), [](const InputSpec& s) { return s.any_rank; }));
}

int Generalized::unknown_shapes() const {
  return static_cast<int>(std::count_if(inputs.begin(), inputs.end(), [](const InputSpec& s) {
    return !s.any_rank && std::any_of(s.dims.begin(), s.dims.end(), is_symbol);
  }));
}

void Generalized::canonicalize() {
  std::vector<int> map(names.size(), -1);
  std::vector<std::string> renamed;
  for (InputSpec& in : inputs)
    for (std::int64_t& d : in.dims)
      if (is_symbol(d)) {
        const auto id = static_cast<std::size_t>(symbol_id(d));
        if (map[id] < 0) {
          map[id] = static_cast<int>(renamed.size());
          renamed.push_back(names[id]);
        }
        d = symbol_dim(map[id]);
      }
  names = std::move(renamed);
}

std::string Generalized::to_string() const {
  std::vector<int> uses(names.size(), 0);
  for (const InputSpec& in : inputs)
    for (std::int64_t d : in.dims)
      if (is_symbol(d)) ++uses[static_cast<std::size_t>(symbol_id(d))];
  std::string s;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const InputSpec& in = inputs[i];
    if (i) s += ", ";
    s += ir::short_dtype_name(in.dtype);
    s += '[';
    if (in.any_rank) s += "-2";
    for (std::size_t k = 0; k < in.dims.size(); ++k) {
      if (k) s += ',';
      const std::int64_t d = in.dims[k];
      if (!is_symbol(d)) {
        s += std::to_string(d);
      } else {
        const int id = symbol_id(d);
        const bool plain =
            names[static_cast<std::size_t>(id)].empty() && uses[static_cast<std::size_t>(id)] == 1;
        s += plain ? std::string("-1") : symbol_name(id);
      }
    }
    s += ']';
  }
  return s;
}

Generalized exact(const Signature& sig) {
  Generalized g;
  std::vector<bool> stack;  // mutability of the open sequences
  int argument = -1;
  for (const SigItem& it : sig.items) {
    if (it.depth == 0 && it.kind != SigItem::Kind::Close) ++argument;
    switch (it.kind) {
      case SigItem::Kind::Open: stack.push_back(it.is_mutable); break;
      case SigItem::Kind::Close: stack.pop_back(); break;
      case SigItem::Kind::Number:
      case SigItem::Kind::Constant: break;
      case SigItem::Kind::Tensor:
      case SigItem::Kind::Mutable: {
        InputSpec s;
        s.dtype = it.dtype;
        if (it.kind == SigItem::Kind::Tensor) s.dims = it.shape.to_vector();
        s.fixed_sequence = std::find(stack.begin(), stack.end(), false) != stack.end();
        s.argument = argument;
        g.inputs.push_back(std::move(s));
        break;
      }
    }
  }
  return g;
}

bool same_structure(const Generalized& a, const Generalized& b) {
  if (a.inputs.size() != b.inputs.size()) return false;
  for (std::size_t i = 0; i < a.inputs.size(); ++i)
    if (a.inputs[i].dtype != b.inputs[i].dtype || a.inputs[i].argument != b.inputs[i].argument ||
        a.inputs[i].fixed_sequence != b.inputs[i].fixed_sequence)
      return false;
  return true;
}

std::optional<Generalized> generalize_all_dims(const Generalized& call, const Generalized& entry) {
  if (!same_structure(call, entry)) return std::nullopt;
  Generalized g;
  for (std::size_t i = 0; i < call.inputs.size(); ++i) {
    const InputSpec& c = call.inputs[i];
    const InputSpec& e = entry.inputs[i];
    InputSpec s = c;
    if (c.fixed_sequence) {
      if (!(c == e)) return std::nullopt;  // a non-mutable sequence must not change
    } else if (e.any_rank || c.any_rank || e.dims.size() != c.dims.size()) {
      s.any_rank = true;
      s.dims.clear();
    } else if (e.dims != c.dims) {
      for (std::int64_t& d : s.dims) {
        d = symbol_dim(g.num_symbols());
        g.names.emplace_back();
      }
    }
    g.inputs.push_back(std::move(s));
  }
  g.canonicalize();
  return g;
}

std::optional<Generalized> generalize_changed_dims(const Generalized& call,
                                                   const Generalized& entry) {
  if (!same_structure(call, entry)) return std::nullopt;
  Generalized g;
  // A new symbol per (entry symbol or old size, new size): dims that changed
  // alike share one, and an entry symbol whose dims now differ splits.
  std::map<std::tuple<bool, std::int64_t, std::int64_t>, int> made;
  auto symbol = [&](bool from_entry, std::int64_t old_dim, std::int64_t now, std::string name) {
    auto [it, fresh] = made.try_emplace({from_entry, old_dim, now}, g.num_symbols());
    if (fresh) g.names.push_back(std::move(name));
    return symbol_dim(it->second);
  };
  for (std::size_t i = 0; i < call.inputs.size(); ++i) {
    const InputSpec& c = call.inputs[i];
    const InputSpec& e = entry.inputs[i];
    InputSpec s = c;
    if (c.fixed_sequence) {
      if (!(c == e)) return std::nullopt;
    } else if (e.any_rank || c.any_rank || e.dims.size() != c.dims.size()) {
      s.any_rank = true;
      s.dims.clear();
    } else {
      for (std::size_t k = 0; k < s.dims.size(); ++k) {
        const std::int64_t old_dim = e.dims[k], now = c.dims[k];
        if (is_symbol(old_dim))
          s.dims[k] =
              symbol(true, old_dim, now, entry.names[static_cast<std::size_t>(symbol_id(old_dim))]);
        else if (old_dim != now)
          s.dims[k] = symbol(false, old_dim, now, {});
      }
    }
    g.inputs.push_back(std::move(s));
  }
  g.canonicalize();
  return g;
}

Generalized from_specs(std::span<const TensorSpec> specs, const Signature& call,
                       std::string_view api) {
  const int n = call.arguments();
  MS_CHECK(static_cast<int>(specs.size()) == n, ValueError, api, ": ", specs.size(),
           " input specs for a call with ", n, " arguments");
  Generalized g;
  std::map<std::string, std::pair<int, std::int64_t>> named;  // name -> (symbol, size)
  std::map<std::string, std::string> where;                   // name -> first use
  int argument = -1;
  for (const SigItem& it : call.items) {
    if (it.depth != 0 || it.kind == SigItem::Kind::Close) continue;
    ++argument;
    const TensorSpec& spec = specs[static_cast<std::size_t>(argument)];
    MS_CHECK(it.kind == SigItem::Kind::Tensor, TypeError, api, ": argument ", argument,
             " is not a tensor (",
             it.kind == SigItem::Kind::Number     ? "a number"
             : it.kind == SigItem::Kind::Constant ? "a string or enum constant"
             : it.kind == SigItem::Kind::Open     ? "a sequence"
                                                  : "a mutable scalar",
             "); input specs describe tensor arguments, got spec ", spec.to_string());
    MS_CHECK(it.dtype == spec.dtype, TypeError, api, ": argument ", argument, " has dtype ",
             it.dtype, " but its spec ", spec.to_string(), " says ", spec.dtype);
    InputSpec s;
    s.dtype = it.dtype;
    s.argument = argument;
    if (spec.any_rank) {
      s.any_rank = true;
    } else {
      MS_CHECK(it.shape.rank() == static_cast<std::int64_t>(spec.shape.size()), ShapeError, api,
               ": argument ", argument, " has shape ", it.shape, " (rank ", it.shape.rank(),
               ") but its spec ", spec.to_string(), " has rank ", spec.shape.size());
      for (std::size_t k = 0; k < spec.shape.size(); ++k) {
        const Dim& d = spec.shape[k];
        const std::int64_t given = it.shape[k];
        if (const std::string bad = d.violated_by(given); !d.is_static() && !bad.empty())
          ::ms::detail::raise<ShapeError>(api, ": argument ", argument, " axis ", k, " is ", given,
                                          " but its spec ", spec.to_string(), " requires ",
                                          d.to_string(), " (", bad, ")");
        if (d.is_static()) {
          MS_CHECK(given == d.size(), ShapeError, api, ": argument ", argument, " dim ", k, " is ",
                   given, " but its spec ", spec.to_string(), " needs ", d.size());
          s.dims.push_back(given);
        } else if (d.is_named()) {
          auto [pos, fresh] = named.try_emplace(d.name(), g.num_symbols(), given);
          if (fresh) {
            g.names.push_back(d.name());
            where[d.name()] = ::ms::detail::str_cat("argument ", argument, " dim ", k);
          }
          MS_CHECK(pos->second.second == given, ShapeError, api, ": argument ", argument, " dim ",
                   k, " is ", given, " but symbol ", d.name(), " of spec ", spec.to_string(),
                   " is ", pos->second.second, " (", where[d.name()], ")");
          s.dims.push_back(symbol_dim(pos->second.first));
        } else {
          s.dims.push_back(symbol_dim(g.num_symbols()));
          g.names.emplace_back();
        }
      }
    }
    g.inputs.push_back(std::move(s));
  }
  g.canonicalize();
  return g;
}

bool bind_symbols(const Generalized& g, std::span<const Shape> shapes,
                  std::vector<std::int64_t>& values, std::string* why) {
  values.assign(static_cast<std::size_t>(g.num_symbols()), -1);
  std::vector<std::string> first(values.size());
  if (shapes.size() != g.inputs.size()) {
    if (why)
      *why =
          ::ms::detail::str_cat(shapes.size(), " tensor inputs, the graph takes ", g.inputs.size());
    return false;
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const InputSpec& in = g.inputs[i];
    if (in.any_rank) continue;
    const Shape& s = shapes[i];
    auto spec = [&] {
      Generalized one;
      one.inputs = {in};
      one.names = g.names;
      return one.to_string();
    };
    if (s.size() != in.dims.size()) {
      if (why)
        *why = ::ms::detail::str_cat("argument ", in.argument, " has shape ", s, " but the spec ",
                                     spec(), " has rank ", in.dims.size());
      return false;
    }
    for (std::size_t k = 0; k < s.size(); ++k) {
      const std::int64_t d = in.dims[k];
      if (!is_symbol(d)) {
        if (s[k] != d) {
          if (why)
            *why = ::ms::detail::str_cat("argument ", in.argument, " dim ", k, " is ", s[k],
                                         " but the spec ", spec(), " needs ", d);
          return false;
        }
        continue;
      }
      const auto id = static_cast<std::size_t>(symbol_id(d));
      if (values[id] < 0) {
        values[id] = s[k];
        first[id] = ::ms::detail::str_cat("argument ", in.argument, " dim ", k);
      } else if (values[id] != s[k]) {
        if (why)
          *why = ::ms::detail::str_cat("argument ", in.argument, " dim ", k, " is ", s[k],
                                       " but symbol ", g.symbol_name(static_cast<int>(id)),
                                       " of the spec ", spec(), " is ", values[id], " (", first[id],
                                       ")");
        return false;
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------- symbolic graphs

namespace {

using Slot = SymbolicGraph::Slot;

bool same_bytes(const Tensor& x, const Tensor& y) {
  if (x.dtype() != y.dtype() || x.shape() != y.shape()) return false;
  const Tensor a = x.contiguous(), b = y.contiguous();
  return std::memcmp(a.raw_data(), b.raw_data(), static_cast<std::size_t>(a.nbytes())) == 0;
}

// Walks `g` against `base`: false when the structure differs; otherwise
// appends every number that may depend on sizes to `nums` (and, when given,
// where it lives to `locs`), in a fixed order.
bool collect(const ir::Graph& g, const ir::Graph& base, std::vector<double>& nums,
             std::vector<Slot>* locs, std::string& why) {
  auto fail = [&](auto&&... a) {
    why = ::ms::detail::str_cat(a...);
    return false;
  };
  auto num = [&](double v, Slot::Where w, ir::ValueId value, ir::NodeId node, std::size_t b,
                 std::size_t c) {
    nums.push_back(v);
    if (locs) locs->push_back({w, value, node, b, c, {}});
  };
  if (g.values.size() != base.values.size() || g.nodes.size() != base.nodes.size() ||
      g.outputs != base.outputs)
    return fail("the graph has another size (", g.nodes.size(), " nodes instead of ",
                base.nodes.size(), ")");
  for (std::size_t i = 0; i < g.values.size(); ++i) {
    const ir::ValueId v{i};
    const ir::Value& x = g.value(v);
    const ir::Value& y = base.value(v);
    if (x.type.dtype != y.type.dtype || x.node != y.node || x.index != y.index ||
        x.weak != y.weak || x.type.shape.size() != y.type.shape.size())
      return fail("value ", v, " has another type or rank");
    for (std::size_t d = 0; d < x.type.shape.size(); ++d)
      num(static_cast<double>(x.type.shape[d]), Slot::Where::Dim, v, ir::kNoNode, d, 0);
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const ir::Node& m = base.nodes[i];
    const ir::NodeId ni{i};
    if (n.kind != m.kind || n.def != m.def || n.ew_id != m.ew_id || n.inputs != m.inputs ||
        n.outputs != m.outputs || n.arg_index != m.arg_index || n.name != m.name ||
        n.fused != m.fused)
      return fail("node ", i, " differs");
    if (n.kind == ir::NodeKind::Capture && !n.tensor.is_same(m.tensor))
      return fail("node ", i, " captures another tensor");
    if (n.kind == ir::NodeKind::Const && !same_bytes(n.tensor, m.tensor))
      return fail("node ", i, " is a constant made from the sizes (", m.tensor.dtype(),
                  m.tensor.shape(), ")");
    if (n.kind == ir::NodeKind::Scalar) {
      if (n.scalar.kind() != m.scalar.kind()) return fail("scalar node ", i, " changed kind");
      if (n.scalar.kind() == ScalarKind::Int || n.scalar.kind() == ScalarKind::Float)
        num(n.scalar.to<double>(), Slot::Where::Scalar, ir::kNoValue, ni, 0, 0);
      else if (n.scalar.to_string() != m.scalar.to_string())
        return fail("scalar node ", i, " changed");
    }
    const auto& ia = n.attrs.items();
    const auto& ib = m.attrs.items();
    if (ia.size() != ib.size()) return fail("node ", i, " has other attributes");
    for (std::size_t k = 0; k < ia.size(); ++k) {
      if (ia[k].first != ib[k].first || ia[k].second.index() != ib[k].second.index())
        return fail("node ", i, " has other attributes");
      // A closure handle (host callbacks, random draws): each trace registers
      // its own, all for the same call site; the base trace's one is kept.
      if (ia[k].first == "fn") continue;
      if (const auto* p = std::get_if<std::int64_t>(&ia[k].second)) {
        num(static_cast<double>(*p), Slot::Where::Attr, ir::kNoValue, ni, k, 0);
      } else if (const auto* q = std::get_if<double>(&ia[k].second)) {
        num(*q, Slot::Where::Attr, ir::kNoValue, ni, k, 0);
      } else if (const auto* r = std::get_if<std::vector<std::int64_t>>(&ia[k].second)) {
        if (r->size() != std::get<std::vector<std::int64_t>>(ib[k].second).size())
          return fail("node ", i, " attribute ", ia[k].first, " changed length");
        for (std::size_t e = 0; e < r->size(); ++e)
          num(static_cast<double>((*r)[e]), Slot::Where::AttrElem, ir::kNoValue, ni, k, e);
      } else if (!(ia[k].second == ib[k].second)) {
        return fail("node ", i, " attribute ", ia[k].first, " changed");
      }
    }
  }
  return true;
}

bool close(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

std::string describe(const ir::Graph& g, const Slot& s) {
  auto node_text = [&](ir::NodeId node) {
    const ir::Node& n = g.node(node);
    const std::string op = n.kind == ir::NodeKind::Op ? std::string(ops::ir_name(*n.def))
                                                      : std::string(ir::node_kind_name(n.kind));
    if (n.outputs.empty()) return op;
    return ::ms::detail::str_cat(ir::value_names(g)[n.outputs[0].index()], " (", op, ")");
  };
  switch (s.where) {
    case Slot::Where::Dim:
      return ::ms::detail::str_cat("dim ", s.b, " of ", node_text(g.value(s.value).node));
    case Slot::Where::Attr:
      return ::ms::detail::str_cat("attribute ", g.node(s.node).attrs.items()[s.b].first, " of ",
                                   node_text(s.node));
    case Slot::Where::AttrElem:
      return ::ms::detail::str_cat("attribute ", g.node(s.node).attrs.items()[s.b].first, "[", s.c,
                                   "] of ", node_text(s.node));
    case Slot::Where::Scalar: {
      const ir::Node& n = g.node(s.node);
      const ir::ValueId v = n.outputs.at(0);
      for (std::size_t u = 0; u < g.nodes.size(); ++u)
        for (ir::ValueId in : g.nodes[u].inputs)
          if (in == v)
            return ::ms::detail::str_cat("the number ", n.scalar.to_string(), " in ",
                                         node_text(ir::NodeId{u}));
      return ::ms::detail::str_cat("the number ", n.scalar.to_string());
    }
  }
  return {};
}

// The form of a number that is f0 at the traced sizes b (per variable), fj[j]
// with variable j moved by 1, and fcheck with all moved by 2: affine, a
// product, or an inverse product of the variables that move it; nullopt when
// none fits all the probes.
std::optional<SymExpr> fit(double f0, std::span<const double> fj, double fcheck,
                           std::span<const double> b) {
  double pred = f0, c = f0;  // affine: f0 + sum a_j (s_j - b_j)
  std::vector<std::pair<int, double>> terms;
  std::vector<int> changed;
  for (std::size_t j = 0; j < fj.size(); ++j) {
    const double a = fj[j] - f0;
    pred += 2 * a;
    c -= a * b[j];
    if (a != 0) {
      terms.emplace_back(static_cast<int>(j), a);
      changed.push_back(static_cast<int>(j));
    }
  }
  if (close(pred, fcheck)) return SymExpr::affine(c, terms);
  double prod = 1, prod2 = 1;
  for (int j : changed) {
    prod *= b[static_cast<std::size_t>(j)];
    prod2 *= b[static_cast<std::size_t>(j)] + 2;
  }
  if (prod == 0) return std::nullopt;
  const double kp = f0 / prod, ki = f0 * prod;
  bool product = close(fcheck, kp * prod2), inverse = close(fcheck, ki / prod2);
  for (int j : changed) {
    const auto ju = static_cast<std::size_t>(j);
    const double pj = prod / b[ju] * (b[ju] + 1);
    product &= close(fj[ju], kp * pj);
    inverse &= close(fj[ju], ki / pj);
  }
  if (product) return SymExpr::product(kp, changed);
  if (inverse) return SymExpr::inverse(ki, changed);
  return std::nullopt;
}

}  // namespace

namespace {

// The input shapes `base` with the symbols `syms` of `g` moved by `delta`.
std::vector<Shape> moved_shapes(const Generalized& g, std::span<const Shape> base,
                                const std::vector<int>& syms, std::int64_t delta) {
  std::vector<Shape> s(base.begin(), base.end());
  for (std::size_t i = 0; i < s.size(); ++i)
    for (std::size_t k = 0; k < g.inputs[i].dims.size(); ++k) {
      const std::int64_t d = g.inputs[i].dims[k];
      if (is_symbol(d) && std::find(syms.begin(), syms.end(), symbol_id(d)) != syms.end())
        s[i][k] += delta;
    }
  return s;
}

}  // namespace

SymbolicGraph::SymbolicGraph(const Generalized& g, std::span<const Shape> base,
                             const TraceAt& trace) {
  for (int i = 0; i < g.num_symbols(); ++i) names_.push_back(g.symbol_name(i));
  std::string why;
  MS_CHECK(bind_symbols(g, base, base_values_, &why), ShapeError, "jit: ", why);
  var_of_.assign(base_values_.size(), -1);

  TraceResult t0 = trace(base);
  ++traces_;
  base_ = std::move(t0.graph);
  structure_ = std::move(t0.structure);
  std::vector<double> nums0;
  std::vector<Slot> locs;
  collect(base_, base_, nums0, &locs, why);

  const std::vector<std::vector<double>> probes = find_variables(g, base, trace);
  std::vector<double> check;
  if (!vars_.empty()) {
    std::vector<int> all;
    for (const auto& v : vars_) all.insert(all.end(), v.begin(), v.end());
    std::string reason;
    if (!probe(trace, moved_shapes(g, base, all, 2), check, reason)) {
      why_ = ::ms::detail::str_cat("tracing with all symbols moved together failed: ", reason);
      return;
    }
  }
  if (!fit_numbers(nums0, locs, probes, check)) return;
  ok_ = true;
  print_symbolic();
}

// Traces at `shapes` and appends the numbers of the graph to `out`; false
// (with the reason) when tracing fails or gives another structure.
bool SymbolicGraph::probe(const TraceAt& trace, std::span<const Shape> shapes,
                          std::vector<double>& out, std::string& reason) {
  ++traces_;
  try {
    TraceResult r = trace(shapes);
    if (r.structure != structure_) {
      reason = "the result has another structure";
      return false;
    }
    return collect(r.graph, base_, out, nullptr, reason);
  } catch (const Error& e) {
    reason = e.what();
    return false;
  }
}

// Moves each symbol by 1 (alone, or with the symbols of the same size when
// alone fails): a symbol that moves the graph consistently becomes a variable
// (symbols moved together share one), the others are pinned to the traced
// size. Returns the numbers of each variable's probe.
std::vector<std::vector<double>> SymbolicGraph::find_variables(const Generalized& g,
                                                               std::span<const Shape> base,
                                                               const TraceAt& trace) {
  const std::size_t n = base_values_.size();
  std::vector<std::vector<double>> probes;  // per variable
  std::vector<bool> done(n, false);
  for (std::size_t s = 0; s < n; ++s) {
    if (done[s]) continue;
    std::vector<double> out;
    std::string reason;
    std::vector<int> group{static_cast<int>(s)};
    bool ok = probe(trace, moved_shapes(g, base, group, 1), out, reason);
    if (!ok) {
      // Moved alone it failed: try it together with the symbols of the same size.
      group.clear();
      for (std::size_t t = s; t < n; ++t)
        if (!done[t] && base_values_[t] == base_values_[s]) group.push_back(static_cast<int>(t));
      if (group.size() > 1) {
        out.clear();
        ok = probe(trace, moved_shapes(g, base, group, 1), out, reason);
      }
    }
    if (!ok) {
      done[s] = true;  // pinned to the traced size
      continue;
    }
    for (int t : group) {
      done[static_cast<std::size_t>(t)] = true;
      var_of_[static_cast<std::size_t>(t)] = static_cast<int>(vars_.size());
    }
    vars_.push_back(group);
    probes.push_back(std::move(out));
  }
  return probes;
}

// Fits an expression of the variables to every number that moved in a probe
// (`nums0`: at the traced sizes, `locs`: where each lives, `check`: all
// variables moved by 2); false (why_ says which number) when one fits no form.
bool SymbolicGraph::fit_numbers(const std::vector<double>& nums0, const std::vector<Slot>& locs,
                                const std::vector<std::vector<double>>& probes,
                                const std::vector<double>& check) {
  std::vector<double> b(vars_.size());  // base value of each variable
  for (std::size_t j = 0; j < vars_.size(); ++j)
    b[j] = static_cast<double>(base_values_[static_cast<std::size_t>(vars_[j][0])]);
  for (std::size_t k = 0; k < nums0.size(); ++k) {
    const double f0 = nums0[k];
    bool moves = false;
    for (const auto& p : probes) moves |= p[k] != f0;
    if (!moves && (check.empty() || check[k] == f0)) continue;
    std::vector<double> fj(vars_.size());
    for (std::size_t j = 0; j < vars_.size(); ++j) fj[j] = probes[j][k];
    Slot slot = locs[k];
    std::optional<SymExpr> e = fit(f0, fj, check[k], b);
    if (!e) {
      why_ = ::ms::detail::str_cat(describe(base_, slot), " is ", f0,
                                   " at the traced sizes and follows no form that ms can "
                                   "generalize (affine, product or inverse product of sizes)");
      return false;
    }
    slot.expr = std::move(*e);
    slots_.push_back(std::move(slot));
  }
  return true;
}

// dump_: the traced graph with dims as expressions of the symbols, then the
// other size-dependent numbers.
void SymbolicGraph::print_symbolic() {
  std::vector<std::string> var_names;
  for (const auto& v : vars_) var_names.push_back(names_[static_cast<std::size_t>(v[0])]);
  ir::Graph shown = base_;
  shown.symbolic_dims.resize(shown.values.size());
  for (std::size_t v = 0; v < shown.values.size(); ++v)
    for (std::int64_t d : shown.values[v].type.shape)
      shown.symbolic_dims[v].push_back(std::to_string(d));
  for (const Slot& s : slots_)
    if (s.where == Slot::Where::Dim)
      shown.symbolic_dims[s.value.index()][s.b] = s.expr.to_string(var_names);
  dump_ = ir::to_string(shown);
  std::string numbers;
  for (const Slot& s : slots_)
    if (s.where != Slot::Where::Dim)
      numbers += ::ms::detail::str_cat("//   ", describe(base_, s), " = ",
                                       s.expr.to_string(var_names), "\n");
  if (!numbers.empty())
    dump_ += "// sizes in attributes and numbers (printed above at the traced sizes):\n" + numbers;
}

std::vector<std::string> SymbolicGraph::guards() const {
  std::vector<std::string> r;
  for (std::size_t s = 0; s < var_of_.size(); ++s)
    if (var_of_[s] < 0) r.push_back(::ms::detail::str_cat(names_[s], " == ", base_values_[s]));
  for (const auto& v : vars_)
    for (std::size_t k = 1; k < v.size(); ++k)
      r.push_back(::ms::detail::str_cat(names_[static_cast<std::size_t>(v[k])],
                                        " == ", names_[static_cast<std::size_t>(v[0])]));
  return r;
}

std::optional<ir::Graph> SymbolicGraph::instantiate(std::span<const std::int64_t> s,
                                                    std::string* why) const {
  auto fail = [&](auto&&... a) -> std::optional<ir::Graph> {
    if (why) *why = ::ms::detail::str_cat(a...);
    return std::nullopt;
  };
  if (!ok_) return fail(why_);
  if (s.size() != var_of_.size())
    return fail(s.size(), " symbol values for ", var_of_.size(), " symbols");
  for (std::size_t i = 0; i < var_of_.size(); ++i)
    if (var_of_[i] < 0 && s[i] != base_values_[i])
      return fail(names_[i], " is ", s[i], " but the function fixes it to ", base_values_[i],
                  " (tracing with another size failed or changed the graph)");
  std::vector<std::int64_t> v(vars_.size());
  for (std::size_t j = 0; j < vars_.size(); ++j) {
    v[j] = s[static_cast<std::size_t>(vars_[j][0])];
    for (int t : vars_[j])
      if (s[static_cast<std::size_t>(t)] != v[j])
        return fail(names_[static_cast<std::size_t>(t)], " is ", s[static_cast<std::size_t>(t)],
                    " but the function needs it equal to ",
                    names_[static_cast<std::size_t>(vars_[j][0])], " (", v[j], ")");
  }
  ir::Graph g = base_;
  for (const Slot& slot : slots_) {
    const double x = slot.expr.eval(v);
    const double r = std::nearbyint(x);
    const bool integral = std::fabs(x - r) < 1e-6 && std::fabs(r) < 9.0e15;
    const auto as_int = static_cast<std::int64_t>(r);
    switch (slot.where) {
      case Slot::Where::Dim:
        if (!integral || as_int < 0)
          return fail(describe(base_, slot), " would be ", x, ", not a size");
        g.value(slot.value).type.shape[slot.b] = as_int;
        break;
      case Slot::Where::Attr:
      case Slot::Where::AttrElem: {
        ir::Node& n = g.node(slot.node);
        auto item = n.attrs.items()[slot.b];
        if (auto* p = std::get_if<std::int64_t>(&item.second)) {
          if (!integral) return fail(describe(base_, slot), " would be ", x, ", not an integer");
          *p = as_int;
        } else if (auto* q = std::get_if<double>(&item.second)) {
          *q = x;
        } else if (auto* e = std::get_if<std::vector<std::int64_t>>(&item.second)) {
          if (!integral) return fail(describe(base_, slot), " would be ", x, ", not an integer");
          (*e)[slot.c] = as_int;
        }
        n.attrs.set(item.first, std::move(item.second));
        break;
      }
      case Slot::Where::Scalar: {
        ir::Node& n = g.node(slot.node);
        if (n.scalar.kind() == ScalarKind::Int) {
          if (!integral) return fail(describe(base_, slot), " would be ", x, ", not an integer");
          n.scalar = Scalar(as_int);
        } else {
          n.scalar = Scalar(x);
        }
        break;
      }
    }
  }
  return g;
}

}  // namespace ms::dyn::detail
