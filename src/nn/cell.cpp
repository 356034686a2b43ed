// CellBase: registration, traversal, printing, state dicts; hook ids.
#include "ms/nn/cell.hpp"

#include <cxxabi.h>
#include <algorithm>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <set>
#include <sstream>
#include <unordered_map>

#include "ms/jit/dump.hpp"

namespace ms {
namespace detail {

struct CellHooks {
  const std::shared_ptr<HookList<PreHookEntry>> pre = std::make_shared<HookList<PreHookEntry>>();
  const std::shared_ptr<HookList<FwdHook>> fwd = std::make_shared<HookList<FwdHook>>();
  const std::shared_ptr<HookList<BwdPreHook>> bwd_pre = std::make_shared<HookList<BwdPreHook>>();
  const std::shared_ptr<HookList<BwdHook>> bwd = std::make_shared<HookList<BwdHook>>();
  bool any_forward() const { return !pre->empty() || !fwd->empty(); }
  bool any_backward() const { return !bwd_pre->empty() || !bwd->empty(); }
};

struct StateHooks {
  const std::shared_ptr<HookList<StateDictHook>> sd_pre =
      std::make_shared<HookList<StateDictHook>>();
  const std::shared_ptr<HookList<StateDictHook>> sd_post =
      std::make_shared<HookList<StateDictHook>>();
  // Both forms of load pre-hook, in one list (the short form adapted).
  const std::shared_ptr<HookList<LoadPreHookFull>> load_pre =
      std::make_shared<HookList<LoadPreHookFull>>();
  const std::shared_ptr<HookList<LoadPostHook>> load_post =
      std::make_shared<HookList<LoadPostHook>>();
};

std::uint64_t new_hook_id() {
  static std::atomic<std::uint64_t> next{1};
  compiler::bump_hook_version();
  return next++;
}

void hook_removed() { compiler::bump_hook_version(); }

void hook_changed() { compiler::bump_hook_version(); }

namespace {

// "fc1." -> "fc1": the key prefix as state-dict hooks see it (MindSpore's form).
std::string without_trailing_dot(const std::string& s) {
  return !s.empty() && s.back() == '.' ? s.substr(0, s.size() - 1) : s;
}

}  // namespace

namespace {
// The global buffer registration hooks: one list for the process; handles
// keep a weak reference to it.
const std::shared_ptr<HookList<BufferHook>>& buffer_hooks() {
  static const auto list = std::make_shared<HookList<BufferHook>>();
  return list;
}
}  // namespace

HookHandle add_buffer_registration_hook(BufferHook fn) {
  const auto& list = buffer_hooks();
  return HookHandle(list, list->add(std::move(fn)));
}

ArgList replace_tensors(const ArgList& args, Args tensors, const std::string& what) {
  const bool all_tensors = std::all_of(
      args.begin(), args.end(), [](const Arg& a) { return std::holds_alternative<Tensor>(a); });
  if (!all_tensors) return args.with_tensors(tensors, what);
  std::vector<Arg> items;
  items.reserve(tensors.size());
  for (Tensor& t : tensors) items.emplace_back(std::in_place_type<Tensor>, std::move(t));
  return ArgList(std::move(items));
}

std::string short_type_name(const std::type_info& t) {
  int status = 0;
  char* d = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string s = (status == 0 && d != nullptr) ? std::string(d) : std::string(t.name());
  std::free(d);
  // Drop template arguments, then namespaces.
  if (auto lt = s.find('<'); lt != std::string::npos) s.resize(lt);
  if (auto c = s.rfind("::"); c != std::string::npos) s = s.substr(c + 2);
  return s;
}

}  // namespace detail

CellBase::CellBase() = default;
CellBase::~CellBase() = default;

namespace {
template <class L>
HookHandle add_to(const std::shared_ptr<L>& list, typename L::value_type fn) {
  return HookHandle(list, list->add(std::move(fn)));
}
}  // namespace

HookHandle CellBase::add_forward_pre_hook(detail::PreHook h, bool with_kwargs, bool general) {
  return add_to(hooks_.get_or_make().pre, detail::PreHookEntry{std::move(h), with_kwargs, general});
}
HookHandle CellBase::add_forward_hook(detail::FwdHook h) {
  return add_to(hooks_.get_or_make().fwd, std::move(h));
}
HookHandle CellBase::add_backward_pre_hook(detail::BwdPreHook h) {
  return add_to(hooks_.get_or_make().bwd_pre, std::move(h));
}
HookHandle CellBase::add_backward_hook(detail::BwdHook h) {
  return add_to(hooks_.get_or_make().bwd, std::move(h));
}
bool CellBase::hooks_active() const {
  return hooks_ && (hooks_->any_forward() || hooks_->any_backward());
}
bool CellBase::forward_hooks() const { return hooks_ && !hooks_->fwd->empty(); }
bool CellBase::backward_hooks() const { return hooks_ && hooks_->any_backward(); }

Args CellBase::run_hooked(ArgList& args, Kwargs* kw,
                          ::ms::detail::FunctionRef<Args(const ArgList&, Kwargs*)> construct) {
  const bool tracing = ops::active_tracer() != nullptr;
  run_pre_hooks(args, kw, tracing);
  const bool bwd = tracing && backward_hooks();
  std::shared_ptr<BwdState> st;  // shared by the two backward wraps; only with backward hooks
  if (bwd) {
    st = std::make_shared<BwdState>();
    Args flat = args.tensors();  // the backward hooks see the gradients of every tensor
    wrap_backward_in(flat, st);
    args = args.with_tensors(flat, cls_name() + ".backward_in");
  }
  Args out = construct(args, kw);
  if (forward_hooks()) run_fwd_hooks(args, kw, out, tracing);
  if (bwd) wrap_backward_out(out, st);
  return out;
}

void CellBase::run_pre_hooks(ArgList& args, Kwargs* kw, bool tracing) {
  auto list = hooks_->pre;
  if (!list || list->empty()) return;
  if (tracing && args.tensor_count() > 0) {
    // Runs each time the graph runs, long after this call: it keeps its own
    // copy of the kwargs and of the non-tensor arguments, which each hook
    // sees as the previous one left them (as eagerly); edits to them cannot
    // change the traced graph.
    auto kwc = kw ? std::make_shared<const Kwargs>(*kw) : nullptr;
    auto run = [this, list, kwc, call = args](Args v) {
      Kwargs cur = kwc ? *kwc : Kwargs{};
      ArgList a = call.with_tensors(v, "forward pre-hook of " + cls_name());
      for (auto& e : list->snapshot()) {
        if (auto r = e.fn(*this, a, kwc ? &cur : nullptr)) {
          MS_CHECK(r->tensor_count() == v.size(), ValueError, "forward pre-hook of ", cls_name(),
                   ": returned ", r->tensor_count(), " arguments for ", v.size(),
                   " under ms::jit, where the count is fixed");
          a = std::move(*r);
        }
      }
      return a.tensors();
    };
    args = args.with_tensors(ops::host_call(run, args.tensors(), cls_name() + ".forward_pre_hook"),
                             cls_name() + ".forward_pre_hook");
    // The kwargs and non-tensor arguments are constants of the graph: those
    // construct is traced with are what the with_kwargs and ms::ArgList hooks
    // return now, on the symbolic arguments (their tensor replacements come
    // from the callback above).
    for (auto& e : list->snapshot()) {
      if (e.general) {
        if (auto r = e.fn(*this, args, kw))
          args = r->with_tensors(args.tensors(), "forward pre-hook of " + cls_name());
      } else if (kw && e.with_kwargs) {
        (void)e.fn(*this, args, kw);
      }
    }
    return;
  }
  for (auto& e : list->snapshot()) {
    if (auto r = e.fn(*this, args, kw)) args = std::move(*r);
  }
}

void CellBase::run_fwd_hooks(const ArgList& args, const Kwargs* kw, Args& out, bool tracing) {
  auto list = hooks_->fwd;
  if (!list || list->empty()) return;
  const std::size_t nargs = args.tensor_count();
  std::shared_ptr<const Kwargs> kwc;
  if (kw)
    kwc = tracing ? std::make_shared<const Kwargs>(*kw)
                  : std::shared_ptr<const Kwargs>(kw, [](const Kwargs*) {});
  auto run = [this, list, kwc, nargs, call = args](Args v) {
    const Kwargs* kw = kwc.get();
    // v = the arguments' tensors..., outputs...
    const ArgList a = call.with_tensors(std::span<const Tensor>(v.data(), nargs),
                                        "forward hook of " + cls_name());
    Args o(v.begin() + static_cast<std::ptrdiff_t>(nargs), v.end());
    for (auto& h : list->snapshot()) {
      auto r = h(*this, a, kw, o);
      if (!r) continue;
      MS_CHECK(r->size() == o.size(), ValueError, "forward hook of ", cls_name(), ": returned ",
               r->size(), " outputs; the cell returns ", o.size());
      o = std::move(*r);
    }
    std::copy(o.begin(), o.end(), v.begin() + static_cast<std::ptrdiff_t>(nargs));
    return v;
  };
  if (tracing) {
    Args all = args.tensors();
    all.insert(all.end(), out.begin(), out.end());
    Args r = ops::host_call(run, std::move(all), cls_name() + ".forward_hook");
    out.assign(r.begin() + static_cast<std::ptrdiff_t>(nargs), r.end());
  } else {
    Args all = args.tensors();
    all.insert(all.end(), out.begin(), out.end());
    Args r = run(std::move(all));
    MS_CHECK(r.size() >= nargs, ValueError, "forward hook of ", cls_name(), ": bad output count");
    out.assign(r.begin() + static_cast<std::ptrdiff_t>(nargs), r.end());
  }
}

void CellBase::wrap_backward_out(Args& out, const std::shared_ptr<BwdState>& st) {
  auto pre = hooks_->bwd_pre;
  const bool want_bwd = hooks_->bwd && !hooks_->bwd->empty();
  auto fn = [this, pre, st, want_bwd](Args g) {
    if (pre && !pre->empty()) {
      g = ops::host_call(
          [this, pre](Args v) {
            for (auto& h : pre->snapshot()) {
              if (auto r = h(*this, v)) v = std::move(*r);
            }
            return v;
          },
          std::move(g), cls_name() + ".backward_pre_hook");
    }
    if (want_bwd) st->grad_out = g;
    return g;
  };
  out = ops::grad_hook(fn, std::move(out), cls_name() + ".backward_out");
}
void CellBase::wrap_backward_in(Args& args, const std::shared_ptr<BwdState>& st) {
  auto list = hooks_->bwd;
  if (!list || list->empty() || args.empty()) return;
  const std::size_t nin = args.size();
  auto fn = [this, list, st, nin](Args gi) {
    Args all = gi;
    all.insert(all.end(), st->grad_out.begin(), st->grad_out.end());
    Args r = ops::host_call(
        [this, list, nin](Args v) {
          Args a(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(nin));
          Args o(v.begin() + static_cast<std::ptrdiff_t>(nin), v.end());
          for (auto& h : list->snapshot()) {
            if (auto r2 = h(*this, a, o)) {
              MS_CHECK(r2->size() == nin, ValueError, "backward hook of ", cls_name(),
                       ": returned ", r2->size(), " input gradients for ", nin, " inputs");
              a = std::move(*r2);
            }
          }
          std::copy(a.begin(), a.end(), v.begin());
          return v;
        },
        std::move(all), cls_name() + ".backward_hook");
    r.resize(nin);
    return r;
  };
  args = ops::grad_hook(fn, std::move(args), cls_name() + ".backward_in");
}

void CellBase::check_name(const std::string& name, std::string_view api, bool allow_dot) const {
  MS_CHECK(!name.empty(), ValueError, api, ": the name is empty");
  MS_CHECK(allow_dot || name.find('.') == std::string::npos, ValueError, api, ": name '", name,
           "' contains '.', which separates the levels of hierarchical names");
  for (const auto& [n, keys] : tuples_)
    MS_CHECK(n != name, ValueError, api, ": name '", name,
             "' is already used by a ParameterTuple of ", cls_name());
  for (const auto& [n, p] : params_)
    MS_CHECK(n != name, ValueError, api, ": name '", name, "' is already used by parameter '",
             p.name(), "' of ", cls_name());
  for (const auto& b : buffers_)
    MS_CHECK(b.name != name, ValueError, api, ": name '", name, "' is already used by a buffer of ",
             cls_name());
  for (const auto& [n, c] : children_)
    MS_CHECK(n != name, ValueError, api, ": name '", name, "' is already used by the child cell ",
             c->cls_name(), " of ", cls_name());
}

void CellBase::register_parameter(const std::string& name, const Parameter& param) {
  MS_CHECK(param.defined(), ValueError, "register_parameter: parameter '", name, "' is undefined");
  check_name(name, "register_parameter");
  for (const auto& [n, p] : params_)
    MS_CHECK(!p.same_as(param), ValueError, "register_parameter: parameter '", param.name(),
             "' is already registered in ", cls_name(), " as '", n, "'");
  Parameter p = param;
  // MindSpore names a parameter after the attribute holding it; a parameter
  // keeps a name given explicitly (not the generated `Parameter$N`).
  if (p.name().rfind("Parameter$", 0) == 0) p.set_name(name);
  params_.emplace_back(name, std::move(p));
}

ParameterTuple CellBase::register_parameter_tuple(const std::string& name,
                                                  const ParameterTuple& params) {
  constexpr std::string_view api = "register_parameter_tuple";
  check_name(name, api);
  // Everything is checked before anything is registered.
  std::vector<Parameter> items(params.begin(), params.end());
  std::vector<std::string> keys;
  int next_id = tuple_param_id_;
  for (const Parameter& p : items) {
    for (const auto& [n, q] : params_)
      MS_CHECK(!q.same_as(p), ValueError, api, ": parameter '", p.name(),
               "' is already registered in ", cls_name(), " as '", n, "'");
    // As MindSpore: a generated name becomes `Parameter$<k>` (k per cell).
    std::string key =
        p.name().rfind("Parameter$", 0) == 0 ? "Parameter$" + std::to_string(next_id++) : p.name();
    check_name(key, api, /*allow_dot=*/true);
    // A dotted name's path must not run into a child's parameters (`fc.weight`
    // beside a child `fc`): the hierarchical names would collide.
    const std::string head = key.substr(0, key.find('.'));
    for (const auto& [n, c] : children_)
      MS_CHECK(key.find('.') == std::string::npos || n != head, ValueError, api, ": the name '",
               key, "' of a parameter of the ParameterTuple '", name,
               "' starts with the child cell '", n, "' of ", cls_name(),
               ", so its path would collide with the child's names; rename the parameter");
    MS_CHECK(std::find(keys.begin(), keys.end(), key) == keys.end() && key != name, ValueError, api,
             ": the name '", key, "' of a parameter of '", name,
             "' already exists; set a unique name for the parameter");
    keys.push_back(std::move(key));
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].name() != keys[i]) items[i].set_name(keys[i]);
    params_.emplace_back(keys[i], items[i]);
  }
  tuple_param_id_ = next_id;
  tuples_.emplace_back(name, keys);
  compiler::bump_hook_version();  // graphs traced before do not know the new parameters
  return ParameterTuple(std::move(items));
}

