// ms/nn/cell.hpp — Cell<Derived>: the unit a model is built from (MindSpore's nn.Cell).
//
// Stage: nn. A cell holds Parameters, buffers and child cells under names,
// and defines `construct`, a template on its arguments so that the same code
// runs eagerly on concrete tensors and symbolically under ms::jit:
//
//   struct MLP : ms::Cell<MLP> {
//     ms::nn::Dense fc1{784, 512}, fc2{512, 10};
//     MLP() { register_cells("fc1", fc1, "fc2", fc2); }   // fc1.weight, fc1.bias, ...
//     auto construct(const auto& x) { return fc2(ms::relu(fc1(x))); }
//   };
//
// `construct` takes tensors and also numbers, enums, strings, optionals and
// sequences of tensors, ms::mutable_ values and a trailing ms::Kwargs: the
// kinds and how ms::jit keys each are in ms/nn/cell_args.hpp (a number is a
// constant of the graph, a mutable_ number a 0-d tensor input):
//
//   Tensor construct(const Tensor& x, int steps, const std::optional<Tensor>& mask);
//   net(x, 3, std::nullopt);   ms::jit(net)(x, 3, mask);
//
// Calling `net(x)` runs the forward pre-hooks, `construct`, then the forward
// hooks (in registration order); hooks see the arguments as ms::Args (the
// tensors) or ms::ArgList (every argument). A hook's signature is checked where it is
// registered (a static_assert names the accepted forms); one that takes the
// call's keyword arguments is registered with the tag ms::with_kwargs. A cell
// without hooks pays nothing: its hook lists are made on first registration
// (as MindSpore's lazy `_forward_*` fields), so the call is `construct` plus
// one pointer test. Registering or removing hooks while other threads call or
// trace the cell is safe (the lists lock; ms/hooks/hook_handle.hpp says what a
// concurrent call sees). Under ms::jit, hooks become host-callback nodes
// (ms/ops/host.hpp) that run with concrete values each time the graph runs,
// and gradient hooks are traced into the backward graph; registering or
// removing a hook bumps the global hook version, which
// is part of every compile key. Besides a cell's own hooks, global buffer
// registration hooks (ms::register_cell_buffer_registration_hook) see every
// cell's register_buffer, and state-dict hooks take part in state_dict and
// load_state_dict (see those members).
//
// A cell may define its own backward, used instead of autodiff through
// `construct` (MindSpore's `bprop`). For a call with tensors x1..xn returning
// one tensor:
//
//   struct Ste : ms::Cell<Ste> {            // a straight-through estimator
//     ms::Tensor construct(const ms::Tensor& x) { return ms::round(x); }
//     std::vector<ms::Tensor> bprop(const ms::Tensor& x, const ms::Tensor& out,
//                                   const ms::Tensor& dout) { return {dout}; }
//   };
//
// The forward result is construct's. When a gradient is traced through the
// call (ms::grad, ms::value_and_grad, eagerly or under ms::jit), the inputs'
// gradients are what bprop returns (a std::vector or std::tuple of tensors,
// one per tensor input; an undefined Tensor: none). Its ops are traced, so it
// runs in the compiled graph and is differentiable where its ops are. As in
// MindSpore, nothing flows back through construct: a Parameter used only
// inside it gets a zero gradient. A wrong count is a ValueError, a gradient of
// another shape a ShapeError, of another dtype a TypeError, each naming
// `<cls_name>.bprop` and the input. With backward hooks on the same cell, as
// MindSpore orders them: backward pre-hooks change `dout` before bprop sees
// it; backward hooks see bprop's gradients as grad_inputs and may replace
// them. Without an active trace the call runs construct only.
//
// Cells are registered by reference, so a cell cannot be copied or moved:
// make it where it lives (a member, a local, a std::unique_ptr).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>

#include "ms/core/std_parts.hpp"
#include "ms/core/tensor.hpp"
#include "ms/hooks/hook_handle.hpp"
#include "ms/jit/dump_scope.hpp"
#include "ms/jit/jit.hpp"
#include "ms/jit/recompute.hpp"
#include "ms/nn/amp_args.hpp"
#include "ms/nn/cell_args.hpp"
#include "ms/nn/parameter.hpp"
#include "ms/nn/state_dict.hpp"
#include "ms/ops/cast_policy.hpp"
#include "ms/ops/host.hpp"

namespace ms {

/// One keyword argument's value.
using KwValue = std::variant<Tensor, std::int64_t, double, bool, std::string>;
/// Keyword arguments: a cell call may end with an `ms::Kwargs` that its
/// `construct` accepts as its last parameter (C++ has no keyword arguments).
using Kwargs = std::map<std::string, KwValue, std::less<>>;

namespace compiler::detail {
/// ms::Kwargs under ms::jit: the names and the non-tensor values are in the
/// key (constants of the graph); a tensor value is a graph input, its dtype
/// and shape in the key.
template <>
struct ArgTraits<Kwargs> {
  using traced = Kwargs;
  // key and flatten are defined in src/nn/cell.cpp: their visits of the
  // keyword variant compile there once, not in every translation unit.
  static void key(const Kwargs& kw, KeyBuilder& k);
  template <class Ctx>
  static Kwargs trace(const Kwargs& kw, Ctx& c) {
    Kwargs out = kw;
    for (auto& [name, v] : out)
      if (const Tensor* t = std::get_if<Tensor>(&v)) v = c.add_input(t->dtype(), t->shape());
    return out;
  }
  static void flatten(const Kwargs& kw, std::vector<Tensor>& out);
  static Kwargs inlined(const Kwargs& kw) { return kw; }
};
}  // namespace compiler::detail

/// The value of a cell flag (MindSpore's flags are mostly bools).
using FlagValue = std::variant<bool, std::int64_t, double, std::string>;
/// A cell's flags by name (CellBase::add_flags, get_flags).
using Flags = std::map<std::string, FlagValue, std::less<>>;

/// The last part of the state-dict key of a cell's extra state
/// (`<prefix>_extra_state`, as MindSpore and PyTorch; see CellBase::get_extra_state).
inline constexpr std::string_view kExtraStateKey = "_extra_state";

/// Per-cell metadata handed to a full load pre-hook (MindSpore's
/// `local_metadata`). ms's StateDict carries no metadata (MindSpore and PyTorch
/// keep a `_metadata` version per module), so it is always empty in ms; it is
/// in the signature so that hooks written against MindSpore's form port as they are.
using LoadMetadata = std::map<std::string, std::string, std::less<>>;

/// What load_state_dict did not match (strict = false reports, true raises).
struct LoadResult {
  /// Keys the cell has that the state dict lacks.
  std::vector<std::string> missing_keys;
  /// Keys of the state dict that name nothing in the cell.
  std::vector<std::string> unexpected_keys;
};

class CellBase;

namespace amp::detail {
struct CellAccess;  // ms/nn/amp.hpp's access to a cell's mixed-precision settings
}  // namespace amp::detail

namespace detail {

// Hook function types, erased over the cell type (Cell<Derived> adapts the
// user's callable). A hook returns std::nullopt to keep what it was given.
// Forward hooks get every argument (ms::ArgList); the tensor-only forms are
// adapted in Cell<Derived>.
using PreHook = std::function<std::optional<ArgList>(CellBase&, const ArgList&, Kwargs*)>;
// A forward pre-hook, whether it takes the keyword arguments (with_kwargs),
// and whether it is an ms::ArgList form (which also runs while a call is
// traced, to give the constants construct is traced with).
struct PreHookEntry {
  PreHook fn;
  bool with_kwargs = false;
  bool general = false;
};
using FwdHook =
    std::function<std::optional<Args>(CellBase&, const ArgList&, const Kwargs*, const Args&)>;
using BwdPreHook = std::function<std::optional<Args>(CellBase&, const Args&)>;
using BwdHook = std::function<std::optional<Args>(CellBase&, const Args&, const Args&)>;
using StateDictHook = std::function<void(CellBase&, StateDict&, const std::string& prefix)>;
using LoadPreHook = std::function<void(CellBase&, StateDict&, const std::string& prefix)>;
// MindSpore's full form: (cell, state_dict, prefix, local_metadata, strict,
// missing_keys, unexpected_keys, error_msgs).
using LoadPreHookFull = std::function<void(
    CellBase&, StateDict&, const std::string& prefix, const LoadMetadata& local_metadata,
    bool strict, std::vector<std::string>& missing_keys, std::vector<std::string>& unexpected_keys,
    std::vector<std::string>& error_msgs)>;
using LoadPostHook = std::function<void(CellBase&, LoadResult&)>;
// A global buffer registration hook: std::nullopt keeps the tensor.
using BufferHook =
    std::function<std::optional<Tensor>(CellBase&, const std::string& name, const Tensor&)>;

// A cell's hook lists (forward, backward) and its state-dict hook lists, each
// set made at once with the first hook of its kind (LazyOnce) and never
// replaced, so threads may read them while others register. Defined in libms
// (src/nn/cell.cpp): a user's file never instantiates them.
struct CellHooks;
struct StateHooks;

/// Adds `fn` to the global buffer registration hooks (in libms; see
/// ms::register_cell_buffer_registration_hook).
HookHandle add_buffer_registration_hook(BufferHook fn);

/// The class name of T without namespaces (`ms::nn::Dense` -> `Dense`).
std::string short_type_name(const std::type_info& t);

/// `args` with its tensors replaced by what a tensor-only hook returned: a
/// call of tensors only takes the new list whole (construct checks its
/// length); otherwise the count must stay (ValueError naming `what`).
ArgList replace_tensors(const ArgList& args, Args tensors, const std::string& what);
/// The cell whose mixed-precision call (ms/nn/amp.hpp) is entering its own
/// call with cast arguments on this thread, or nullptr (in libms).
const CellBase*& amp_entering();
/// `t` cast to `dtype` when it is floating of another dtype, else `t` (in libms).
Tensor amp_cast(const Tensor& t, DType dtype);

}  // namespace detail

/// The non-template part of every cell: registration, names, traversal,
/// train/eval mode, state dicts. Use Cell<Derived> to define a cell.
class CellBase {
 public:
  CellBase();  // in libms, where the hook lists are complete
  virtual ~CellBase();
  CellBase(const CellBase&) = delete;
  CellBase& operator=(const CellBase&) = delete;
  CellBase(CellBase&&) = delete;
  CellBase& operator=(CellBase&&) = delete;

