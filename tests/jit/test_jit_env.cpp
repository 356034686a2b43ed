// MS_JIT=0 in the environment (read once, at first use) runs every jitted
// function eagerly; MINDSPORE_DUMP_CONFIG (or MS_DUMP_CONFIG) names a dump
// configuration file read at first use. A binary of its own: the variable is set before anything
// in it asks, so the result does not depend on the order tests run in.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <ms/ms.hpp>

namespace {
// Before main: no jitted function has been called yet in this process.
const int kSetEnv = setenv("MS_JIT", "0", 1);
// A dump configuration file, named by MindSpore's variable.
const std::string kDumpConfig = [] {
  const std::string p = (std::filesystem::temp_directory_path() /
                         ("ms_dump_env_" + std::to_string(getpid()) + ".json"))
                            .string();
  std::ofstream(p) << R"({"common_dump_settings": {"dump_mode": 0, "path": "/tmp/ms_env_dump",
      "net_name": "EnvNet", "iteration": "2-4", "input_output": 1}})";
  setenv("MINDSPORE_DUMP_CONFIG", p.c_str(), 1);
  return p;
}();
}  // namespace

TEST_SUITE("jit") {
  TEST_CASE("MS_JIT=0 runs jitted functions eagerly; set_jit_enabled overrides it") {
    REQUIRE(kSetEnv == 0);
    const ms::Tensor x = ms::arange(-3, 3).reshape({2, 3}).to(ms::float32);
    auto f = ms::jit([](const ms::Tensor& v) -> ms::Tensor {
      return ms::sum(v).item<float>() < 100.f ? ms::relu(v) : v;  // eager only: reads a value
    });
    CHECK(ms::allclose(f(x), ms::relu(x), 0, 0));
    CHECK(f.compile_count() == 0);
    CHECK_FALSE(ms::jit_enabled());
    ms::set_jit_enabled(true);
    auto g = ms::jit([](const ms::Tensor& v) { return ms::relu(v) * 2.f; });
    CHECK(ms::allclose(g(x), ms::relu(x) * 2.f, 0, 0));
    CHECK(g.compile_count() == 1);
  }

  TEST_CASE("MINDSPORE_DUMP_CONFIG names the dump configuration, read at first use") {
    const std::optional<ms::DumpConfig> cfg = ms::dump_config();
    std::remove(kDumpConfig.c_str());
    REQUIRE(cfg.has_value());
    CHECK(cfg->net_name == "EnvNet");
    CHECK(cfg->input_output == ms::DumpInputOutput::Input);
    CHECK(cfg->iteration_selected(3));
    CHECK_FALSE(cfg->iteration_selected(5));
    CHECK(ms::dump_dir() == std::filesystem::path("/tmp/ms_env_dump/EnvNet"));
    ms::set_dump_config("");  // removed: back to plain set_dump
    CHECK_FALSE(ms::dump_config().has_value());
  }
}