ParameterTuple CellBase::get_parameter_tuple(const std::string& name) const {
  for (const auto& [n, keys] : tuples_) {
    if (n != name) continue;
    std::vector<Parameter> out;
    for (const auto& k : keys)
      for (const auto& [pn, p] : params_)
        if (pn == k) out.push_back(p);
    return ParameterTuple(std::move(out));
  }
  std::string have;
  for (const auto& [n, keys] : tuples_) have += (have.empty() ? "'" : ", '") + n + "'";
  detail::raise<KeyError>("get_parameter_tuple: ", cls_name(), " has no ParameterTuple '", name,
                          "'; its tuples: ", have.empty() ? std::string("none") : have);
}

Tensor CellBase::register_buffer(const std::string& name, const Tensor& buffer, bool persistent) {
  MS_CHECK(buffer.defined(), ValueError, "register_buffer: buffer '", name, "' is undefined");
  check_name(name, "register_buffer");
  Tensor t = buffer;
  const auto& hooks = detail::buffer_hooks();
  if (!hooks->empty()) {
    for (auto& h : hooks->snapshot()) {
      auto r = h(*this, name, t);
      if (!r) continue;
      MS_CHECK(r->defined(), ValueError,
               "register_buffer: a buffer registration hook returned an undefined tensor for "
               "buffer '",
               name, "' of ", cls_name(), "; expected a tensor or std::nullopt (keep)");
      t = std::move(*r);
    }
  }
  buffers_.push_back({name, t, persistent});
  return t;
}