  // ---------------------------------------------------------------- registration
  /// Registers `param` under `name` (no dots). ValueError on an empty or
  /// dotted name, or one already used by a parameter, buffer or child.
  void register_parameter(const std::string& name, const Parameter& param);
  /// As register_parameter (MindSpore's name for it).
  void insert_param_to_cell(const std::string& name, const Parameter& param) {
    register_parameter(name, param);
  }
  /// Registers the parameters of `params` as one unit under `name` (MindSpore's
  /// `self.name = ParameterTuple(...)`). As in MindSpore, each parameter is
  /// registered under its own name (which may hold dots: `moments.fc.weight`),
  /// not under `name`: it appears in parameters(), parameters_dict() and the
  /// state dict as `<path>.<its name>`; a parameter with a generated name
  /// (`Parameter$N`) is renamed `Parameter$<k>`, k counting from 1 per cell.
  /// ValueError when `name` or a parameter's name is already used in this
  /// cell (by a parameter, buffer, child or tuple), a dotted name starts with
  /// a child's name (`fc.weight` beside a child `fc`: the paths would
  /// collide; a child named so later is refused too), or a parameter is
  /// already registered here. get_parameter finds a dotted name as a whole.
  ///   moments = net.register_parameter_tuple("moments", weights.clone("moments", "zeros"));
  /// Returns the tuple as registered (with the parameters' final names).
  ParameterTuple register_parameter_tuple(const std::string& name, const ParameterTuple& params);
  /// The tuple registered under `name` (KeyError naming the tuples there are).
  ParameterTuple get_parameter_tuple(const std::string& name) const;
  /// Registers a buffer (state that is not trained: BatchNorm's running
  /// statistics). Persistent buffers are part of the state dict. The global
  /// buffer registration hooks (ms::register_cell_buffer_registration_hook)
  /// run first, in registration order, and may replace the tensor; returns
  /// the tensor registered (`buffer`, or the last hook's replacement), which a
  /// cell keeping the buffer in a member should store there too:
  ///   moving_mean = register_buffer("moving_mean", ms::zeros({n}));
  Tensor register_buffer(const std::string& name, const Tensor& buffer, bool persistent = true);
  /// Registers `child` under `name`; its parameters are renamed `name.<theirs>`.
  void insert_child_to_cell(const std::string& name, CellBase& child);
  /// `register_cells("fc1", fc1, "fc2", fc2, ...)`.
  template <class... Rest>
  void register_cells(const std::string& name, CellBase& child, Rest&&... rest) {
    insert_child_to_cell(name, child);
    if constexpr (sizeof...(Rest) > 0) register_cells(std::forward<Rest>(rest)...);
  }

  // ---------------------------------------------------------------- traversal
  /// Every parameter with its hierarchical name, depth first in registration
  /// order; a parameter shared by two cells appears once (its first name).
  std::vector<std::pair<std::string, Parameter>> parameters_and_names(
      const std::string& prefix = {}, bool recurse = true) const;
  /// The parameters (`get_parameters()` in MindSpore).
  ParameterList parameters(bool recurse = true) const;
  /// As parameters (MindSpore's name for it).
  ParameterList get_parameters(bool recurse = true) const { return parameters(recurse); }
  /// The parameters with requires_grad.
  ParameterList trainable_params(bool recurse = true) const;
  /// The parameters without requires_grad.
  ParameterList untrainable_params(bool recurse = true) const;
  /// This cell (name `prefix`) and every descendant, depth first.
  std::vector<std::pair<std::string, CellBase*>> cells_and_names(const std::string& prefix = {});
  /// Direct children.
  const std::vector<std::pair<std::string, CellBase*>>& name_cells() const { return children_; }
  /// Every buffer with its hierarchical name (persistent or not).
  std::vector<std::pair<std::string, Tensor>> buffers_and_names(const std::string& prefix = {},
                                                                bool recurse = true) const;
  /// The buffers of buffers_and_names, without their names.
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// Calls `fn` on every descendant, children before their parent (post-order,
  /// as MindSpore's and PyTorch's apply), then on this cell; returns this cell.
  /// `fn` may change the cell it gets (values, hooks, modes) but must not add
  /// or remove cells of the tree being walked.
  ///   net.apply([](ms::CellBase& c) { if (auto* d = dynamic_cast<ms::nn::Dense*>(&c)) ...; });
  CellBase& apply(const std::function<void(CellBase&)>& fn);
  /// The parameters by full name, in the order and under the names of
  /// parameters_and_names (the names of the state dict).
  ///   for (const auto& [name, p] : net.parameters_dict()) std::cout << name << "\n";
  std::vector<std::pair<std::string, Parameter>> parameters_dict(bool recurse = true) const;

  // ---------------------------------------------------------------- lookup by path
  // A path is the dotted chain of registration names from this cell
  // ("body.0.fc.weight"). A missing part is an ms::KeyError naming the API,
  // the path, the first part that is missing and what exists at that level.
  /// The parameter at `path` (a ParameterTuple's parameter whose name has
  /// dots, `h.moments.fc.weight`, is found by its whole name).
  ///   ms::Parameter w = net.get_parameter("body.0.fc.weight");
  Parameter get_parameter(const std::string& path) const;
  /// The buffer at `path` (the tensor itself, not a copy).
  ///   ms::Tensor mean = net.get_buffer("body.0.bn.moving_mean");
  Tensor get_buffer(const std::string& path) const;
  /// The descendant cell at `path` (this cell for "").
  ///   ms::CellBase& fc = net.get_sub_cell("body.0.fc");
  CellBase& get_sub_cell(const std::string& path);

  // ---------------------------------------------------------------- names and removal
  /// Names every parameter under this cell `prefix` + its name relative to
  /// this cell (MindSpore's update_parameters_name; always recursive), and
  /// makes the state dict and parameters_and_names use the same names, also
  /// when this cell is a child (the prefix replaces the path above it).
  /// Registering the cell as a child later names it after the parent again.
  /// `prefix` holds letters, digits, '_', '-', '/' and '.' (ValueError otherwise).
  ///   net.update_parameters_name("net1.");   // fc1.weight -> net1.fc1.weight
  void update_parameters_name(const std::string& prefix);
  /// Removes this cell's parameter `name` (MindSpore's `del cell.name`):
  /// parameters(), the state dict and parameters_and_names no longer see it,
  /// and graphs ms::jit compiled before are retraced. KeyError if there is none.
  ///   net.unregister_parameter("scale");
  void unregister_parameter(const std::string& name);
  /// Removes this cell's buffer `name`, as unregister_parameter.
  ///   bn.unregister_buffer("moving_mean");
  void unregister_buffer(const std::string& name);
  /// Removes the child cell `name` with everything under it, as
  /// unregister_parameter; containers remove the cell itself too
  /// (CellList and SequentialCell as pop, CellDict as pop of the key).
  ///   net.unregister_cell("aux_head");
  virtual void unregister_cell(const std::string& name);

