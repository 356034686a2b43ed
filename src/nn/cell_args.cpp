// ms::Arg and ms::ArgList: the arguments of a cell call as hooks see them.
#include "ms/nn/cell_args.hpp"

namespace ms {

std::string_view arg_kind_name(const Arg& a) {
  static constexpr std::array<std::string_view, std::variant_size_v<Arg>> names{
      "Tensor",     "std::optional<Tensor>", "std::vector<Tensor>", "int64", "double", "bool",
      "std::string"};
  return names[a.index()];
}

ArgList::ArgList() = default;
ArgList::ArgList(std::initializer_list<Arg> items) : items_(items) {}
ArgList::ArgList(std::vector<Arg> items) : items_(std::move(items)) {}
ArgList::ArgList(const ArgList& other) = default;
ArgList::ArgList(ArgList&& other) noexcept = default;
ArgList& ArgList::operator=(const ArgList& other) = default;
ArgList& ArgList::operator=(ArgList&& other) noexcept = default;
ArgList::~ArgList() = default;

void ArgList::push_back(Arg a) { items_.push_back(std::move(a)); }

const Arg& ArgList::at(std::size_t i) const {
  MS_CHECK(i < items_.size(), IndexError, "ArgList: argument ", i, " of ", items_.size());
  return items_[i];
}

Arg& ArgList::at(std::size_t i) {
  MS_CHECK(i < items_.size(), IndexError, "ArgList: argument ", i, " of ", items_.size());
  return items_[i];
}

void ArgList::wrong_kind(std::size_t i, std::string_view want, const Arg& have) {
  detail::raise<TypeError>("ArgList::get: argument ", i, " is ", arg_kind_name(have), ", not ",
                           want);
}

Args ArgList::tensors() const {
  Args out;
  for (const Arg& a : items_) {
    if (const auto* t = std::get_if<Tensor>(&a))
      out.push_back(*t);
    else if (const auto* o = std::get_if<std::optional<Tensor>>(&a); o && *o)
      out.push_back(**o);
    else if (const auto* v = std::get_if<std::vector<Tensor>>(&a))
      out.insert(out.end(), v->begin(), v->end());
  }
  return out;
}

std::size_t ArgList::tensor_count() const {
  std::size_t n = 0;
  for (const Arg& a : items_) {
    if (std::holds_alternative<Tensor>(a))
      ++n;
    else if (const auto* o = std::get_if<std::optional<Tensor>>(&a))
      n += o->has_value() ? 1 : 0;
    else if (const auto* v = std::get_if<std::vector<Tensor>>(&a))
      n += v->size();
  }
  return n;
}

ArgList ArgList::with_tensors(std::span<const Tensor> flat, std::string_view what) const {
  MS_CHECK(flat.size() == tensor_count(), ValueError, what, ": ", flat.size(),
           " tensors for a call with ", tensor_count(),
           " (its non-tensor arguments fix the count; change them with the ms::ArgList hook "
           "form)");
  ArgList out = *this;
  std::size_t k = 0;
  for (Arg& a : out.items_) {
    if (auto* t = std::get_if<Tensor>(&a))
      *t = flat[k++];
    else if (auto* o = std::get_if<std::optional<Tensor>>(&a); o && *o)
      **o = flat[k++];
    else if (auto* v = std::get_if<std::vector<Tensor>>(&a))
      for (Tensor& x : *v) x = flat[k++];
  }
  return out;
}

namespace detail {

void raise_arg_kind(std::string_view cell, std::size_t i, std::string_view expected,
                    std::string_view given) {
  raise<TypeError>(cell, ": forward pre-hooks returned argument ", i, " as ", given,
                   "; construct takes ", expected, " there");
}

void raise_arg_length(std::string_view cell, std::size_t i, std::size_t expected,
                      std::size_t given) {
  raise<TypeError>(cell, ": forward pre-hooks returned argument ", i, " with ", given,
                   " tensors; construct takes a fixed-size sequence of ", expected, " there");
}

}  // namespace detail
}  // namespace ms