void CellBase::insert_child_to_cell(const std::string& name, CellBase& child) {
  check_name(name, "insert_child_to_cell");
  for (const auto& [t, keys] : tuples_)
    for (const std::string& k : keys)
      MS_CHECK(k.rfind(name + ".", 0) != 0, ValueError, "insert_child_to_cell: name '", name,
               "' starts the name '", k, "' of a parameter of the ParameterTuple '", t, "' of ",
               cls_name(), ", so the child's paths would collide with it");
  MS_CHECK(&child != this, ValueError, "insert_child_to_cell: cell ", cls_name(),
           " cannot be its own child '", name, "'");
  for (auto& [n, c] : child.cells_and_names())
    MS_CHECK(c != this, ValueError, "insert_child_to_cell: '", name, "' (", child.cls_name(),
             ") contains ", cls_name(), " itself: cells must form a tree");
  children_.emplace_back(name, &child);
  child.rename_params(name);
  // Under a prefix set by update_parameters_name, the new parameters take it too.
  if (!name_prefix_.empty())
    for (auto& [n, p] : parameters_and_names()) p.set_name(n);
}

void CellBase::rename_params(const std::string& prefix) {
  // As MindSpore's auto_prefix: a child's parameter `weight` becomes
  // `fc1.weight`, also where update_parameters_name had named it otherwise.
  for (auto& [n, c] : cells_and_names()) c->name_prefix_.clear();
  for (auto& [n, p] : parameters_and_names(prefix)) p.set_name(n);
}