  // ---------------------------------------------------------------- modes
  /// Training mode for this cell and its descendants (Dropout, BatchNorm read it).
  /// Graphs ms::jit compiled are kept: a graph whose trace read a cell's
  /// training() is keyed by the value it read, so switching modes picks the
  /// graph of the new mode (compiled once per mode) and leaves every other graph alone.
  CellBase& set_train(bool mode = true);
  /// Whether the cell is in training mode (see set_train; false for a new cell).
  /// Read while ms::jit traces, the value becomes part of the graph's cache key.
  bool training() const {
    const bool m = mode_->load(std::memory_order_relaxed);
    if (ops::active_tracer() != nullptr) [[unlikely]]
      compiler::detail::note_mode_read(mode_, m);
    return m;
  }
  // ---------------------------------------------------------------- recompute
  /// Recompute (MindSpore's `Cell.recompute(mode=True)`), `mode` true: the
  /// values this cell's construct computes are not kept for the backward of
  /// ms::grad / ms::value_and_grad (eager, which traces, or under ms::jit);
  /// when the backward reaches the cell it recomputes them from the cell's
  /// inputs and parameters (the same ops on the same values in the same
  /// order, so gradients are bitwise those without recompute, grad(grad(f))
  /// equal up to rounding; dumps mark the
  /// recomputed ops `[recompute]`). The cell's inputs stay kept (the previous
  /// cell's outputs). A random draw inside (dropout's mask) is kept and not
  /// redrawn, so the recomputed forward applies the same mask. A marked cell
  /// inside a marked cell is recomputed with the outer one. How:
  /// ms/jit/recompute.hpp. `mode` false turns it off; graphs compiled before
  /// a change recompile.
  ///   net.block1.recompute();   // ... net.block1.recompute(false);
  CellBase& recompute(bool mode = true);
  /// Whether recompute() turned recompute on for this cell.
  bool recompute_enabled() const { return recompute_; }

  /// Marks the cell (and descendants) as needing gradients (MindSpore's set_grad).
  CellBase& set_grad(bool requires_grad = true);
  /// Whether set_grad marked the cell (false for a new cell).
  bool requires_grad() const { return requires_grad_; }

  // ---------------------------------------------------------------- flags
  /// Sets flags on this cell (MindSpore's `add_flags(**flags)`): each name
  /// gets its value, replacing an earlier one; other flags stay. Returns the cell.
  ///   net.add_flags({{"defer_inline", true}, {"level", std::int64_t{2}}});
  /// Flags are the cell's own metadata for user code and tools to read;
  /// ms::jit does not read them (use set_jit_config for how a cell compiles).
  CellBase& add_flags(const Flags& flags);
  /// add_flags on this cell and every descendant (MindSpore's `add_flags_recursive`).
  CellBase& add_flags_recursive(const Flags& flags);
  /// The flags set on this cell (empty for a new cell).
  const Flags& get_flags() const { return flags_; }

  // ---------------------------------------------------------------- jit config
  /// How ms::jit compiles this cell (MindSpore's `set_jit_config(JitConfig)`):
  /// `ms::jit(net)` given no JitConfig of its own compiles with this one
  /// (jit_level, exec_order, dynamic, input_signature, ...); a JitConfig given
  /// to ms::jit wins. It is read when ms::jit(net) is made.
  ///   net.set_jit_config({.jit_level = ms::JitLevel::O0});
  ///   auto f = ms::jit(net);   // compiled at O0
  CellBase& set_jit_config(JitConfig config);
  /// The config given to set_jit_config, or nullptr when none was.
  const JitConfig* get_jit_config() const { return jit_config_ ? &*jit_config_ : nullptr; }

  // ---------------------------------------------------------------- dynamic shapes
  /// Dynamic-shape specs of `construct`'s arguments (MindSpore's set_inputs),
  /// used by `ms::jit(cell)`: one generalized graph for every call that fits
  /// them, an ms::Error for a call that does not.
  ///   net.set_inputs({ms::TensorSpec({ms::Dim("batch"), 784}, ms::float32)});
  /// An empty list clears them. Together with ms::enable_dynamic: a ValueError.
  CellBase& set_inputs(std::vector<TensorSpec> specs) {
    inputs_ = std::move(specs);
    return *this;
  }
  /// The specs given to set_inputs (empty when none).
  const std::vector<TensorSpec>& get_inputs() const { return inputs_; }

  // ---------------------------------------------------------------- mixed precision
  /// Runs this cell and its descendants in `dtype` (float16, bfloat16 or
  /// float32; MindSpore's to_float, recursive as MindSpore's flags are):
  /// floating inputs are cast on entry, the ops inside cast their floating
  /// inputs (so float32 parameters are cast in the graph and keep float32
  /// gradients), outputs stay in `dtype`. ms/nn/amp.hpp says how.
  ///   net.to_float(ms::bfloat16);
  ///   net.bn.to_float(ms::float32);   // a child set afterwards keeps its own
  /// ValueError naming `to_float` and `dtype` for another dtype.
  CellBase& to_float(DType dtype);
  /// The dtype to_float set on this cell (std::nullopt: none; MindSpore's
  /// get_mixed_precision_type).
  std::optional<DType> get_mixed_precision_type() const;
  /// The level ms::amp::auto_mixed_precision set ("" when none; MindSpore's `_amp_level`).
  const std::string& amp_level() const { return amp_level_; }

  // ---------------------------------------------------------------- printing
  /// The class name shown in the tree (`Dense`).
  virtual std::string cls_name() const { return detail::short_type_name(typeid(*this)); }
  /// Extra text inside the parentheses of this cell's line (`in=784, out=512`).
  virtual std::string extra_repr() const { return {}; }
  /// A readable tree of the cell, its children and their parameter shapes.
  std::string to_string() const;

  // ---------------------------------------------------------------- state dicts
  /// Parameters and persistent buffers by hierarchical name (the tensors
  /// themselves, not copies: clone them to keep a snapshot). As
  /// `state_dict(out, prefix, true)` into an empty `out`.
  StateDict state_dict(const std::string& prefix = {}) const;
  /// MindSpore's `state_dict(destination, prefix, keep_vars)`: appends this
  /// cell's entries to `destination` and returns it. A key `destination`
  /// already holds is replaced in place (as a dict assignment). The state-dict
  /// hooks see (and may edit) the entries of this call, collected apart, not
  /// what `destination` held before (MindSpore's hooks get the destination). `prefix` is put before
  /// every key with a dot, as in state_dict(prefix): "model" and MindSpore's "model." both give
  /// "model.fc1.weight".
  ///
  /// keep_vars in ms: eager ms tensors carry no autograd history, so
  /// MindSpore's distinction (the Parameter itself vs a detached tensor sharing its
  /// storage) is one of storage here. `true`: the entries are the parameters'
  /// and buffers' tensors themselves (writing into one changes the cell, as
  /// state_dict() does). `false`: they are detached copies, a snapshot that
  /// later training does not change and writing into does not touch the cell
  /// (in MindSpore and PyTorch a keep_vars=false entry still shares storage).
  ///   ms::StateDict all;
  ///   encoder.state_dict(all, "encoder", false);
  ///   decoder.state_dict(all, "decoder", false);
  StateDict& state_dict(StateDict& destination, const std::string& prefix, bool keep_vars) const;
  /// Copies `sd` into the parameters and persistent buffers. Every entry is
  /// checked first (shape and dtype equal, a ShapeError or TypeError naming
  /// the key otherwise; strict: no missing or unexpected key); nothing is
  /// written unless all of it is valid.
  ///
  /// The load hooks run as in MindSpore: the load pre-hooks of every cell
  /// (this cell first, then its descendants depth first), then the checks,
  /// then the load post-hooks (children before their parent), and only then
  /// does `strict` judge the missing and unexpected keys (so a post-hook that
  /// clears them lets a strict load succeed) and does any message a pre-hook
  /// appended to `error_msgs` fail the load: a ValueError naming every message
  /// (MindSpore raises RuntimeError). Post-hooks see the values loaded; when
  /// the load then fails, every parameter and buffer gets its old value back
  /// (so a strict load with post-hooks keeps a copy of the old values).
  LoadResult load_state_dict(const StateDict& sd, bool strict = true);

  /// State of this cell that is neither a parameter nor a buffer, for the
  /// state dict (MindSpore's and PyTorch's `get_extra_state`). A cell
  /// overrides it (with set_extra_state) to return a defined Tensor; the
  /// default, an undefined Tensor, means "no extra state". The state dict
  /// then holds it under `<prefix>_extra_state` (`_extra_state` for the cell
  /// itself, `fc1._extra_state` for a child), after the cell's parameters and
  /// buffers; checkpoints save and load it as any entry. The tensor may have
  /// any dtype and shape, and the loaded one need not match the current one:
  /// a small value (a string, counters) goes as bytes in a uint8 tensor,
  /// ms::extra_state_from_string / ms::extra_state_to_string.
  ///   ms::Tensor get_extra_state() const override { return ms::extra_state_from_string(vocab); }
  ///   void set_extra_state(const ms::Tensor& t) override { vocab = ms::extra_state_to_string(t); }
  virtual Tensor get_extra_state() const { return {}; }
  /// Takes the state get_extra_state returned (from load_state_dict, given a
  /// copy of the state dict's entry). A load into a cell with extra state
  /// whose dict lacks its key reports the key missing (an error when strict);
  /// an `_extra_state` key for a cell without extra state is unexpected.
  /// set_extra_state runs before any parameter is written; if one throws,
  /// the cells it already ran on get their old state back and nothing else
  /// changes. The default raises a ValueError (a cell overriding
  /// get_extra_state must override this too).
  virtual void set_extra_state(const Tensor& state);

