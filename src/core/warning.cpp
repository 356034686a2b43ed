#include "ms/core/warning.hpp"

#include <cstdio>
#include <mutex>

namespace ms {
namespace {
std::mutex g_warning_mu;
WarningHandler g_handler;
}  // namespace

WarningHandler set_warning_handler(WarningHandler h) {
  std::lock_guard<std::mutex> lock(g_warning_mu);
  std::swap(g_handler, h);
  return h;
}

void warn(const std::string& text) {
  WarningHandler h;
  {
    std::lock_guard<std::mutex> lock(g_warning_mu);
    h = g_handler;
  }
  if (h)
    h(text);
  else
    std::fprintf(stderr, "ms warning: %s\n", text.c_str());
}

}  // namespace ms