std::string CellBase::root_base(const std::string& prefix) const {
  return (prefix.empty() ? std::string() : prefix + ".") + name_prefix_;
}

std::string CellBase::child_base(const std::string& base, const std::string& name,
                                 const CellBase& child) {
  return child.name_prefix_.empty() ? base + name + "." : child.name_prefix_;
}

std::vector<std::pair<std::string, Parameter>> CellBase::parameters_and_names(
    const std::string& prefix, bool recurse) const {
  std::vector<std::pair<std::string, Parameter>> out;
  std::set<const void*> seen;
  auto walk = [&](auto&& self, const CellBase& c, const std::string& base) -> void {
    for (const auto& [n, p] : c.params_) {
      if (!seen.insert(p.identity()).second) continue;  // shared by two cells: first name
      out.emplace_back(base + n, p);
    }
    if (!recurse) return;
    for (const auto& [n, ch] : c.children_) self(self, *ch, child_base(base, n, *ch));
  };
  walk(walk, *this, root_base(prefix));
  return out;
}

ParameterList CellBase::parameters(bool recurse) const {
  ParameterList out;
  for (auto& [n, p] : parameters_and_names({}, recurse)) out.push_back(p);
  return out;
}

ParameterList CellBase::trainable_params(bool recurse) const {
  ParameterList out;
  for (auto& [n, p] : parameters_and_names({}, recurse))
    if (p.requires_grad()) out.push_back(p);
  return out;
}

ParameterList CellBase::untrainable_params(bool recurse) const {
  ParameterList out;
  for (auto& [n, p] : parameters_and_names({}, recurse))
    if (!p.requires_grad()) out.push_back(p);
  return out;
}

std::vector<std::pair<std::string, CellBase*>> CellBase::cells_and_names(
    const std::string& prefix) {
  std::vector<std::pair<std::string, CellBase*>> out;
  auto walk = [&](auto&& self, CellBase& c, const std::string& pre) -> void {
    out.emplace_back(pre, &c);
    for (auto& [n, ch] : c.children_) self(self, *ch, pre.empty() ? n : pre + "." + n);
  };
  walk(walk, *this, prefix);
  return out;
}

std::vector<std::pair<std::string, Tensor>> CellBase::buffers_and_names(const std::string& prefix,
                                                                        bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  auto walk = [&](auto&& self, const CellBase& c, const std::string& base) -> void {
    for (const auto& b : c.buffers_) out.emplace_back(base + b.name, b.tensor);
    if (!recurse) return;
    for (const auto& [n, ch] : c.children_) self(self, *ch, child_base(base, n, *ch));
  };
  walk(walk, *this, root_base(prefix));
  return out;
}

std::vector<Tensor> CellBase::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : buffers_and_names({}, recurse)) out.push_back(t);
  return out;
}

CellBase& CellBase::apply(const std::function<void(CellBase&)>& fn) {
  // A copy: `fn` may register or remove children of the cell it is given.
  const auto children = children_;
  for (const auto& [n, ch] : children) ch->apply(fn);
  fn(*this);
  return *this;
}

std::vector<std::pair<std::string, Parameter>> CellBase::parameters_dict(bool recurse) const {
  return parameters_and_names({}, recurse);
}

// ------------------------------------------------------------------ lookup by path

namespace {

// "'a', 'b', 'c'" for the names of `items` (at most 8, then the count), or "none".
template <class V, class F>
std::string quoted_names(const V& items, F name_of) {
  std::string s;
  std::size_t i = 0;
  for (const auto& it : items) {
    if (i == 8) {
      s += ", ... (" + std::to_string(items.size()) + " in all)";
      break;
    }
    s += (i++ ? ", '" : "'") + name_of(it) + "'";
  }
  return s.empty() ? std::string("none") : s;
}

}  // namespace

void CellBase::raise_missing(std::string_view api, const std::string& path, const std::string& part,
                             const std::string& at, std::string_view kind) const {
  auto first = [](const auto& e) { return e.first; };
  const std::string where = at.empty() ? cls_name() : "'" + at + "' (" + cls_name() + ")";
  detail::raise<KeyError>(api, ": '", path, "': ", where, " has no ", kind, " '", part,
                          "'; its parameters: ", quoted_names(params_, first), "; buffers: ",
                          quoted_names(buffers_, [](const Buffer& b) { return b.name; }),
                          "; child cells: ", quoted_names(children_, first));
}