  // State-dict hooks (MindSpore's `_register_state_dict_hook` and friends).
  // Each returns a handle that removes the hook.
  /// `fn(cell, sd, prefix)` runs before state_dict adds this cell's entries
  /// (under `prefix`) to `sd`.
  HookHandle register_state_dict_pre_hook(detail::StateDictHook fn);
  /// `fn(cell, sd, prefix)` runs after state_dict added this cell's entries to
  /// `sd`, and may edit them.
  HookHandle register_state_dict_post_hook(detail::StateDictHook fn);
  /// `fn(cell, sd, prefix)` runs at the start of load_state_dict, before any
  /// entry is checked, and may edit the dict `sd` that is then loaded.
  /// `prefix` is the cell's key prefix without its trailing dot ("fc1").
  HookHandle register_load_state_dict_pre_hook(detail::LoadPreHook fn);
  /// MindSpore's full form (`_register_load_state_dict_pre_hook`):
  /// `fn(cell, sd, prefix, local_metadata, strict, missing_keys,
  /// unexpected_keys, error_msgs)`, each `ms::StateDict&`, `const
  /// std::string&` (the cell's key prefix with its dot, "fc1."; "" for the
  /// cell loaded), `const ms::LoadMetadata&` (always empty in ms), `bool`, and
  /// three `std::vector<std::string>&`. It may edit `sd`, and append to the
  /// three lists: keys appended to missing_keys or unexpected_keys are
  /// reported (and judged by `strict`) with those load_state_dict finds; a
  /// message appended to error_msgs fails the load after all hooks ran. ms
  /// checks the keys after every pre-hook ran, so the lists hold only what
  /// earlier hooks appended (MindSpore checks each cell before its children's
  /// hooks run).
  ///   net.register_load_state_dict_pre_hook(
  ///       [](ms::CellBase&, ms::StateDict& sd, const std::string& prefix,
  ///          const ms::LoadMetadata&, bool, std::vector<std::string>&,
  ///          std::vector<std::string>&, std::vector<std::string>& errors) {
  ///         if (!sd.contains(prefix + "version")) errors.push_back("no version");
  ///       });
  HookHandle register_load_state_dict_pre_hook(detail::LoadPreHookFull fn);
  /// `fn(cell, result)` runs once load_state_dict has checked and written the
  /// entries, before `strict` judges the keys: it sees (and may edit, e.g.
  /// clear) the missing and unexpected keys that load_state_dict then judges
  /// and returns (MindSpore's `incompatible_keys`).
  HookHandle register_load_state_dict_post_hook(detail::LoadPostHook fn);

  /// Whether any forward or backward hook is registered on this cell.
  bool has_hooks() const { return hooks_ && hooks_active(); }

  /// Marks (or unmarks) this cell for dumping, as ms::set_dump(cell) does.
  friend void set_dump(CellBase& cell, bool enabled, std::string name);

 protected:
  /// \cond INTERNAL
  friend struct amp::detail::CellAccess;
  // Mixed precision (ms/nn/amp.hpp): the cast policy in force while the cell
  // runs, whether its floating outputs become float32, the amp level.
  bool amp_active() const {
    return amp_policy_.mode != ops::CastPolicy::Mode::None || amp_output_fp32_;
  }
  ops::CastPolicy amp_policy_{};
  bool amp_output_fp32_ = false;
  std::string amp_level_;
  // The registry behind the public API, in libms; protected only so that
  // Cell<Derived> adds to its hook lists and asks which are in use.
  HookHandle add_forward_pre_hook(detail::PreHook h, bool with_kwargs = false,
                                  bool general = false);
  HookHandle add_forward_hook(detail::FwdHook h);
  HookHandle add_backward_pre_hook(detail::BwdPreHook h);
  HookHandle add_backward_hook(detail::BwdHook h);
  bool hooks_active() const;    // any forward or backward hook registered
  bool forward_hooks() const;   // any forward (post) hook registered
  bool backward_hooks() const;  // any backward or backward pre-hook registered

  // The hook machinery of Cell<Derived>::call_hooked, the same for every cell
  // type (hooks see the cell as CellBase&), so it is compiled once in libms.
  /// A call with hooks: the forward pre-hooks on (args, kwargs), the inputs'
  /// backward wrap, `construct` (which flattens the result into tensors), the
  /// forward hooks and the outputs' backward wrap; returns the outputs.
  Args run_hooked(ArgList& args, Kwargs* kw,
                  ::ms::detail::FunctionRef<Args(const ArgList&, Kwargs*)> construct);
  /// Runs the forward pre-hooks on (args, kwargs), concrete or by host callback.
  void run_pre_hooks(ArgList& args, Kwargs* kw, bool tracing);
  /// Runs the forward hooks on the outputs `out`, concrete or by host callback.
  void run_fwd_hooks(const ArgList& args, const Kwargs* kw, Args& out, bool tracing);
  /// What the backward hooks of one call share: the gradient of its outputs.
  struct BwdState {
    Args grad_out;
  };
  /// Wraps the outputs in a grad_hook node (backward pre-hooks, and the
  /// gradient of the outputs for the backward hooks).
  void wrap_backward_out(Args& out, const std::shared_ptr<BwdState>& st);
  /// Wraps the inputs in a grad_hook node that runs the backward hooks.
  void wrap_backward_in(Args& args, const std::shared_ptr<BwdState>& st);

  // A call whose arguments are all tensors and whose result is one tensor
  // (nearly every layer's), when the cell is marked for dumping, runs under
  // mixed precision or has hooks: the paths are compiled once in libms
  // (src/nn/cell.cpp) rather than for every cell type and call, and reach
  // the call's own arguments through one callback.
  /// What the callback of tensor_call is asked for; each answer is an Args
  /// (one tensor for a call's result).
  enum class TensorCallOp {
    kInputs,     ///< the arguments as tensors
    kCall,       ///< operator() on the arguments as given
    kCallWith,   ///< operator() on `*in` (the cast arguments of a mixed-precision call)
    kConstruct,  ///< construct on the arguments as given (`in` null) or on `*in`
  };
  /// The callback of tensor_call.
  using TensorCallFn = ::ms::detail::FunctionRef<Args(TensorCallOp, const Args*)>;
  /// The call as Cell<Derived>::operator() makes it once it knows the cell
  /// is dumped, under mixed precision or hooked: the dump scope, the
  /// mixed-precision casts (`cast_args`: construct takes the cast tensors),
  /// the recompute scope, then the hooks or construct.
  Tensor tensor_call(bool cast_args, TensorCallFn f);
  /// tensor_call's dump path: inside the dump scope, the call itself; eagerly,
  /// its tensor arguments and result written at the boundary.
  Tensor dump_tensor_call(TensorCallFn f);
  /// tensor_call's mixed-precision path: with the cell's cast policy in force,
  /// the call on the cast arguments, then the result cast.
  Tensor amp_tensor_call(bool cast_args, TensorCallFn f);
  /// tensor_call's hooked path (run_hooked): construct runs on the tensors
  /// the forward pre-hooks give.
  Tensor hooked_tensor_call(TensorCallFn f);

  void check_name(const std::string& name, std::string_view api, bool allow_dot = false) const;
  // load_state_dict's parts: the pre-hooks of every cell, the key matching
  // and checks (the (destination, source) pairs to write), the post-hooks
  // (children first), and the error raised for what `strict` and the
  // pre-hooks' error messages reject (nothing when nothing is rejected).
  void run_load_pre_hooks(StateDict& sd, bool strict, LoadResult& res,
                          std::vector<std::string>& errors);
  // The extra states to set: (cell, source) pairs.
  using ExtraWrites = std::vector<std::pair<CellBase*, const Tensor*>>;
  std::vector<std::pair<Tensor, const Tensor*>> match_state_dict(const StateDict& sd,
                                                                 LoadResult& res,
                                                                 ExtraWrites& extra);
  // Every cell of the tree with extra state, by its state-dict key.
  std::vector<std::pair<std::string, CellBase*>> extra_state_cells();
  // Sets the extra states (all or none: a throw puts back those already set);
  // returns the states they had.
  static std::vector<Tensor> write_extra_states(const ExtraWrites& extra);
  bool run_load_post_hooks(LoadResult& res, bool dry);
  void raise_load_errors(const LoadResult& res, const std::vector<std::string>& errors,
                         bool strict) const;
  // `base` is the text put before this cell's entry names ("", "fc1.").
  void state_dict_into(StateDict& out, const std::string& base) const;
  // The base of the walk root for a `prefix` argument, and of a child.
  std::string root_base(const std::string& prefix) const;
  static std::string child_base(const std::string& base, const std::string& name,
                                const CellBase& child);
  // Clears the prefixes update_parameters_name set in this subtree, then
  // names every parameter after its path under `prefix`.
  void rename_params(const std::string& prefix);
  // The cell holding the last part of `path` (walking its other parts), that
  // last part and the cell's path; KeyError naming `api` for a missing part.
  struct PathEnd {
    const CellBase* cell;
    std::string last, at;
  };
  PathEnd resolve_parent(const std::string& path, std::string_view api) const;
  // Raises the KeyError of a missing `part` of `path` at `at` (the path of
  // this cell), listing `what` exists there.
  [[noreturn]] void raise_missing(std::string_view api, const std::string& path,
                                  const std::string& part, const std::string& at,
                                  std::string_view kind) const;

