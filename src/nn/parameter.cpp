#include "ms/nn/parameter.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include <cctype>

#include "ms/autodiff/tensor_hooks.hpp"
#include "ms/core/error.hpp"
#include "ms/core/storage.hpp"
#include "ms/nn/initializer.hpp"

namespace ms {

// Owns the ids of a parameter's gradient hooks (in the autodiff registry);
// its handles hold it weakly, and its end (the last copy of the parameter
// gone) takes the hooks out.
class Parameter::GradHooks final : public detail::HookOwner {
 public:
  ~GradHooks() override {
    for (std::uint64_t id : ids) autodiff::remove_tensor_grad_hook(id);
    if (!ids.empty()) detail::hook_removed();
  }
  void erase_hook(std::uint64_t id) override {
    auto it = std::find(ids.begin(), ids.end(), id);
    if (it == ids.end()) return;
    ids.erase(it);
    autodiff::remove_tensor_grad_hook(id);
    detail::hook_removed();
  }
  std::vector<std::uint64_t> ids;
};

namespace {
std::atomic<std::int64_t> g_unnamed{0};
}  // namespace

Parameter::Parameter(Tensor data, std::string name, bool requires_grad)
    : Tensor(std::move(data)), info_(std::make_shared<Info>()) {
  MS_CHECK(defined(), ValueError, "Parameter: the data tensor is undefined");
  MS_CHECK(!is_symbolic(), ValueError,
           "Parameter: cannot be made from a symbolic (traced) tensor; make parameters outside "
           "ms::jit");
  info_->name = name.empty() ? "Parameter$" + std::to_string(g_unnamed++) : std::move(name);
  info_->requires_grad = requires_grad;
  storage()->set_label(info_->name);
}

const std::string& Parameter::name() const {
  static const std::string empty;
  return info_ ? info_->name : empty;
}

void Parameter::set_name(std::string name) {
  MS_CHECK(info_ != nullptr, ValueError, "Parameter::set_name: undefined parameter");
  info_->name = std::move(name);
  if (storage()) storage()->set_label(info_->name);
}

bool Parameter::requires_grad() const { return info_ && info_->requires_grad; }

void Parameter::set_requires_grad(bool value) {
  MS_CHECK(info_ != nullptr, ValueError, "Parameter::set_requires_grad: undefined parameter");
  info_->requires_grad = value;
}

HookHandle Parameter::add_grad_hook(std::function<Tensor(const Tensor&)> fn) {
  MS_CHECK(info_ != nullptr, ValueError, "Parameter::register_hook: undefined parameter");
  MS_CHECK(static_cast<bool>(fn), ValueError, "Parameter::register_hook: parameter '", name(),
           "': empty hook function");
  if (!info_->hooks) info_->hooks = std::make_shared<GradHooks>();
  const std::uint64_t id = detail::new_hook_id();
  autodiff::add_tensor_grad_hook(*this, id, std::move(fn), name());
  info_->hooks->ids.push_back(id);
  return HookHandle(info_->hooks, id);
}

std::size_t Parameter::hook_count() const {
  return info_ && info_->hooks ? info_->hooks->ids.size() : 0;
}

void Parameter::set_data(const Tensor& value) {
  MS_CHECK(info_ != nullptr, ValueError, "Parameter::set_data: undefined parameter");
  MS_CHECK(value.shape() == shape(), ShapeError, "Parameter::set_data: parameter '", name(),
           "' has shape ", shape(), " but the value has shape ", value.shape());
  MS_CHECK(value.dtype() == dtype(), TypeError, "Parameter::set_data: parameter '", name(),
           "' has dtype ", dtype(), " but the value has dtype ", value.dtype());
  copy_(value);
}

namespace {

// Owns the gradient hooks registered on plain tensors: one owner for all of
// them (handles hold it weakly; it lives as long as the process). A hook whose
// storage is gone is taken out at the next registration.
class TensorGradHooks final : public detail::HookOwner {
 public:
  void add(std::uint64_t id, const std::shared_ptr<Storage>& storage) {
    std::vector<std::uint64_t> dead;
    {
      std::lock_guard lock(mu_);
      std::erase_if(entries_, [&](const Entry& e) {
        if (!e.storage.expired()) return false;
        dead.push_back(e.id);
        return true;
      });
      entries_.push_back({id, storage});
    }
    for (std::uint64_t d : dead) autodiff::remove_tensor_grad_hook(d);
  }
  void erase_hook(std::uint64_t id) override {
    {
      std::lock_guard lock(mu_);
      if (std::erase_if(entries_, [&](const Entry& e) { return e.id == id; }) == 0) return;
    }
    autodiff::remove_tensor_grad_hook(id);
    detail::hook_removed();
  }