CellBase::PathEnd CellBase::resolve_parent(const std::string& path, std::string_view api) const {
  const CellBase* cell = this;
  std::string at;  // the path of `cell`
  std::size_t pos = 0;
  for (std::size_t dot; (dot = path.find('.', pos)) != std::string::npos; pos = dot + 1) {
    const std::string part = path.substr(pos, dot - pos);
    auto it = std::find_if(cell->children_.begin(), cell->children_.end(),
                           [&](const auto& e) { return e.first == part; });
    if (it == cell->children_.end()) cell->raise_missing(api, path, part, at, "child cell");
    at += (at.empty() ? "" : ".") + part;
    cell = it->second;
  }
  return {cell, path.substr(pos), at};
}

Parameter CellBase::get_parameter(const std::string& path) const {
  // A ParameterTuple's parameter may have dots in its name: at each cell on
  // the path, the rest of the path is first taken as one name.
  const CellBase* here = this;
  for (std::size_t pos = 0;;) {
    for (const auto& [n, p] : here->params_)
      if (path.compare(pos, std::string::npos, n) == 0) return p;
    const std::size_t dot = path.find('.', pos);
    if (dot == std::string::npos) break;
    auto it = std::find_if(here->children_.begin(), here->children_.end(), [&](const auto& e) {
      return path.compare(pos, dot - pos, e.first) == 0;
    });
    if (it == here->children_.end()) break;
    here = it->second;
    pos = dot + 1;
  }
  auto [cell, last, at] = resolve_parent(path, "get_parameter");
  for (const auto& [n, p] : cell->params_)
    if (n == last) return p;
  cell->raise_missing("get_parameter", path, last, at, "parameter");
}

Tensor CellBase::get_buffer(const std::string& path) const {
  auto [cell, last, at] = resolve_parent(path, "get_buffer");
  for (const auto& b : cell->buffers_)
    if (b.name == last) return b.tensor;
  cell->raise_missing("get_buffer", path, last, at, "buffer");
}

CellBase& CellBase::get_sub_cell(const std::string& path) {
  if (path.empty()) return *this;
  auto [cell, last, at] = resolve_parent(path, "get_sub_cell");
  for (const auto& [n, c] : cell->children_)
    if (n == last) return *c;
  cell->raise_missing("get_sub_cell", path, last, at, "child cell");
}

// ------------------------------------------------------------------ names and removal

void CellBase::update_parameters_name(const std::string& prefix) {
  for (char ch : prefix)
    MS_CHECK(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '/' ||
                 ch == '.',
             ValueError, "update_parameters_name: prefix '", prefix, "' holds '", ch,
             "'; expected letters, digits, '_', '-', '/' and '.'");
  rename_params({});
  name_prefix_ = prefix;
  for (auto& [n, p] : parameters_and_names()) p.set_name(n);
}

namespace {

template <class V, class Pred>
bool erase_first(V& v, Pred pred) {
  auto it = std::find_if(v.begin(), v.end(), pred);
  if (it == v.end()) return false;
  v.erase(it);
  // Graphs traced with the entry are stale: retrace them, as after a hook change.
  compiler::bump_hook_version();
  return true;
}

}  // namespace

void CellBase::unregister_parameter(const std::string& name) {
  if (!erase_first(params_, [&](const auto& e) { return e.first == name; }))
    raise_missing("unregister_parameter", name, name, {}, "parameter");
}

void CellBase::unregister_buffer(const std::string& name) {
  if (!erase_first(buffers_, [&](const Buffer& b) { return b.name == name; }))
    raise_missing("unregister_buffer", name, name, {}, "buffer");
}

void CellBase::unregister_cell(const std::string& name) {
  if (!erase_first(children_, [&](const auto& e) { return e.first == name; }))
    raise_missing("unregister_cell", name, name, {}, "child cell");
}

CellBase& CellBase::set_train(bool mode) {
  // No graph is dropped: a graph whose trace read a cell's mode is keyed by it
  // (compiler::detail::note_mode_read), so the other mode's graphs stay cached.
  for (auto& [n, c] : cells_and_names()) c->mode_->store(mode, std::memory_order_relaxed);
  return *this;
}

CellBase& CellBase::recompute(bool mode) {
  if (recompute_ != mode) {
    recompute_ = mode;
    compiler::bump_hook_version();  // graphs traced before recompile with (or without) it
  }
  return *this;
}

void set_dump(CellBase& cell, bool enabled, std::string name) {
  cell.dump_ = enabled;
  cell.dump_name_ = name.empty() ? cell.cls_name() : std::move(name);
  if (!enabled) compiler::detail::forget_dump_cell(&cell);
  compiler::bump_hook_version();  // graphs traced before recompile with the scope
}

Tensor CellBase::tensor_call(bool cast_args, TensorCallFn f) {
  if (dump_ && !compiler::detail::in_dump_scope(this)) return dump_tensor_call(f);
  if (amp_active()) {
    if (detail::amp_entering() != this) return amp_tensor_call(cast_args, f);
    detail::amp_entering() = nullptr;  // amp_tensor_call's own call, with cast arguments
  }
  const compiler::detail::RecomputeScope recompute_scope(recompute_enabled() &&
                                                         ops::active_tracer() != nullptr);
  if (!has_hooks()) return std::move(f(TensorCallOp::kConstruct, nullptr)[0]);
  return hooked_tensor_call(f);
}