  std::string name_prefix_;  // set by update_parameters_name; empty: the path

  std::vector<std::pair<std::string, Parameter>> params_;
  struct Buffer {
    std::string name;
    Tensor tensor;
    bool persistent = true;
  };
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, CellBase*>> children_;
  // The training flag, shared with the mode guards of graphs that read it.
  std::shared_ptr<std::atomic<bool>> mode_ = std::make_shared<std::atomic<bool>>(false);
  bool requires_grad_ = false;
  std::vector<TensorSpec> inputs_;
  Flags flags_;
  std::optional<JitConfig> jit_config_;
  std::vector<std::pair<std::string, std::vector<std::string>>> tuples_;  // name -> param keys
  int tuple_param_id_ = 1;  // the next k of a generated `Parameter$<k>` in a tuple
  detail::LazyOnce<detail::CellHooks> hooks_;
  detail::LazyOnce<detail::StateHooks> state_hooks_;
  // ms::set_dump(cell): marked, and the name its dump files and scope carry.
  bool dump_ = false;
  std::string dump_name_;
  bool recompute_ = false;  // recompute(): construct's ops form a recompute region
  // Writes the tensors `ts` of eager call `call` as `<scope>.<call>.<what>.<k>`.
  void dump_boundary(const Args& ts, std::int64_t call, const char* what) const;
  /// \endcond
};

/// Marks (or unmarks) `cell` for dumping (MindSpore's `set_dump(cell)`): under
/// ms::jit the inputs and outputs of every op traced inside its calls are
/// written (files `NAME.OP.NODE.RUN.input.0.npy`, e.g. `fc.MatMul.3.0.input.0.npy`;
/// nested marked cells join their names with '-'); called eagerly, its tensor
/// arguments and results are written at the call's boundary
/// (`NAME.CALL.output.0.npy`).
/// `name` defaults to cls_name(). A dump configuration (ms/jit/dump.hpp) with
/// dump_mode 2 keeps cells dumped and selects iterations and inputs/outputs;
/// modes 0 and 1 select ops only. Graphs compiled before recompile.
///   ms::set_dump(net.fc1);
void set_dump(CellBase& cell, bool enabled = true, std::string name = {});

/// Prints `c.to_string()`.
inline std::ostream& operator<<(std::ostream& os, const CellBase& c) { return os << c.to_string(); }

/// `bytes` as a 1-D uint8 tensor, one element a byte: the form for a small
/// serialized value returned by CellBase::get_extra_state.
///   ms::Tensor t = ms::extra_state_from_string("vocab=32000");
Tensor extra_state_from_string(std::string_view bytes);
/// The bytes of a 1-D uint8 tensor (what extra_state_from_string made, or
/// its copy loaded from a checkpoint). TypeError for another dtype,
/// ShapeError for another rank, each naming the dtype or shape given.
std::string extra_state_to_string(const Tensor& state);

/// Registers a hook that every cell, of any type, runs whenever it registers
/// a buffer (MindSpore's `nn.register_cell_buffer_registration_hook`, global
/// as in MindSpore): `fn(ms::CellBase& cell, const std::string& name, const
/// ms::Tensor& buffer)` returns nothing (keep the tensor), a Tensor, or a
/// std::optional<ms::Tensor> (std::nullopt: keep); a tensor returned is
/// registered instead. Hooks run in registration order, each seeing the
/// previous one's replacement; an undefined tensor returned is a ValueError.
/// The returned handle's remove() unregisters the hook. Registration and
/// removal are thread-safe (the list locks, as a cell's hook lists do); a
/// hook runs in the thread registering the buffer, often inside a cell's
/// constructor (the cell is then as far constructed as its constructor got).
///   ms::HookHandle h = ms::register_cell_buffer_registration_hook(
///       [](ms::CellBase&, const std::string&, const ms::Tensor& t) {
///         return ms::cast(t, ms::float64);
///       });
template <class F>
HookHandle register_cell_buffer_registration_hook(F fn) {
  using Sig = std::invoke_result<F&, CellBase&, const std::string&, const Tensor&>;
  if constexpr (!std::is_invocable_v<F&, CellBase&, const std::string&, const Tensor&>) {
    static_assert(std::is_invocable_v<F&, CellBase&, const std::string&, const Tensor&>,
                  "register_cell_buffer_registration_hook: the hook must be callable as "
                  "fn(ms::CellBase& cell, const std::string& name, const ms::Tensor& buffer) "
                  "returning void, a Tensor or a std::optional<ms::Tensor>");
    return {};
  } else {
    using R = typename Sig::type;
    using T = std::remove_cvref_t<R>;
    static_assert(std::is_void_v<R> || std::is_same_v<T, std::optional<Tensor>> ||
                      std::is_same_v<T, Tensor> || std::is_same_v<T, Parameter> || TensorExpr<T>,
                  "register_cell_buffer_registration_hook: the hook must return void, a Tensor "
                  "or a std::optional<ms::Tensor>");
    return detail::add_buffer_registration_hook(
        [fn = std::move(fn)](CellBase& c, const std::string& n,
                             const Tensor& t) mutable -> std::optional<Tensor> {
          if constexpr (std::is_void_v<R>) {
            fn(c, n, t);
            return std::nullopt;
          } else {
            return std::optional<Tensor>(fn(c, n, t));
          }
        });
  }
}

namespace detail {

template <class T>
inline constexpr bool is_kwargs_v = std::is_same_v<std::remove_cvref_t<T>, Kwargs>;

template <class>
using TensorArg = const Tensor&;

/// Whether D::construct takes arguments of types A... (a named concept:
/// clang 14 checks a requires-expression written in place in Cell's
/// operator() as if D were incomplete, and rejects every cell call).
template <class D, class... A>
concept ConstructibleWith = requires(D& d, const A&... a) {
  d.construct(construct_arg(a)...);
};

/// Whether D::bprop takes (x1..xn, out, dout) for a call with tensors A...
template <class D, class... A>
concept BpropFor = requires(D& d, TensorArg<A>... x, const Tensor& t) {
  d.bprop(x..., t, t);
};

/// What bprop returns (a std::vector or std::tuple of tensors) as Args.
template <class R>
Args bprop_result(R&& r) {
  using T = std::remove_cvref_t<R>;
  if constexpr (std::is_same_v<T, Args>)
    return std::forward<R>(r);
  else
    return std::apply([](auto&&... g) { return Args{Tensor(g)...}; }, std::forward<R>(r));
}

/// What a hook may return to replace what it was given: a tensor, ms::Args,
/// or a std::optional of those (std::nullopt: keep it); or nothing (void).
template <class R>
concept HookResult =
    std::is_void_v<R> || std::is_same_v<std::remove_cvref_t<R>, std::optional<Args>> ||
    std::is_same_v<std::remove_cvref_t<R>, Args> ||
    std::is_same_v<std::remove_cvref_t<R>, std::optional<Tensor>> ||
    is_tensorish_v<std::remove_cvref_t<R>>;

/// What a with_kwargs pre-hook may return: nothing, or new arguments and
/// keyword arguments (optionally in a std::optional).
template <class R>
concept KwargsPreHookResult =
    std::is_void_v<R> || std::is_same_v<std::remove_cvref_t<R>, std::pair<Args, Kwargs>> ||
    std::is_same_v<std::remove_cvref_t<R>, std::optional<std::pair<Args, Kwargs>>>;

template <class F, class... A>
concept HookCallable = !std::is_member_pointer_v<std::remove_cvref_t<F>> &&
                       std::is_invocable_v<F&, A...> && HookResult<std::invoke_result_t<F&, A...>>;

// The accepted hook forms, for a cell of type D. Each register_*_hook checks
// its form with a static_assert whose sentence lists them.
template <class F, class D>
concept ForwardPreHook = HookCallable<F, D&, const Args&>;
template <class F, class D>
concept ForwardPreHookWithKwargs =
    !std::is_member_pointer_v<std::remove_cvref_t<F>> &&
    std::is_invocable_v<F&, D&, const Args&, const Kwargs&> &&
    KwargsPreHookResult<std::invoke_result_t<F&, D&, const Args&, const Kwargs&>>;
template <class F, class D>
concept ForwardHook = HookCallable<F, D&, const Args&, const Args&> ||
    HookCallable<F, D&, const Args&, const Tensor&>;
template <class F, class D>
concept ForwardHookWithKwargs = HookCallable<F, D&, const Args&, const Kwargs&, const Args&> ||
    HookCallable<F, D&, const Args&, const Kwargs&, const Tensor&>;
/// What an ms::ArgList pre-hook may return: nothing, or the new arguments
/// (optionally in a std::optional; std::nullopt: keep them).
template <class R>
concept ArgListResult = std::is_void_v<R> || std::is_same_v<std::remove_cvref_t<R>, ArgList> ||
    std::is_same_v<std::remove_cvref_t<R>, std::optional<ArgList>>;
template <class F, class D>
concept ForwardPreHookArgList = !std::is_member_pointer_v<std::remove_cvref_t<F>> &&
                                std::is_invocable_v<F&, D&, const ArgList&> &&
                                ArgListResult<std::invoke_result_t<F&, D&, const ArgList&>>;
template <class F, class D>
concept ForwardHookArgList = HookCallable<F, D&, const ArgList&, const Args&> ||
    HookCallable<F, D&, const ArgList&, const Tensor&>;
template <class F, class D>
concept BackwardPreHook = HookCallable<F, D&, const Args&>;
template <class F, class D>
concept BackwardHook = HookCallable<F, D&, const Args&, const Args&>;

template <class...>
inline constexpr bool always_false_v = false;

/// Adapts what a user hook returns (HookResult) to std::optional<Args>.
template <class R>
std::optional<Args> to_args(R&& r) {
  using T = std::remove_cvref_t<R>;
  if constexpr (std::is_same_v<T, std::optional<Args>>)
    return std::forward<R>(r);
  else if constexpr (std::is_same_v<T, Args>)
    return std::optional<Args>(std::forward<R>(r));
  else if constexpr (std::is_same_v<T, std::optional<Tensor>>)
    return r ? std::optional<Args>(Args{*r}) : std::nullopt;
  else
    return std::optional<Args>(Args{Tensor(std::forward<R>(r))});
}

template <class F, class... A>
std::optional<Args> invoke_hook(F& f, A&&... a) {
  if constexpr (std::is_void_v<std::invoke_result_t<F&, A...>>) {
    f(std::forward<A>(a)...);
    return std::nullopt;
  } else {
    return to_args(f(std::forward<A>(a)...));
  }
}

}  // namespace detail

/// Base of every cell: `struct Net : ms::Cell<Net> { auto construct(const auto& x) {...} };`.
template <class Derived>
class Cell : public CellBase {
 public:
  /// Runs pre-hooks, `construct`, hooks. The result of an expression-returning
  /// construct is materialized (a Tensor). Only for arguments `construct`
  /// takes, so that a cell without one (CellList) is not callable, and
  /// containers can tell (std::is_invocable) instead of failing to compile.
  /// The arguments may be of any kind of ms/nn/cell_args.hpp (tensors,
  /// sequences and optionals of tensors, numbers, enums, strings,
  /// ms::mutable_ values, a trailing ms::Kwargs); a mutable_ number reaches
  /// `construct` as a 0-d tensor.
  template <class... A>
  requires detail::ConstructibleWith<Derived, A...>
  auto operator()(const A&... a) {
    static_assert(((detail::CellArgument<A> || detail::is_kwargs_v<A>)&&...),
                  "a cell call takes tensors (or expressions, Parameters), std::vector / "
                  "std::array / std::tuple / std::pair of tensors, std::optional<ms::Tensor>, "
                  "integers, enums, floats, bools, strings, ms::mutable_ numbers or vectors of "
                  "tensors, and one trailing ms::Kwargs; pass anything else through a member of "
                  "the cell");
    using R = decltype(derived().construct(detail::construct_arg(a)...));
    using Out = ResultTraits<std::remove_cvref_t<R>>;
    using T = typename Out::type;
    constexpr bool kBprop = has_bprop() || detail::BpropFor<Derived, A...>;
    if constexpr (kBprop) {
      static_assert(detail::BpropFor<Derived, A...> && std::is_same_v<T, Tensor>,
                    "bprop: a cell with a bprop takes tensors x1..xn, returns one tensor and "
                    "defines bprop(x1, ..., xn, out, dout) returning one gradient per input");
    }
    if constexpr ((detail::is_tensorish_v<A> && ...) && std::is_same_v<T, Tensor> && !kBprop) {
      // Tensors in, one tensor out, no bprop: the slow paths are libms's.
      if (dump_ || amp_active() || has_hooks()) [[unlikely]]
        return slow_tensor_call(a...);
      const compiler::detail::RecomputeScope recompute_scope(recompute_enabled() && tracing_now());
      return T(derived().construct(detail::construct_arg(a)...));
    } else {
      if (dump_ && !compiler::detail::in_dump_scope(this)) [[unlikely]]
        return dump_call<T, Out>(a...);
      if (amp_active()) [[unlikely]] {
        if (detail::amp_entering() != this) return call_amp<T>(a...);
        detail::amp_entering() = nullptr;  // call_amp's own call, with cast arguments
      }
      const compiler::detail::RecomputeScope recompute_scope(recompute_enabled() && tracing_now());
      if (!has_hooks()) [[likely]] {  // none registered, or all removed
        if constexpr (kBprop) {
          if (tracing_now()) return call_bprop<sizeof...(A)>(Args{Tensor(a)...});
        }
        if constexpr (std::is_same_v<std::remove_cvref_t<R>, T>)
          return derived().construct(detail::construct_arg(a)...);
        else
          return T(derived().construct(detail::construct_arg(a)...));
      }
      return call_hooked<T, Out>(a...);
    }
  }

