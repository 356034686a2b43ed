// ms::StateDict: lookup by name, and the KeyError that names close names.
#include "ms/nn/state_dict.hpp"

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ms/core/error.hpp"

namespace ms {
namespace {

// Levenshtein distance (insertions, deletions, substitutions), one row at a time.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

bool ends_with_part(std::string_view name, std::string_view part) {
  return name.size() > part.size() && name.ends_with(part) &&
         name[name.size() - part.size() - 1] == '.';
}

// What to tell a user who asked for `key`: up to three names a typo, a
// missing prefix or an extra prefix away from it, else the first few names.
std::string key_hint(std::string_view key, const StateDict& sd) {
  std::vector<std::pair<std::size_t, const std::string*>> close;
  const std::size_t limit = std::max<std::size_t>(2, key.size() / 4);
  for (const auto& [name, t] : sd) {
    const std::size_t d = edit_distance(key, name);
    if (d <= limit || ends_with_part(name, key) || ends_with_part(key, name))
      close.emplace_back(d, &name);
  }
  std::stable_sort(close.begin(), close.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out;
  if (!close.empty()) {
    out = "; close names: ";
    for (std::size_t i = 0; i < close.size() && i < 3; ++i)
      out += (i ? ", '" : "'") + *close[i].second + "'";
    return out;
  }
  if (sd.empty()) return "; the state dict is empty";
  out = "; it holds " + std::to_string(sd.size()) + " names: ";
  for (std::size_t i = 0; i < sd.size() && i < 5; ++i) out += (i ? ", '" : "'") + sd[i].first + "'";
  if (sd.size() > 5) out += ", ...";
  return out;
}

}  // namespace

StateDict::iterator StateDict::find(std::string_view name) {
  return std::find_if(begin(), end(), [&](const value_type& e) { return e.first == name; });
}

StateDict::const_iterator StateDict::find(std::string_view name) const {
  return std::find_if(begin(), end(), [&](const value_type& e) { return e.first == name; });
}

void StateDict::insert_or_assign(std::string name, Tensor tensor) {
  auto it = find(name);
  if (it != end())
    it->second = std::move(tensor);
  else
    emplace_back(std::move(name), std::move(tensor));
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  out.reserve(size());
  for (const auto& e : *this) out.push_back(e.first);
  return out;
}

StateDict::value_type& StateDict::entry(std::string_view name) {
  auto it = find(name);
  if (it == end())
    detail::raise<KeyError>("StateDict: no entry '", name, "'", key_hint(name, *this));
  return *it;
}

const StateDict::value_type& StateDict::entry(std::string_view name) const {
  auto it = find(name);
  if (it == end())
    detail::raise<KeyError>("StateDict: no entry '", name, "'", key_hint(name, *this));
  return *it;
}

}  // namespace ms