Tensor CellBase::dump_tensor_call(TensorCallFn f) {
  const bool eager = ops::active_tracer() == nullptr;
  const compiler::detail::DumpScopeGuard scope(this, dump_name_, eager);
  compiler::detail::DumpSelection sel;
  if (eager && compiler::detail::cell_dumps_active())
    sel = compiler::detail::dump_selection(scope.call);
  if (sel.inputs) dump_boundary(f(TensorCallOp::kInputs, nullptr), scope.call, "input");
  Args r = f(TensorCallOp::kCall, nullptr);
  if (sel.outputs) dump_boundary(r, scope.call, "output");
  return std::move(r[0]);
}

Tensor CellBase::hooked_tensor_call(TensorCallFn f) {
  Args in = f(TensorCallOp::kInputs, nullptr);
  const std::size_t n = in.size();
  ArgList args;
  for (Tensor& t : in) args.push_back(Arg(std::in_place_type<Tensor>, std::move(t)));
  auto construct = [&](const ArgList& a, Kwargs*) {
    MS_CHECK(a.size() == n, TypeError, cls_name(), ": forward pre-hooks returned ", a.size(),
             " arguments; construct takes ", n);
    const std::string name = cls_name();
    Args x;
    x.reserve(n);
    for (std::size_t i = 0; i < n; ++i) x.push_back(detail::from_arg<Tensor>(a[i], i, name));
    return f(TensorCallOp::kConstruct, &x);
  };
  Args out = run_hooked(args, nullptr, construct);
  return std::move(out[0]);
}

void CellBase::dump_boundary(const Args& ts, std::int64_t call, const char* what) const {
  const std::string& scope = compiler::detail::current_dump_scope();
  for (std::size_t k = 0; k < ts.size(); ++k)
    compiler::detail::dump_tensor(ts[k], detail::str_cat(scope, '.', call, '.', what, '.', k));
}

CellBase& CellBase::set_grad(bool requires_grad) {
  for (auto& [n, c] : cells_and_names()) c->requires_grad_ = requires_grad;
  return *this;
}

CellBase& CellBase::add_flags(const Flags& flags) {
  for (const auto& [k, v] : flags) flags_.insert_or_assign(k, v);
  return *this;
}

CellBase& CellBase::add_flags_recursive(const Flags& flags) {
  for (auto& [n, c] : cells_and_names()) c->add_flags(flags);
  return *this;
}

CellBase& CellBase::set_jit_config(JitConfig config) {
  jit_config_ = std::move(config);
  return *this;
}

std::string CellBase::to_string() const {
  std::ostringstream os;
  auto walk = [&](auto&& self, const CellBase& c, const std::string& indent) -> void {
    os << c.cls_name() << "(" << c.extra_repr();
    if (c.params_.empty() && c.buffers_.empty() && c.children_.empty()) {
      os << ")";
      return;
    }
    os << "\n";
    const std::string in = indent + "  ";
    for (const auto& [n, p] : c.params_)
      os << in << n << ": Parameter(name=" << p.name() << ", shape=" << p.shape()
         << ", dtype=" << p.dtype() << ", requires_grad=" << (p.requires_grad() ? "True" : "False")
         << ")\n";
    for (const auto& b : c.buffers_)
      os << in << b.name << ": Buffer(shape=" << b.tensor.shape() << ", dtype=" << b.tensor.dtype()
         << (b.persistent ? "" : ", persistent=False") << ")\n";
    for (const auto& [n, ch] : c.children_) {
      os << in << "(" << n << "): ";
      self(self, *ch, in);
      os << "\n";
    }
    os << indent << ")";
  };
  walk(walk, *this, "");
  return os.str();
}

// ------------------------------------------------------------------ state dicts

void CellBase::state_dict_into(StateDict& out, const std::string& base) const {
  auto* self = const_cast<CellBase*>(this);  // hooks take the cell (as MindSpore's hooks do)
  // Hooks see the prefix without its trailing '.' ("fc1"), as MindSpore's.
  const std::string prefix = detail::without_trailing_dot(base);
  if (state_hooks_ && state_hooks_->sd_pre)
    for (auto& h : state_hooks_->sd_pre->snapshot()) h(*self, out, prefix);
  for (const auto& [n, p] : params_) out.emplace_back(base + n, p);
  for (const auto& b : buffers_)
    if (b.persistent) out.emplace_back(base + b.name, b.tensor);
  if (Tensor extra = get_extra_state(); extra.defined())
    out.emplace_back(base + std::string(kExtraStateKey), std::move(extra));
  for (const auto& [n, ch] : children_) ch->state_dict_into(out, child_base(base, n, *ch));
  if (state_hooks_ && state_hooks_->sd_post)
    for (auto& h : state_hooks_->sd_post->snapshot()) h(*self, out, prefix);
}

StateDict CellBase::state_dict(const std::string& prefix) const {
  StateDict out;
  state_dict(out, prefix, true);
  return out;
}

StateDict& CellBase::state_dict(StateDict& destination, const std::string& prefix,
                                bool keep_vars) const {
  // The cell's entries are collected apart (the state-dict hooks see and may
  // edit them, never what `destination` held before), then appended: a
  // parameter shared by two cells appears once, under its first name; a key
  // `destination` held before is replaced in place.
  StateDict added;
  state_dict_into(added, root_base(detail::without_trailing_dot(prefix)));
  const std::size_t n0 = destination.size();
  std::set<std::pair<const void*, std::int64_t>> seen;
  for (auto& e : added) {
    // Extra states are values of their own, and empty tensors share no data:
    // neither is a shared parameter to drop.
    const bool extra =
        e.first == kExtraStateKey || e.first.ends_with(detail::str_cat(".", kExtraStateKey));
    if (!e.second.is_symbolic() && !extra && e.second.numel() > 0 &&
        !seen.insert({e.second.storage().get(), e.second.offset()}).second)
      continue;
    if (!keep_vars && e.second.defined() && !e.second.is_symbolic()) e.second = e.second.clone();
    auto old =
        std::find_if(destination.begin(), destination.begin() + static_cast<std::ptrdiff_t>(n0),
                     [&](const auto& d) { return d.first == e.first; });
    if (old != destination.begin() + static_cast<std::ptrdiff_t>(n0))
      old->second = std::move(e.second);
    else
      destination.push_back(std::move(e));
  }
  return destination;
}

