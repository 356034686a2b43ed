#include "ms/nn/parameter.hpp"

#include <atomic>

#include "ms/core/error.hpp"

namespace ms {
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

void Parameter::set_data(const Tensor& value) {
  MS_CHECK(info_ != nullptr, ValueError, "Parameter::set_data: undefined parameter");
  MS_CHECK(value.shape() == shape(), ShapeError, "Parameter::set_data: parameter '", name(),
           "' has shape ", shape(), " but the value has shape ", value.shape());
  MS_CHECK(value.dtype() == dtype(), TypeError, "Parameter::set_data: parameter '", name(),
           "' has dtype ", dtype(), " but the value has dtype ", value.dtype());
  copy_(value);
}

}  // namespace ms
