// ms/core/warning.hpp — warnings: things worth telling that are not errors.
//
// Stage: core. `ms::warn(text)` hands the text to the warning handler; the
// default prints "ms warning: <text>" to stderr. A program (or a test) can
// collect them instead:
//
//   std::vector<std::string> seen;
//   auto prev = ms::set_warning_handler([&](const std::string& w) { seen.push_back(w); });
//   ...
//   ms::set_warning_handler(prev);
#pragma once

#include <string>

#include "ms/core/std_parts.hpp"

namespace ms {

/// Receives each warning's text (see set_warning_handler).
using WarningHandler = std::function<void(const std::string&)>;

/// Installs `h` (empty: the default, stderr) and returns the previous handler.
WarningHandler set_warning_handler(WarningHandler h);
/// Reports a warning through the current handler. Thread-safe.
void warn(const std::string& text);

}  // namespace ms
