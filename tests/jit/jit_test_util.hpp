// Helpers of the jit tests: the configuration that verifies every compiled
// graph, and the names of the files a dump wrote.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <ms/jit/jit.hpp>

namespace ms_test {

/// ms::jit's configuration in the tests: the graph verified after every pass.
inline const ms::JitConfig kTest{.verify = true};

/// The names of the entries of directory `d`, sorted (none when it does not exist).
inline std::vector<std::string> files_in(const std::filesystem::path& d) {
  std::vector<std::string> out;
  if (std::filesystem::exists(d))
    for (const auto& e : std::filesystem::directory_iterator(d))
      out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ms_test