 private:
  struct Entry {
    std::uint64_t id;
    std::weak_ptr<Storage> storage;
  };
  std::mutex mu_;
  std::vector<Entry> entries_;
};

const std::shared_ptr<TensorGradHooks>& tensor_grad_hooks() {
  static const auto* owner =
      new std::shared_ptr<TensorGradHooks>(std::make_shared<TensorGradHooks>());
  return *owner;  // never destroyed: handles may be removed during static destruction
}

}  // namespace

namespace detail {

HookHandle register_tensor_grad_hook(const Tensor& t, autodiff::TensorGradHook fn) {
  MS_CHECK(t.defined(), ValueError, "register_hook: the tensor is undefined");
  MS_CHECK(!t.is_symbolic(), ValueError,
           "register_hook: the tensor is symbolic (traced by ms::jit or ms::grad); hook an "
           "intermediate value with ms::hook_grad");
  MS_CHECK(autodiff::views_whole_storage(t), ValueError,
           "register_hook: the tensor must view its whole storage (given a view of ", t.nbytes(),
           " of its storage's ", t.storage()->nbytes(),
           " bytes); hook the tensor it was taken from, or its clone");
  MS_CHECK(static_cast<bool>(fn), ValueError, "register_hook: empty hook function");
  const std::uint64_t id = new_hook_id();
  const std::string label = t.storage()->label().empty() ? "tensor" : t.storage()->label();
  autodiff::add_tensor_grad_hook(t, id, std::move(fn), label);
  tensor_grad_hooks()->add(id, t.storage());
  return HookHandle(tensor_grad_hooks(), id);
}

}  // namespace detail

ParameterTuple::ParameterTuple(std::vector<Parameter> params) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = params[i];
    MS_CHECK(p.defined(), ValueError, "ParameterTuple: parameter ", i, " is undefined");
    bool dup = false;
    for (const Parameter& q : params_) {
      if (q.same_as(p)) {
        dup = true;
        break;
      }
      MS_CHECK(q.name() != p.name(), ValueError, "ParameterTuple: parameter ", i, " is named '",
               p.name(),
               "', a name another parameter of the tuple already has; give each "
               "parameter a unique name");
    }
    if (!dup) params_.push_back(p);
  }
}

const Parameter& ParameterTuple::operator[](std::size_t i) const {
  MS_CHECK(i < params_.size(), IndexError, "ParameterTuple: index ", i, " is out of range for ",
           params_.size(), " parameters");
  return params_[i];
}

ParameterTuple ParameterTuple::clone(const std::string& prefix, const InitSpec& init) const {
  MS_CHECK(!prefix.empty(), ValueError, "ParameterTuple.clone: prefix is empty");
  for (char ch : prefix)
    MS_CHECK(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '/' ||
                 ch == '.',
             ValueError, "ParameterTuple.clone: prefix '", prefix, "' holds '", ch,
             "'; expected letters, digits, '_', '-', '/' and '.'");
  const bool same = !init.is_tensor() && init.to_string() == "'same'";
  std::vector<Parameter> out;
  out.reserve(params_.size());
  for (const Parameter& p : params_) {
    Tensor data = same ? p.data().clone() : initializer(init, p.shape(), p.dtype());
    out.emplace_back(std::move(data), prefix + "." + p.name(), p.requires_grad());
  }
  return ParameterTuple(std::move(out));
}

ParameterTuple ParameterTuple::clone(const std::string& prefix) const {
  return clone(prefix, InitSpec("same"));
}

}  // namespace ms