  /// A call that `construct` takes once its arguments are adapted: a
  /// std::string as `const char*` (ms::jit passes text as a std::string), a
  /// std::vector of Parameters as a std::vector<ms::Tensor> (as ms::jit passes it).
  template <class... A>
  requires(!detail::ConstructibleWith<Derived, A...> &&
           detail::ConstructibleWith<Derived, detail::AdaptedArg<A>...>) auto
  operator()(const A&... a) {
    return (*this)(detail::adapt_arg(a)...);
  }

  /// This cell as its own type.
  Derived& derived() { return static_cast<Derived&>(*this); }
  /// This cell as its own type.
  const Derived& derived() const { return static_cast<const Derived&>(*this); }

  /// Whether Derived defines its own backward, `bprop` (MindSpore's has_bprop).
  static constexpr bool has_bprop() {
    return requires { &Derived::bprop; };
  }

  // ---------------------------------------------------------------- hooks
  // A hook's signature is checked when it is registered: another form stops
  // the build with a sentence naming the accepted ones. A hook returns nothing
  // (keep what it was given), a Tensor, ms::Args, or a std::optional of those
  // (std::nullopt: keep). The cell parameter may also be `ms::CellBase&`.
  // The forward hooks come in two forms: with `const ms::Args&` they see the
  // call's tensors (a vector's elements, a present optional, a mutable_
  // number as a 0-d tensor) and may replace them; with `const ms::ArgList&`
  // they see every argument (ms/nn/cell_args.hpp) and a pre-hook may replace
  // any of them.

  /// Runs before `construct`: `fn(Derived& cell, const ms::Args& args)` may
  /// return new arguments (a Tensor is wrapped into one argument).
  ///   net.register_forward_pre_hook([](Net&, const ms::Args& a) { return a[0] * 2.f; });
  ///
  /// Or with every argument: `fn(Derived& cell, const ms::ArgList& args)`
  /// returning void, ms::ArgList or a std::optional of it; the list returned
  /// replaces the arguments (its length and kinds must be construct's: a
  /// TypeError naming the cell and the argument otherwise).
  ///   net.register_forward_pre_hook([](Net&, const ms::ArgList& a) {
  ///     ms::ArgList r = a;
  ///     r.set(1, a.get<std::int64_t>(1) + 1);
  ///     return r;
  ///   });
  /// Under ms::jit the non-tensor arguments are constants of the graph, so an
  /// ms::ArgList hook also runs once while the call is traced (on the symbolic
  /// tensors): the non-tensor arguments it returns then are those `construct`
  /// is traced with. Each time the graph runs it runs again on the concrete
  /// arguments; its tensor replacements count, its other ones are the trace's.
  template <class F>
  HookHandle register_forward_pre_hook(F fn) {
    static_assert(detail::ForwardPreHook<F, Derived> || detail::ForwardPreHookArgList<F, Derived>,
                  "register_forward_pre_hook: the hook must be callable as fn(Cell& cell, const "
                  "ms::Args& args) returning void, a Tensor, ms::Args or a std::optional of "
                  "those; a hook taking the keyword arguments, fn(cell, args, const ms::Kwargs& "
                  "kwargs), is registered with ms::with_kwargs; a hook seeing every argument "
                  "kind is fn(Cell& cell, const ms::ArgList& args) returning void, ms::ArgList "
                  "or a std::optional of it");
    if constexpr (detail::ForwardPreHook<F, Derived>) {
      return add_forward_pre_hook([fn = std::move(fn)](CellBase& c, const ArgList& args,
                                                       Kwargs*) mutable -> std::optional<ArgList> {
        std::optional<Args> r = detail::invoke_hook(fn, static_cast<Derived&>(c), args.tensors());
        if (!r) return std::nullopt;
        return detail::replace_tensors(args, std::move(*r), "forward pre-hook of " + c.cls_name());
      });
    } else {
      return add_forward_pre_hook(
          [fn = std::move(fn)](CellBase& c, const ArgList& args,
                               Kwargs*) mutable -> std::optional<ArgList> {
            if constexpr (std::is_void_v<std::invoke_result_t<F&, Derived&, const ArgList&>>) {
              fn(static_cast<Derived&>(c), args);
              return std::nullopt;
            } else {
              return std::optional<ArgList>(fn(static_cast<Derived&>(c), args));
            }
          },
          /*with_kwargs=*/false, /*general=*/true);
    }
  }