void CellBase::run_load_pre_hooks(StateDict& sd, bool strict, LoadResult& res,
                                  std::vector<std::string>& errors) {
  // Pre-order, each cell with the key prefix of its entries (as state_dict).
  auto walk = [&](auto&& self, CellBase& c, const std::string& base) -> void {
    if (c.state_hooks_ && !c.state_hooks_->load_pre->empty()) {
      const LoadMetadata metadata;  // ms state dicts carry none
      for (auto& h : c.state_hooks_->load_pre->snapshot())
        h(c, sd, base, metadata, strict, res.missing_keys, res.unexpected_keys, errors);
    }
    for (const auto& [n, ch] : c.children_) self(self, *ch, child_base(base, n, *ch));
  };
  walk(walk, *this, root_base({}));
}

std::vector<std::pair<std::string, CellBase*>> CellBase::extra_state_cells() {
  std::vector<std::pair<std::string, CellBase*>> out;
  auto walk = [&](auto&& self, CellBase& c, const std::string& base) -> void {
    if (c.get_extra_state().defined()) out.emplace_back(base + std::string(kExtraStateKey), &c);
    for (const auto& [n, ch] : c.children_) self(self, *ch, child_base(base, n, *ch));
  };
  walk(walk, *this, root_base({}));
  return out;
}

void CellBase::set_extra_state(const Tensor&) {
  detail::raise<ValueError>("set_extra_state: ", cls_name(),
                            " returns extra state from get_extra_state but does not override "
                            "set_extra_state to load it");
}

std::vector<Tensor> CellBase::write_extra_states(const ExtraWrites& extra) {
  std::vector<Tensor> old;
  std::size_t done = 0;
  try {
    for (const auto& [cell, src] : extra) {
      old.push_back(cell->get_extra_state());
      cell->set_extra_state(src->clone());
      ++done;
    }
  } catch (...) {
    for (std::size_t i = 0; i < done; ++i) extra[i].first->set_extra_state(old[i]);
    throw;
  }
  return old;
}

std::vector<std::pair<Tensor, const Tensor*>> CellBase::match_state_dict(const StateDict& sd,
                                                                         LoadResult& res,
                                                                         ExtraWrites& extra) {
  const auto extra_cells = extra_state_cells();
  auto extra_cell = [&](const std::string& k) -> CellBase* {
    for (const auto& [key, c] : extra_cells)
      if (key == k) return c;
    return nullptr;
  };
  const StateDict mine = state_dict();
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [k, t] : sd) {
    MS_CHECK(given.emplace(k, &t).second, ValueError, "load_state_dict: key '", k,
             "' appears twice");
  }
  std::vector<std::pair<Tensor, const Tensor*>> writes;
  std::set<std::string> used;
  for (const auto& [k, dst] : mine) {
    auto it = given.find(k);
    if (it == given.end()) {
      res.missing_keys.push_back(k);
      continue;
    }
    used.insert(k);
    const Tensor& src = *it->second;
    MS_CHECK(src.defined() && !src.is_symbolic(), ValueError, "load_state_dict: '", k,
             "' is undefined or symbolic");
    // Extra state may change its shape and dtype: the cell's set_extra_state judges it.
    if (CellBase* c = extra_cell(k)) {
      extra.emplace_back(c, &src);
      continue;
    }
    MS_CHECK(src.shape() == dst.shape(), ShapeError, "load_state_dict: '", k, "' has shape ",
             dst.shape(), " in ", cls_name(), " but ", src.shape(), " in the state dict");
    MS_CHECK(src.dtype() == dst.dtype(), TypeError, "load_state_dict: '", k, "' has dtype ",
             dst.dtype(), " in ", cls_name(), " but ", src.dtype(), " in the state dict");
    writes.emplace_back(dst, &src);
  }
  for (const auto& [k, t] : sd)
    if (!used.count(k)) res.unexpected_keys.push_back(k);
  return writes;
}

bool CellBase::run_load_post_hooks(LoadResult& res, bool dry) {
  // Children before their parent, as MindSpore's recursive load runs them.
  bool any = false;
  auto walk = [&](auto&& self, CellBase& c) -> void {
    for (const auto& [n, ch] : c.children_) self(self, *ch);
    if (!c.state_hooks_ || c.state_hooks_->load_post->empty()) return;
    any = true;
    if (!dry)
      for (auto& h : c.state_hooks_->load_post->snapshot()) h(c, res);
  };
  walk(walk, *this);
  return any;
}

void CellBase::raise_load_errors(const LoadResult& res, const std::vector<std::string>& errors,
                                 bool strict) const {
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? ", '" : "'") + v[i] + "'";
    if (v.size() > 8) s += ", ... (" + std::to_string(v.size()) + " in all)";
    return s;
  };
  const bool missing = strict && !res.missing_keys.empty();
  const bool unexpected = strict && !res.unexpected_keys.empty();
  if (errors.empty()) {
    MS_CHECK(!missing, ValueError, "load_state_dict: missing keys for ", cls_name(), ": ",
             join(res.missing_keys), " (strict = true; nothing was loaded)");
    MS_CHECK(!unexpected, ValueError, "load_state_dict: unexpected keys for ", cls_name(), ": ",
             join(res.unexpected_keys), " (strict = true; nothing was loaded)");
    return;
  }
  // As MindSpore: the strict findings first, then each hook's message.
  std::string all;
  if (missing) all += "\n\tmissing keys: " + join(res.missing_keys);
  if (unexpected) all += "\n\tunexpected keys: " + join(res.unexpected_keys);
  for (const auto& e : errors) all += "\n\t" + e;
  detail::raise<ValueError>("load_state_dict: error(s) in loading the state dict for ", cls_name(),
                            " (nothing was loaded):", all);
}

