#include "ms/core/symbolic.hpp"

#include <cmath>
#include <cstdio>
#include <string_view>

#include "ms/core/error.hpp"

namespace ms {

Dim::Dim(std::int64_t size) : size_(size) {
  MS_CHECK(size >= kAnyRank, ValueError,
           "Dim: a size must be >= 0, -1 (any) or -2 (any rank), got ", size);
}

Dim::Dim(std::string name) : size_(kAnyDim), name_(std::move(name)) {
  MS_CHECK(!name_.empty(), ValueError, "Dim: a symbol needs a non-empty name");
}

namespace {
void check_range(std::int64_t min, std::int64_t max, std::int64_t divisor) {
  MS_CHECK(min >= 0, ValueError, "Dim: min must be >= 0, got ", min);
  MS_CHECK(max >= min, ValueError, "Dim: max must be >= min, got min ", min, " and max ", max);
  MS_CHECK(divisor >= 1, ValueError, "Dim: divisor must be >= 1, got ", divisor);
}
}  // namespace

Dim::Dim(std::string name, std::int64_t min, std::int64_t max, std::int64_t divisor)
    : Dim(std::move(name)) {
  check_range(min, max, divisor);
  min_ = min;
  max_ = max;
  divisor_ = divisor;
}

Dim::Dim(std::int64_t min, std::int64_t max, std::int64_t divisor) : size_(kAnyDim) {
  check_range(min, max, divisor);
  min_ = min;
  max_ = max;
  divisor_ = divisor;
}

std::string Dim::violated_by(std::int64_t size) const {
  if (size < min_) return detail::str_cat("min = ", min_);
  if (size > max_) return detail::str_cat("max = ", max_);
  if (size % divisor_ != 0) return detail::str_cat("divisor = ", divisor_);
  return {};
}

std::string Dim::to_string() const {
  std::string s = name_.empty() ? std::to_string(size_) : name_;
  if (!constrained()) return s;
  std::string c;
  auto add = [&](std::string_view k, std::int64_t v) {
    c += detail::str_cat(c.empty() ? "" : ", ", k, "=", v);
  };
  if (min_ != 0) add("min", min_);
  if (max_ != kNoMaxDim) add("max", max_);
  if (divisor_ != 1) add("divisor", divisor_);
  return s + "{" + c + "}";
}

TensorSpec::TensorSpec(std::vector<Dim> dims, DType dt) : shape(std::move(dims)), dtype(dt) {
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i].is_any_rank()) {
      MS_CHECK(shape.size() == 1, ValueError,
               "TensorSpec: -2 (any rank) must be the only dim, got ", to_string());
      any_rank = true;
      shape.clear();
    }
}

TensorSpec TensorSpec::any_rank_of(DType dt) {
  TensorSpec s;
  s.dtype = dt;
  s.any_rank = true;
  return s;
}

std::string TensorSpec::to_string() const {
  std::string s = detail::str_cat(dtype_name(dtype), '[');
  if (any_rank) return s + "-2]";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += shape[i].to_string();
  }
  return s + ']';
}

std::ostream& operator<<(std::ostream& os, const TensorSpec& s) { return os << s.to_string(); }

SymExpr SymExpr::constant(double c) {
  SymExpr e;
  e.c_ = c;
  return e;
}

SymExpr SymExpr::symbol(int s) { return affine(0, {{s, 1.0}}); }

SymExpr SymExpr::affine(double c, std::vector<std::pair<int, double>> terms) {
  SymExpr e;
  e.c_ = c;
  for (auto& t : terms)
    if (t.second != 0) e.terms_.push_back(t);
  return e;
}

SymExpr SymExpr::product(double c, std::vector<int> symbols) {
  SymExpr e;
  e.form_ = Form::Product;
  e.c_ = c;
  for (int s : symbols) e.terms_.emplace_back(s, 1.0);
  if (e.terms_.empty()) e.form_ = Form::Affine;
  return e;
}

SymExpr SymExpr::inverse(double c, std::vector<int> symbols) {
  SymExpr e = product(c, std::move(symbols));
  if (!e.terms_.empty()) e.form_ = Form::Inverse;
  return e;
}

double SymExpr::eval(std::span<const std::int64_t> s) const {
  auto sym = [&](int i) {
    MS_CHECK(i >= 0 && static_cast<std::size_t>(i) < s.size(), IndexError, "SymExpr: symbol s", i,
             " has no value (", s.size(), " given)");
    return static_cast<double>(s[static_cast<std::size_t>(i)]);
  };
  switch (form_) {
    case Form::Affine: {
      double v = c_;
      for (const auto& [i, a] : terms_) v += a * sym(i);
      return v;
    }
    case Form::Product: {
      double v = c_;
      for (const auto& t : terms_) v *= sym(t.first);
      return v;
    }
    case Form::Inverse: {
      double d = 1;
      for (const auto& t : terms_) d *= sym(t.first);
      return c_ / d;
    }
  }
  return c_;
}

namespace {
std::string number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    return std::to_string(static_cast<std::int64_t>(v));
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}
}  // namespace

std::string SymExpr::to_string(std::span<const std::string> names) const {
  auto name = [&](int i) {
    return static_cast<std::size_t>(i) < names.size() ? names[static_cast<std::size_t>(i)]
                                                      : detail::str_cat('s', i);
  };
  if (terms_.empty()) return number(c_);
  std::string s;
  switch (form_) {
    case Form::Affine:
      for (const auto& [i, a] : terms_) {
        if (!s.empty())
          s += a < 0 ? '-' : '+';
        else if (a < 0)
          s += '-';
        if (std::fabs(a) != 1) {
          s += number(std::fabs(a));
          s += '*';
        }
        s += name(i);
      }
      if (c_ != 0) {
        s += c_ < 0 ? '-' : '+';
        s += number(std::fabs(c_));
      }
      return s;
    case Form::Product:
      if (c_ != 1) s = number(c_);
      for (const auto& t : terms_) {
        if (!s.empty()) s += '*';
        s += name(t.first);
      }
      return s;
    case Form::Inverse:
      s = number(c_);
      s += '/';
      if (terms_.size() > 1) s += '(';
      for (std::size_t k = 0; k < terms_.size(); ++k) {
        if (k) s += '*';
        s += name(terms_[k].first);
      }
      if (terms_.size() > 1) s += ')';
      return s;
  }
  return s;
}

}  // namespace ms