  /// With the call's keyword arguments: `fn(Derived& cell, const ms::Args& args,
  /// const ms::Kwargs& kwargs)` returns nothing or a `std::pair<ms::Args,
  /// ms::Kwargs>` (or a std::optional of it) that replaces both. Under
  /// ms::jit the keyword arguments are constants of the graph, so such a hook
  /// also runs once while the call is traced, on the symbolic arguments, and
  /// the keyword arguments it returns then are those `construct` is traced
  /// with; each time the graph runs it runs again on the concrete arguments
  /// (whose replacements count; its keyword arguments then are the call's
  /// and what it returns for them is not used). So it must not read argument
  /// values to choose keyword arguments (`item()` fails on a symbolic tensor),
  /// and keyword arguments it returns that change from call to call keep the
  /// value of the trace.
  template <class F>
  HookHandle register_forward_pre_hook(F fn, WithKwargs) {
    static_assert(detail::ForwardPreHookWithKwargs<F, Derived>,
                  "register_forward_pre_hook with ms::with_kwargs: the hook must be callable as "
                  "fn(Cell& cell, const ms::Args& args, const ms::Kwargs& kwargs) returning void, "
                  "a std::pair<ms::Args, ms::Kwargs> or a std::optional of it");
    detail::PreHook h = [fn = std::move(fn)](CellBase& c, const ArgList& all,
                                             Kwargs* kw) mutable -> std::optional<ArgList> {
      static const Kwargs empty;
      using R = std::invoke_result_t<F&, Derived&, const Args&, const Kwargs&>;
      const Args args = all.tensors();
      const std::string what = "forward pre-hook of " + c.cls_name();
      if constexpr (std::is_void_v<R>) {
        fn(static_cast<Derived&>(c), args, kw ? *kw : empty);
        return std::nullopt;
      } else {
        auto r = fn(static_cast<Derived&>(c), args, kw ? *kw : empty);
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(r)>,
                                     std::optional<std::pair<Args, Kwargs>>>) {
          if (!r) return std::nullopt;
          if (kw) *kw = std::move(r->second);
          return detail::replace_tensors(all, std::move(r->first), what);
        } else {
          if (kw) *kw = std::move(r.second);
          return detail::replace_tensors(all, std::move(r.first), what);
        }
      }
    };
    return add_forward_pre_hook(std::move(h), /*with_kwargs=*/true);
  }

  /// Runs after `construct`: `fn(Derived& cell, const ms::Args& args, const
  /// ms::Tensor& output)` (or `const ms::Args& outputs` for a cell with several
  /// outputs) may return a new output.
  /// `args` may also be `const ms::ArgList&` (every argument, ms/nn/cell_args.hpp).
  template <class F>
  HookHandle register_forward_hook(F fn) {
    static_assert(detail::ForwardHook<F, Derived> || detail::ForwardHookArgList<F, Derived>,
                  "register_forward_hook: the hook must be callable as fn(Cell& cell, const "
                  "ms::Args& args, const ms::Tensor& output) or fn(Cell& cell, const ms::Args& "
                  "args, const ms::Args& outputs) returning void, a Tensor, ms::Args or a "
                  "std::optional of those; a hook taking the keyword arguments, fn(cell, args, "
                  "const ms::Kwargs& kwargs, output), is registered with ms::with_kwargs; `args` "
                  "may be `const ms::ArgList&` to see every argument kind");
    using A = std::conditional_t<detail::ForwardHook<F, Derived>, Args, ArgList>;
    detail::FwdHook h;
    if constexpr (detail::HookCallable<F, Derived&, const A&, const Args&>) {
      h = [fn = std::move(fn)](CellBase& c, const ArgList& args, const Kwargs*,
                               const Args& out) mutable {
        return detail::invoke_hook(fn, static_cast<Derived&>(c), hook_view<A>(args), out);
      };
    } else {
      h = [fn = std::move(fn)](CellBase& c, const ArgList& args, const Kwargs*,
                               const Args& out) mutable {
        check_single(out);
        return detail::invoke_hook(fn, static_cast<Derived&>(c), hook_view<A>(args), out[0]);
      };
    }
    return add_forward_hook(std::move(h));
  }

  /// With the call's keyword arguments: `fn(Derived& cell, const ms::Args& args,
  /// const ms::Kwargs& kwargs, output)` (output as for register_forward_hook).
  template <class F>
  HookHandle register_forward_hook(F fn, WithKwargs) {
    static_assert(detail::ForwardHookWithKwargs<F, Derived>,
                  "register_forward_hook with ms::with_kwargs: the hook must be callable as "
                  "fn(Cell& cell, const ms::Args& args, const ms::Kwargs& kwargs, const "
                  "ms::Tensor& output) or with `const ms::Args& outputs`, returning void, a "
                  "Tensor, ms::Args or a std::optional of those");
    detail::FwdHook h;
    if constexpr (detail::HookCallable<F, Derived&, const Args&, const Kwargs&, const Args&>) {
      h = [fn = std::move(fn)](CellBase& c, const ArgList& args, const Kwargs* kw,
                               const Args& out) mutable {
        static const Kwargs empty;
        return detail::invoke_hook(fn, static_cast<Derived&>(c), args.tensors(), kw ? *kw : empty,
                                   out);
      };
    } else {
      h = [fn = std::move(fn)](CellBase& c, const ArgList& args, const Kwargs* kw,
                               const Args& out) mutable {
        static const Kwargs empty;
        check_single(out);
        return detail::invoke_hook(fn, static_cast<Derived&>(c), args.tensors(), kw ? *kw : empty,
                                   out[0]);
      };
    }
    return add_forward_hook(std::move(h));
  }

  /// The keyword-argument choice is a tag (ms::with_kwargs), not a bool.
  template <class F, class B>
  requires std::is_same_v<B, bool> HookHandle register_forward_pre_hook(F, B) {
    static_assert(detail::always_false_v<F, B>,
                  "register_forward_pre_hook: pass the tag ms::with_kwargs (not a bool) to "
                  "register a hook that takes the keyword arguments");
    return {};
  }
  /// As for register_forward_pre_hook: a bool in place of the tag
  /// ms::with_kwargs stops the build with a message saying so.
  template <class F, class B>
  requires std::is_same_v<B, bool> HookHandle register_forward_hook(F, B) {
    static_assert(detail::always_false_v<F, B>,
                  "register_forward_hook: pass the tag ms::with_kwargs (not a bool) to register "
                  "a hook that takes the keyword arguments");
    return {};
  }

  /// `fn(Derived& cell, const ms::Args& grad_outputs)` sees the gradients of
  /// the cell's outputs before they flow into it and may return replacements.
  template <class F>
  HookHandle register_backward_pre_hook(F fn) {
    static_assert(detail::BackwardPreHook<F, Derived>,
                  "register_backward_pre_hook: the hook must be callable as fn(Cell& cell, const "
                  "ms::Args& grad_outputs) returning void, a Tensor, ms::Args or a std::optional "
                  "of those");
    detail::BwdPreHook h = [fn = std::move(fn)](CellBase& c, const Args& g) mutable {
      return detail::invoke_hook(fn, static_cast<Derived&>(c), g);
    };
    return add_backward_pre_hook(std::move(h));
  }

  /// `fn(Derived& cell, const ms::Args& grad_inputs, const ms::Args& grad_outputs)`
  /// sees the gradients of the cell's tensor arguments and outputs and may
  /// return replacements for the input gradients.
  template <class F>
  HookHandle register_backward_hook(F fn) {
    static_assert(detail::BackwardHook<F, Derived>,
                  "register_backward_hook: the hook must be callable as fn(Cell& cell, const "
                  "ms::Args& grad_inputs, const ms::Args& grad_outputs) returning void, a Tensor, "
                  "ms::Args or a std::optional of those");
    detail::BwdHook h = [fn = std::move(fn)](CellBase& c, const Args& gi, const Args& go) mutable {
      return detail::invoke_hook(fn, static_cast<Derived&>(c), gi, go);
    };
    return add_backward_hook(std::move(h));
  }

 private:
  static void check_single(const Args& out) {
    MS_CHECK(out.size() == 1, ValueError, "forward hook: the cell returns ", out.size(),
             " tensors; take them as `const ms::Args&`");
  }

  static bool tracing_now() { return ops::active_tracer() != nullptr; }

  // What a forward hook of the `A` form sees of the call's arguments.
  template <class A>
  static decltype(auto) hook_view(const ArgList& args) {
    if constexpr (std::is_same_v<A, ArgList>)
      return (args);
    else
      return args.tensors();
  }

