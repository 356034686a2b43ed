#include "ms/ops/op.hpp"

#include <cctype>

#include <deque>
#include <mutex>
#include <sstream>

#include "ms/ops/cast_policy.hpp"

namespace ms::ops {

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::Elementwise: return "elementwise";
    case OpKind::Reduction: return "reduction";
    case OpKind::Linalg: return "linalg";
    case OpKind::Conv: return "conv";
    case OpKind::Pool: return "pool";
    case OpKind::Layout: return "layout";
    case OpKind::Indexing: return "indexing";
    case OpKind::Composite: return "composite";
    case OpKind::HostCallback: return "host_callback";
    case OpKind::Random: return "random";
  }
  return "?";
}

Attrs::Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) : items_(items) {}

Attrs::Attrs(const Attrs&) = default;
Attrs::Attrs(Attrs&&) noexcept = default;
Attrs& Attrs::operator=(const Attrs&) = default;
Attrs& Attrs::operator=(Attrs&&) noexcept = default;
Attrs::~Attrs() = default;

bool operator==(const Attrs& a, const Attrs& b) { return a.items_ == b.items_; }

Attrs& Attrs::set(std::string name, AttrValue v) {
  for (auto& [k, old] : items_)
    if (k == name) {
      old = std::move(v);
      return *this;
    }
  items_.emplace_back(std::move(name), std::move(v));
  return *this;
}

const AttrValue* Attrs::find(std::string_view name) const {
  for (const auto& [k, v] : items_)
    if (k == name) return &v;
  return nullptr;
}

bool Attrs::has(std::string_view name) const { return find(name) != nullptr; }

std::string Attrs::to_string() const {
  std::ostringstream os;
  bool first = true;
  for (const auto& [k, v] : items_) {
    if (!first) os << ", ";
    first = false;
    os << k << "=";
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, bool>)
            os << (x ? "true" : "false");
          else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>)
            os << Shape(x);
          else if constexpr (std::is_same_v<T, std::string>)
            os << '"' << x << '"';
          else
            os << x;
        },
        v);
  }
  return os.str();
}

namespace detail {
void register_all();  // src/ops/registry.cpp
std::vector<Tensor> call_with_cast_policy(const OpDef& def, std::span<const Tensor> inputs,
                                          const Attrs& attrs,
                                          CastPolicy p);  // src/ops/cast_policy.cpp
std::vector<const OpDef*>& table() {
  static std::vector<const OpDef*> t;
  return t;
}
// The entries themselves; a deque keeps their addresses stable as it grows,
// and owning them (no bare `new`) keeps LeakSanitizer quiet at exit.
std::deque<OpDef>& storage() {
  static std::deque<OpDef> s;
  return s;
}
void registry_add(OpDef def) {
  for (const OpDef* d : table())
    MS_CHECK(d->name != def.name, ValueError, "op registry: op '", def.name,
             "' is registered twice");
  storage().push_back(std::move(def));
  table().push_back(&storage().back());
}
}  // namespace detail

const std::vector<const OpDef*>& registry() {
  static std::once_flag once;
  std::call_once(once, [] { detail::register_all(); });
  return detail::table();
}

const OpDef& op(std::string_view name) {
  for (const OpDef* d : registry())
    if (d->name == name) return *d;
  ::ms::detail::raise<ValueError>("ops::op: no op named '", name, "' in the op table");
}

std::vector<TensorType> types_of(std::span<const Tensor> ts) {
  std::vector<TensorType> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) {
    MS_CHECK(t.defined(), ValueError, "op input is an undefined tensor");
    out.push_back({t.dtype(), t.shape()});
  }
  return out;
}

std::string ir_name(const OpDef& def) {
  if (!def.ir_name.empty()) return std::string(def.ir_name);
  std::string out;
  bool up = true;
  for (char c : def.name) {
    if (c == '_') {
      up = true;
      continue;
    }
    out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return out;
}

// The one active tracer of a thread is held as the expressions' recorder;
// only set_active_tracer sets it, so it is always a Tracer.
Tracer* active_tracer() { return static_cast<Tracer*>(expr::active_recorder()); }

Tracer* set_active_tracer(Tracer* t) {
  Tracer* prev = static_cast<Tracer*>(expr::detail::set_active_recorder(t));
  ::ms::detail::set_tracing_active(t != nullptr);
  return prev;
}

namespace {

// The checks of every call: the number of inputs, each one defined.
void check_inputs(const OpDef& def, std::span<const Tensor> inputs) {
  const int n = static_cast<int>(inputs.size());
  MS_CHECK(n >= def.min_inputs && (def.max_inputs < 0 || n <= def.max_inputs), ValueError, def.name,
           ": takes ",
           def.max_inputs < 0 ? "at least " + std::to_string(def.min_inputs)
           : def.min_inputs == def.max_inputs
               ? std::to_string(def.min_inputs)
               : std::to_string(def.min_inputs) + " to " + std::to_string(def.max_inputs),
           " inputs, got ", n);
  for (int i = 0; i < n; ++i)
    MS_CHECK(inputs[static_cast<std::size_t>(i)].defined(), ValueError, def.name, ": input ", i,
             " is an undefined tensor");
}

// Whether a call must go through the attribute map: a cast policy or a tracer
// is active.
bool recorded_or_cast() {
  return cast_policy().mode != CastPolicy::Mode::None || active_tracer() != nullptr;
}

void check_concrete(const OpDef& def, std::span<const Tensor> inputs) {
  for (const Tensor& t : inputs)
    MS_CHECK(!t.is_symbolic(), ValueError, def.name,
             ": got a symbolic tensor outside its trace (was a traced value kept after ms::jit "
             "returned?)");
}

}  // namespace

std::vector<Tensor> call(const OpDef& def, std::span<const Tensor> inputs, const Attrs& attrs) {
  check_inputs(def, inputs);
  if (const CastPolicy p = cast_policy(); p.mode != CastPolicy::Mode::None) [[unlikely]]
    return detail::call_with_cast_policy(def, inputs, attrs, p);
  if (Tracer* t = active_tracer(); t != nullptr) return t->record(def, inputs, attrs);
  check_concrete(def, inputs);
  return def.eval(inputs, attrs);
}

std::vector<Tensor> call_typed(const OpDef& def, std::span<const Tensor> inputs,
                               const void* typed) {
  MS_ASSERT(def.attrs_of != nullptr && def.eval_typed != nullptr);  // both set by entry_def
  if (recorded_or_cast()) return call(def, inputs, def.attrs_of(typed));
  check_inputs(def, inputs);
  check_concrete(def, inputs);
  return def.eval_typed(typed, inputs);
}

BoundEvalFn bind_eval(const OpDef& def, const Attrs& attrs) {
  if (def.bind != nullptr) return def.bind(attrs);
  return [&def, attrs](std::span<const Tensor> in) { return def.eval(in, attrs); };
}

BoundUpdateFn bind_update(const OpDef& def, const Attrs& attrs) {
  MS_CHECK(def.update, ValueError, "ops::bind_update: op '", def.name,
           "' has no in-place (update) form");
  if (def.bind_update != nullptr) return def.bind_update(attrs);
  return [&def, attrs](std::span<const Tensor> in) { def.update(in, attrs); };
}

Tensor call1(const OpDef& def, std::span<const Tensor> inputs, const Attrs& attrs) {
  auto out = call(def, inputs, attrs);
  MS_ASSERT(out.size() == 1);
  return std::move(out[0]);
}

}  // namespace ms::ops
