// set_dump: marked ops write their inputs and outputs as .npy per call.
#include <doctest/doctest.h>
#include <algorithm>

#include "jit/jit_test_util.hpp"
#include "temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <ms/ms.hpp>
#include <sstream>

using namespace ms;
namespace fs = std::filesystem;

namespace {
std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}
// The data part of a version-1 .npy file (header length at bytes 8-9).
std::string npy_data(const std::string& f) {
  const std::size_t hlen =
      static_cast<unsigned char>(f[8]) | (static_cast<unsigned char>(f[9]) << 8);
  return f.substr(10 + hlen);
}
using ms_test::files_in;
}  // namespace

TEST_SUITE("jit") {
  TEST_CASE("set_dump writes the tensors of marked ops, one set per call") {
    const test::TempDir tmp("ms_dump_test");
    const fs::path& d = tmp.path;
    set_dump_dir(d);
    const Tensor w = arange(0, 6).reshape({3, 2});
    auto f =
        jit([&](const auto& x) -> Tensor { return relu(matmul(x, w)) * 2.f; }, {.verify = true});
    const Tensor x = arange(-3, 3).reshape({2, 3});
    f(x);  // not marked yet: nothing written
    CHECK(files_in(d).empty());

    set_dump("matmul");
    set_dump("relu");
    CHECK(dump_enabled("matmul"));
    const Tensor y = f(x);  // the hook version changed: recompiled with the marks
    CHECK(f.compile_count() == 2);
    CHECK(f.dump().find("= Relu(") != std::string::npos);  // a marked op is not fused
    f(x);
    const auto files = files_in(d);
    // MatMul and Relu, 2 calls: MatMul 2 inputs + 1 output, Relu 1 + 1.
    CHECK(files.size() == 10);
    std::string mm_out;
    for (const auto& p : files)
      if (p.starts_with("MatMul.") && p.ends_with(".0.output.0.npy")) mm_out = p;
    REQUIRE(!mm_out.empty());
    const std::string content = read_file(d / mm_out);
    CHECK(content.substr(1, 5) == "NUMPY");
    CHECK(content.find("'descr': '<f4'") != std::string::npos);
    CHECK(content.find("'shape': (2, 2)") != std::string::npos);
    const Tensor mm = matmul(x, w);
    CHECK(npy_data(content) ==
          std::string(reinterpret_cast<const char*>(mm.data<float>()), 4 * sizeof(float)));

    set_dump("matmul", false);
    set_dump("relu", false);
    CHECK_FALSE(dump_enabled("matmul"));
    CHECK_THROWS_WITH_AS(set_dump("no_such_op"), doctest::Contains("no_such_op"), ValueError);
  }
}