LoadResult CellBase::load_state_dict(const StateDict& sd_in, bool strict) {
  StateDict sd = sd_in;
  LoadResult res;
  std::vector<std::string> errors;
  run_load_pre_hooks(sd, strict, res, errors);
  ExtraWrites extra;
  const auto writes = match_state_dict(sd, res, extra);
  const bool post = run_load_post_hooks(res, /*dry=*/true);
  // Without post-hooks the verdict is known now: nothing is written on failure.
  if (!post) raise_load_errors(res, errors, strict);
  // With them, they see the loaded values first; keep the old ones to put
  // back when the load still fails after them.
  // A post-hook that throws puts the old values back too.
  std::vector<Tensor> undo;
  if (post)
    for (const auto& [dst, src] : writes) undo.push_back(dst.clone());
  // Everything is valid: now write (copies cannot fail on checked shapes).
  // A source that aliases a destination is copied first.
  std::vector<Tensor> srcs;
  srcs.reserve(writes.size());
  for (const auto& [dst, src] : writes) srcs.push_back(src->clone());
  // Extra states first: set_extra_state may throw (it undoes itself then).
  const std::vector<Tensor> old_extra = write_extra_states(extra);
  for (std::size_t i = 0; i < writes.size(); ++i) {
    Tensor d = writes[i].first;
    d.copy_(srcs[i]);
  }
  if (post) {
    try {
      run_load_post_hooks(res, /*dry=*/false);
      raise_load_errors(res, errors, strict);
    } catch (...) {
      for (std::size_t i = 0; i < undo.size(); ++i) {
        Tensor d = writes[i].first;
        d.copy_(undo[i]);
      }
      for (std::size_t i = 0; i < extra.size(); ++i) extra[i].first->set_extra_state(old_extra[i]);
      throw;
    }
  }
  return res;
}

namespace {
template <class L>
HookHandle add_hook(detail::LazyOnce<detail::StateHooks>& sh,
                    const std::shared_ptr<L> detail::StateHooks::*m, typename L::value_type fn) {
  return add_to(sh.get_or_make().*m, std::move(fn));
}
}  // namespace

HookHandle CellBase::register_state_dict_pre_hook(detail::StateDictHook fn) {
  return add_hook(state_hooks_, &detail::StateHooks::sd_pre, std::move(fn));
}
HookHandle CellBase::register_state_dict_post_hook(detail::StateDictHook fn) {
  return add_hook(state_hooks_, &detail::StateHooks::sd_post, std::move(fn));
}
HookHandle CellBase::register_load_state_dict_pre_hook(detail::LoadPreHook fn) {
  // The short form sees the prefix without its trailing '.' ("fc1").
  detail::LoadPreHookFull full = [fn = std::move(fn)](
                                     CellBase& c, StateDict& sd, const std::string& base,
                                     const LoadMetadata&, bool, std::vector<std::string>&,
                                     std::vector<std::string>&, std::vector<std::string>&) {
    fn(c, sd, detail::without_trailing_dot(base));
  };
  return add_hook(state_hooks_, &detail::StateHooks::load_pre, std::move(full));
}
HookHandle CellBase::register_load_state_dict_pre_hook(detail::LoadPreHookFull fn) {
  return add_hook(state_hooks_, &detail::StateHooks::load_pre, std::move(fn));
}
HookHandle CellBase::register_load_state_dict_post_hook(detail::LoadPostHook fn) {
  return add_hook(state_hooks_, &detail::StateHooks::load_post, std::move(fn));
}

Tensor extra_state_from_string(std::string_view bytes) {
  std::vector<std::uint8_t> v(bytes.begin(), bytes.end());
  return from_vector(v);
}

std::string extra_state_to_string(const Tensor& state) {
  MS_CHECK(state.defined(), ValueError, "extra_state_to_string: the state tensor is undefined");
  MS_CHECK(state.dtype() == uint8, TypeError,
           "extra_state_to_string: expected a uint8 tensor, got ", state.dtype());
  MS_CHECK(state.rank() == 1, ShapeError,
           "extra_state_to_string: expected a 1-D tensor, got shape ", state.shape());
  const Tensor c = state.contiguous();
  const auto* p = reinterpret_cast<const char*>(c.raw_data());
  return std::string(p, p + c.numel());
}

}  // namespace ms

namespace ms::compiler::detail {

void ArgTraits<Kwargs>::key(const Kwargs& kw, KeyBuilder& k) {
  k.open('<', kw.size());
  for (const auto& [name, v] : kw) {
    k.constant('s', name, name + "=");
    std::visit(
        [&](const auto& x) {
          using X = std::remove_cvref_t<decltype(x)>;
          if constexpr (std::is_same_v<X, Tensor>)
            k.tensor(x);
          else
            ArgTraits<X>::key(x, k);
        },
        v);
  }
  k.close('>');
}

void ArgTraits<Kwargs>::flatten(const Kwargs& kw, std::vector<Tensor>& out) {
  for (const auto& [name, v] : kw)
    if (const Tensor* t = std::get_if<Tensor>(&v)) out.push_back(*t);
}

}  // namespace ms::compiler::detail
