// The auto-dynamic-shape manager (see ms/dyn/detail/manager.hpp).
#include "ms/dyn/detail/manager.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace ms::dyn::detail {
namespace {

using ::ms::detail::str_cat;

// Why a call switches auto-dynamic off for good (MindSpore's argument checks),
// or empty.
std::string switch_off_reason(const Signature& call, const Signature& first) {
  for (const SigItem& it : call.items)
    if (it.kind == SigItem::Kind::Tensor && it.shape.rank() == 0)
      return "an argument is a 0-d tensor";
  if (call.arguments() != first.arguments())
    return str_cat("the argument count changed from ", first.arguments(), " to ", call.arguments());
  if (call.items.size() != first.items.size()) return {};  // a sequence length: not a switch-off
  for (std::size_t i = 0; i < call.items.size(); ++i) {
    const SigItem& a = call.items[i];
    const SigItem& b = first.items[i];
    if (a.kind != b.kind || a.tag != b.tag || a.is_mutable != b.is_mutable)
      return str_cat("an argument changed kind (item ", i, ")");
    if (a.kind == SigItem::Kind::Number) {
      const double x = a.value.to<double>(), y = b.value.to<double>();
      if (std::fabs(x - y) > 1e-9 * std::max(std::fabs(x), std::fabs(y)))
        return str_cat("a scalar argument changed from ", b.value.to_string(), " to ",
                       a.value.to_string());
    }
    if (a.kind == SigItem::Kind::Constant && a.text != b.text)
      return str_cat("a ", a.tag == 's' ? "string" : "enum", " argument changed");
    if ((a.kind == SigItem::Kind::Tensor || a.kind == SigItem::Kind::Mutable) && a.dtype != b.dtype)
      return str_cat("a tensor argument changed dtype from ", b.dtype, " to ", a.dtype);
  }
  return {};
}

Decision static_decision(std::string why, bool switched_off = false) {
  Decision d;
  d.kind = Decision::Kind::Static;
  d.why = std::move(why);
  d.switched_off = switched_off;
  return d;
}

}  // namespace

std::string describe_changes(const Generalized& call, const Generalized& ref) {
  if (call.inputs.size() != ref.inputs.size()) return "the number of tensor inputs changed";
  std::string s;
  auto add = [&](auto&&... a) {
    if (!s.empty()) s += ", ";
    s += str_cat(a...);
  };
  for (std::size_t i = 0; i < call.inputs.size(); ++i) {
    const InputSpec& c = call.inputs[i];
    const InputSpec& r = ref.inputs[i];
    if (r.any_rank) continue;
    if (c.dims.size() != r.dims.size()) {
      add("argument ", c.argument, " rank ", r.dims.size(), " -> ", c.dims.size());
      continue;
    }
    for (std::size_t k = 0; k < c.dims.size(); ++k)
      if (!is_symbol(r.dims[k]) && r.dims[k] != c.dims[k])
        add("argument ", c.argument, " dim ", k, ": ", r.dims[k], " -> ", c.dims[k]);
  }
  return s.empty() ? std::string("no dim changed") : s;
}

std::size_t AutoDynamic::keep(std::size_t max_generalized) const {
  return policy_ == DynamicPolicy::ChangedDims ? max_generalized : 1;
}

std::optional<std::string> AutoDynamic::switch_off(const Signature& sig) {
  if (!first_) first_ = sig;
  std::string r = switch_off_reason(sig, *first_);
  if (r.empty()) return std::nullopt;
  off_ = true;
  real_.clear();
  return r;
}

// The first signatures compile static graphs kept for generalizing (2 for
// AllDims as MindSpore, 1 for ChangedDims); nullopt once they are taken.
std::optional<Decision> AutoDynamic::keep_static(const Generalized& now) {
  const std::size_t count = policy_ == DynamicPolicy::ChangedDims ? 1 : 2;
  if (real_.size() >= count) return std::nullopt;
  std::string why = real_.empty() ? std::string("first call")
                                  : str_cat("static graph ", real_.size() + 1, " of ", count, " (",
                                            describe_changes(now, real_.front()), ")");
  real_.push_back(now);
  return static_decision(std::move(why));
}

// Generalizes against the kept signatures; the fewest unknown ranks, then the
// fewest unknown shapes, wins.
Decision AutoDynamic::generalize(const Generalized& now,
                                 std::span<const Generalized* const> kept) const {
  const bool changed_dims = policy_ == DynamicPolicy::ChangedDims;
  std::optional<Generalized> best;
  const Generalized* against = nullptr;
  auto consider = [&](const Generalized& entry) {
    std::optional<Generalized> c =
        changed_dims ? generalize_changed_dims(now, entry) : generalize_all_dims(now, entry);
    if (!c || c->is_static()) return;
    if (!best || std::pair(c->unknown_ranks(), c->unknown_shapes()) <
                     std::pair(best->unknown_ranks(), best->unknown_shapes())) {
      best = std::move(c);
      against = &entry;
    }
  };
  if (changed_dims) {
    consider(kept.empty() ? real_.front() : *kept.front());
  } else {
    for (const Generalized& r : real_) consider(r);
    for (const Generalized* g : kept) consider(*g);
  }
  if (!best) return static_decision("no kept signature generalizes to this call");
  Decision d;
  d.kind = Decision::Kind::Generalize;
  d.why = str_cat(describe_changes(now, *against), "; generalized against (", against->to_string(),
                  ")");
  d.gen = std::move(*best);
  return d;
}

Decision AutoDynamic::decide(const Signature& sig, std::span<const Shape> shapes,
                             std::span<const Generalized* const> kept) {
  if (std::optional<std::string> r = switch_off(sig))
    return static_decision("auto-dynamic switched off for this function: " + *r, true);
  const Generalized now = exact(sig);
  if (std::optional<Decision> d = keep_static(now)) return std::move(*d);
  // A kept generalized signature that this call fits.
  std::vector<std::int64_t> values;
  for (std::size_t i = 0; i < kept.size(); ++i)
    if (same_structure(*kept[i], now) && bind_symbols(*kept[i], shapes, values)) {
      Decision d;
      d.kind = Decision::Kind::Reuse;
      d.reuse = i;
      return d;
    }
  return generalize(now, kept);
}

}  // namespace ms::dyn::detail
