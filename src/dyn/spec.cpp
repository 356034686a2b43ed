// The dynamic policy's names (see ms/dyn/spec.hpp).
#include "ms/dyn/spec.hpp"

#include <algorithm>
#include <cctype>
#include <ostream>

#include "ms/core/error.hpp"

namespace ms {

DynamicPolicy parse_dynamic_policy(std::string_view text) {
  for (DynamicPolicy p : {DynamicPolicy::AllDims, DynamicPolicy::ChangedDims}) {
    const std::string_view name = to_string(p);
    if (std::equal(text.begin(), text.end(), name.begin(), name.end(), [](char x, char y) {
          return std::tolower(static_cast<unsigned char>(x)) == y;  // names are lowercase
        }))
      return p;
  }
  ::ms::detail::raise<ValueError>(
      "parse_dynamic_policy: expected \"all_dims\" or \"changed_dims\", got \"", text, "\"");
}

std::string_view to_string(DynamicPolicy policy) {
  return policy == DynamicPolicy::ChangedDims ? "changed_dims" : "all_dims";
}

std::ostream& operator<<(std::ostream& os, DynamicPolicy policy) { return os << to_string(policy); }

}  // namespace ms