  // A call of tensors returning one tensor that is dumped, under mixed
  // precision or hooked, by CellBase::tensor_call (a member template of its
  // own, so that it calls operator() once its return type is known). Its
  // callbacks are cold: the inliner leaves construct's body out of them.
  template <class... A>
  Tensor slow_tensor_call(const A&... a) {
    using R2 = decltype(derived().construct(detail::construct_arg(std::declval<AmpArg<A>>())...));
    constexpr bool kCast =
        std::is_same_v<typename ResultTraits<std::remove_cvref_t<R2>>::type, Tensor>;
    using Op = TensorCallOp;
    auto f = [&](Op op, const Args* in) __attribute__((cold))->Args {
      if (op == Op::kInputs) return Args{Tensor(a)...};
      if (op == Op::kConstruct && in == nullptr)
        return Args{Tensor(derived().construct(detail::construct_arg(a)...))};
      if (op == Op::kCall || (op == Op::kCallWith && !kCast)) return Args{(*this)(a...)};
      return apply_args<sizeof...(A)>(
          *in, [&](const auto&... x) __attribute__((cold))->Args {
            if (op == Op::kConstruct) return Args{Tensor(derived().construct(x...))};
            if constexpr (kCast) return Args{(*this)(x...)};
            return {};  // not reached: kCallWith without kCast was answered above
          });
    };
    return tensor_call(kCast, f);
  }

  // A call of a cell marked with ms::set_dump(cell): a dump scope around the
  // plain call (the ops it traces are dumped); eagerly, its tensor arguments
  // and results are written at the boundary.
  template <class T, class Out, class... A>
  T dump_call(const A&... a) {
    const bool eager = !tracing_now();
    const compiler::detail::DumpScopeGuard scope(this, dump_name_, eager);
    compiler::detail::DumpSelection sel;
    if (eager && compiler::detail::cell_dumps_active())
      sel = compiler::detail::dump_selection(scope.call);
    if (sel.inputs) {
      Args in;
      auto collect = [&](const auto& x) {
        if constexpr (detail::is_tensorish_v<decltype(x)>) in.push_back(Tensor(x));
      };
      (collect(a), ...);
      dump_boundary(in, scope.call, "input");
    }
    T r = (*this)(a...);
    if (sel.outputs) {
      Args out;
      std::vector<std::size_t> st;
      Out::flatten(r, out, st);
      dump_boundary(out, scope.call, "output");
    }
    return r;
  }

  template <class X>
  using AmpArg = std::conditional_t<detail::is_tensorish_v<X>, Tensor, const X&>;

  // A call under mixed precision (ms/nn/amp.hpp): with the cell's cast policy
  // in force, the call itself (hooks, bprop, construct) on the floating tensor
  // arguments cast to the to_float dtype; then the floating outputs cast to
  // that dtype, and to float32 when the cell's outputs are (O2 and O3's root).
  // Tensors inside container arguments and Kwargs values are cast too.
  template <class T, class... A>
  T call_amp(const A&... a) {
    ops::CastPolicyScope scope(amp_policy_);
    const bool all = amp_policy_.mode == ops::CastPolicy::Mode::All;
    const DType to = amp_policy_.dtype;
    auto arg = [&](const auto& x) -> decltype(auto) {
      if constexpr (detail::is_tensorish_v<decltype(x)>)
        return all ? detail::amp_cast(Tensor(x), to) : Tensor(x);
      else if constexpr (detail::holds_tensor_v<decltype(x)>)
        return all ? detail::amp_cast_nested(x, to) : x;  // a copy either way
      else
        return x;
    };
    T out = [&]() -> T {
      struct Enter {  // the token operator() takes for the call below
        const CellBase* prev;
        explicit Enter(const CellBase* c) : prev(detail::amp_entering()) {
          detail::amp_entering() = c;
        }
        ~Enter() { detail::amp_entering() = prev; }
      } enter(this);
      using R2 = decltype(derived().construct(detail::construct_arg(std::declval<AmpArg<A>>())...));
      if constexpr (std::is_same_v<typename ResultTraits<std::remove_cvref_t<R2>>::type, T>)
        return (*this)(static_cast<AmpArg<A>>(arg(a))...);
      else
        return (*this)(a...);  // the ops still cast their inputs
    }();
    if (!all && !amp_output_fp32_) return out;
    Args flat;
    std::vector<std::size_t> structure;
    ResultTraits<T>::flatten(out, flat, structure);
    for (Tensor& t : flat) {
      if (all) t = detail::amp_cast(t, to);
      if (amp_output_fp32_) t = detail::amp_cast(t, float32);
    }
    std::size_t pos = 0, sp = 0;
    return ResultTraits<T>::unflatten(flat, pos, structure, sp);
  }

  template <class T, class Out, class... A>
  T call_hooked(const A&... a) {
    constexpr std::size_t nkw = (std::size_t{0} + ... + (detail::is_kwargs_v<A> ? 1 : 0));
    static_assert(nkw <= 1, "a cell call takes at most one ms::Kwargs (the last argument)");
    ArgList args;
    // A copy of the keyword arguments (hooks may replace them); a call
    // without them instantiates nothing of Kwargs.
    [[maybe_unused]] std::conditional_t<(nkw > 0), Kwargs, char> kw{};
    Kwargs* kwp = nullptr;
    auto collect = [&](const auto& x) {
      if constexpr (detail::is_kwargs_v<decltype(x)>) {
        kwp = &(kw = x);  // dependent on x, so clang checks it only for a Kwargs
      } else {
        args.push_back(detail::to_arg(x));
      }
    };
    (collect(a), ...);
    std::vector<std::size_t> structure;
    auto construct = [&](const ArgList& in, Kwargs* k) {
      T result = [&] {
        if constexpr (detail::BpropFor<Derived, A...>) {
          if (tracing_now()) {
            Args t = in.tensors();
            MS_CHECK(in.size() == sizeof...(A) && t.size() == sizeof...(A), TypeError, cls_name(),
                     ": forward pre-hooks returned ", in.size(), " arguments; construct takes ",
                     sizeof...(A), " tensors");
            return call_bprop<sizeof...(A)>(std::move(t));
          }
        }
        return invoke_construct<T>(in, k, std::type_identity<std::tuple<A...>>{});
      }();
      Args out;
      Out::flatten(result, out, structure);
      return out;
    };
    Args out = run_hooked(args, kwp, construct);
    std::size_t pos = 0, sp = 0;
    return Out::unflatten(out, pos, structure, sp);
  }

  // construct(args) as the forward value, bprop as its gradient (one
  // custom_grad node; ms/ops/host.hpp).
  template <std::size_t N>
  Tensor call_bprop(Args args) {
    auto fn = [this](Args x, Tensor out, Tensor dout) {
      return apply_args<N>(x, [&](const auto&... xi) {
        return detail::bprop_result(derived().bprop(xi..., out, dout));
      });
    };
    Tensor out =
        apply_args<N>(args, [&](const auto&... xi) { return Tensor(derived().construct(xi...)); });
    return ops::custom_grad(std::move(fn), std::move(args), std::move(out), cls_name() + ".bprop");
  }
  template <std::size_t N, class F>
  static auto apply_args(const Args& x, F&& f) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) { return f(x[I]...); }
    (std::make_index_sequence<N>{});
  }

  // The value construct gets for a call argument of type X.
  template <class X>
  using ArgValue = std::conditional_t<detail::is_kwargs_v<X>, const Kwargs&,
                                      decltype(detail::from_arg<X>(std::declval<const Arg&>(), 0,
                                                                   std::string_view{}))>;

  template <class T, class... A>
  T invoke_construct(const ArgList& args, Kwargs* kw, std::type_identity<std::tuple<A...>>) {
    constexpr std::size_t npos = (std::size_t{0} + ... + (detail::is_kwargs_v<A> ? 0 : 1));
    MS_CHECK(args.size() == npos, TypeError, cls_name(), ": forward pre-hooks returned ",
             args.size(), " arguments; construct takes ", npos);
    const std::string name = cls_name();
    std::size_t k = 0;
    auto pick = [&](auto tag) -> ArgValue<typename decltype(tag)::type> {
      using X = typename decltype(tag)::type;
      if constexpr (detail::is_kwargs_v<X>) {
        return *kw;
      } else {
        const std::size_t i = k++;
        return detail::from_arg<X>(args[i], i, name);
      }
    };
    // A braced list evaluates left to right, so the k-th argument goes to the k-th slot.
    return construct_from<T>(std::tuple<ArgValue<A>...>{pick(std::type_identity<A>{})...},
                             std::type_identity<std::tuple<A...>>{});
  }

  template <class T, class Tup, class... A>
  T construct_from(Tup&& t, std::type_identity<std::tuple<A...>>) {
    return std::apply(
        [&](auto&&... x) -> T { return T(derived().construct(detail::construct_value<A>(x)...)); },
        std::forward<Tup>(t));
  }
};

}  // namespace ms
