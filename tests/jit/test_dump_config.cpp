// Dump configurations (MindSpore's MINDSPORE_DUMP_CONFIG subset) and
// set_dump(cell): which ops or cells, which iterations, inputs or outputs,
// and where the files go.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ms/ms.hpp>

#include "jit/jit_test_util.hpp"
#include "temp_dir.hpp"

using namespace ms;
namespace fs = std::filesystem;

namespace {
using ms_test::files_in;
bool has(const std::vector<std::string>& files, const std::string& prefix,
         const std::string& suffix) {
  return std::any_of(files.begin(), files.end(), [&](const std::string& f) {
    return f.starts_with(prefix) && f.ends_with(suffix);
  });
}
std::size_t count_with(const std::vector<std::string>& files, const std::string& part) {
  return static_cast<std::size_t>(std::count_if(
      files.begin(), files.end(), [&](const std::string& f) { return f.find(part) != f.npos; }));
}
std::string config(const fs::path& path, int mode, const std::string& iteration, int io,
                   const std::string& kernels = "[]") {
  return "{\"common_dump_settings\": {\"dump_mode\": " + std::to_string(mode) + ", \"path\": \"" +
         path.string() + "\", \"net_name\": \"Net\", \"iteration\": \"" + iteration +
         "\", \"input_output\": " + std::to_string(io) + ", \"kernels\": " + kernels +
         ", \"support_device\": [0], \"saved_data\": \"tensor\"}}";
}
// Removes the configuration when the test ends (also when a check throws).
struct ConfigScope {
  explicit ConfigScope(const std::string& c) { set_dump_config(c); }
  ~ConfigScope() { set_dump_config(""); }
  ConfigScope(const ConfigScope&) = delete;
  ConfigScope& operator=(const ConfigScope&) = delete;
};

struct Block : Cell<Block> {
  nn::Dense fc{3, 2};
  Block() { register_cells("fc", fc); }
  Tensor construct(const Tensor& x) { return relu(fc(x)); }
};

void expect_error(const std::string& text, const std::string& part1, const std::string& part2) {
  CHECK_THROWS_WITH_AS(parse_dump_config(text, "cfg.json"), doctest::Contains(part1.c_str()),
                       ValueError);
  CHECK_THROWS_WITH_AS(parse_dump_config(text, "cfg.json"), doctest::Contains(part2.c_str()),
                       ValueError);
}
}  // namespace

TEST_SUITE("jit") {
  TEST_CASE("dump config: parsing, iteration ranges and errors naming file, key, expected, given") {
    const DumpConfig c =
        parse_dump_config(config("/tmp/d", 1, "0|5-8|100-120", 2, "[\"matmul\"]"), "cfg.json");
    CHECK(c.dump_mode == 1);
    CHECK(c.path == fs::path("/tmp/d"));
    CHECK(c.net_name == "Net");
    CHECK(c.input_output == DumpInputOutput::Output);
    CHECK(c.kernels == std::vector<std::string>{"matmul"});
    for (std::int64_t it : {0, 5, 6, 8, 100, 120}) CHECK(c.iteration_selected(it));
    for (std::int64_t it : {1, 4, 9, 99, 121}) CHECK_FALSE(c.iteration_selected(it));
    CHECK(parse_dump_config(config("/tmp/d", 0, "all", 0), "x").iteration_selected(12345));

    expect_error(config("/tmp/d", 3, "all", 0), "cfg.json", "'common_dump_settings.dump_mode'");
    expect_error(config("/tmp/d", 3, "all", 0), "from 0 to 2", "given 3");
    expect_error(config("/tmp/d", 0, "8-5", 0), "'common_dump_settings.iteration'", "\"8-5\"");
    expect_error(config("/tmp/d", 0, "1|x", 0), "cfg.json", "\"1|x\"");
    expect_error(config("/tmp/d", 0, "all", 7), "input_output", "given 7");
    expect_error(config("/tmp/d", 1, "all", 0), "kernels", "at least one op name");
    expect_error(config("/tmp/d", 1, "all", 0, "[\"no_such_op\"]"), "kernels", "no_such_op");
    expect_error("{\"common_dump_settings\": {\"dump_mode\": 0}}", "'common_dump_settings.path'",
                 "the key is missing");
    expect_error("{\"other\": 1}", "cfg.json", "'common_dump_settings'");
    expect_error("{not json", "cfg.json", "not valid JSON");
    std::string statistic = config("/tmp/d", 0, "all", 0);
    statistic.replace(statistic.find("\"tensor\""), 8, "\"statistic\"");
    expect_error(statistic, "saved_data", "\"statistic\"");
    CHECK_THROWS_WITH_AS(set_dump_config("/no/such/dump.json"),
                         doctest::Contains("/no/such/dump.json"), ValueError);
    CHECK_FALSE(dump_config().has_value());
  }

  TEST_CASE("dump config from a file: listed kernels, selected iterations, outputs only") {
    const test::TempDir tmp("ms_dump_cfg");
    const std::string file = tmp.file("dump.json");
    std::ofstream(file) << config(tmp.path / "out", 1, "1|3", 2, "[\"matmul\"]");
    const ConfigScope cfg(file);
    REQUIRE(dump_config().has_value());
    CHECK(dump_dir() == tmp.path / "out" / "Net");
    const Tensor w = arange(0, 6).reshape({3, 2}).to(float32);
    auto f = jit([&](const Tensor& x) -> Tensor { return relu(matmul(x, w)); });
    const Tensor x = arange(-3, 3).reshape({2, 3}).to(float32);
    for (int i = 0; i < 5; ++i) f(x);
    const auto files = files_in(tmp.path / "out" / "Net");
    CHECK(files.size() == 2);  // MatMul's output in runs 1 and 3
    CHECK(has(files, "MatMul.", ".1.output.0.npy"));
    CHECK(has(files, "MatMul.", ".3.output.0.npy"));
    CHECK(count_with(files, "input") == 0);
    CHECK(count_with(files, "Relu") == 0);
  }

  TEST_CASE("dump config: dump_mode 0 dumps every op; input_output 1 writes inputs only") {
    const test::TempDir tmp("ms_dump_all");
    const ConfigScope cfg(config(tmp.path, 0, "0", 1));
    const Tensor w = arange(0, 6).reshape({3, 2}).to(float32);
    auto f = jit([&](const Tensor& x) -> Tensor { return relu(matmul(x, w)); });
    const Tensor x = arange(-3, 3).reshape({2, 3}).to(float32);
    f(x);
    f(x);  // iteration 1: not selected
    const auto files = files_in(tmp.path / "Net");
    CHECK(files.size() == 3);  // MatMul's 2 inputs, Relu's 1
    CHECK(count_with(files, "MatMul.") == 2);
    CHECK(count_with(files, "Relu.") == 1);
    CHECK(count_with(files, "output") == 0);
    CHECK(count_with(files, ".1.input") == 0);
  }

  TEST_CASE("set_dump(cell): under jit the ops traced inside it, eagerly its boundary") {
    const test::TempDir tmp("ms_dump_cell");
    set_dump_dir(tmp.path);
    Block net;
    const Tensor x = arange(-3, 3).reshape({2, 3}).to(float32);
    set_dump(net.fc, true, "fc");
    auto f = jit([&](const Tensor& v) -> Tensor { return net(v); });
    const Tensor y = f(x);
    auto files = files_in(tmp.path);
    CHECK(has(files, "fc.MatMul.", ".0.output.0.npy"));  // an op inside the dense cell
    CHECK(count_with(files, "Relu") == 0);               // outside it
    CHECK(count_with(files, "fc.") == files.size());
    for (const auto& p : files) fs::remove(tmp.path / p);

    const Tensor eager = net(x);  // eager: the cell's argument and result
    files = files_in(tmp.path);
    CHECK(files == std::vector<std::string>{"fc.0.input.0.npy", "fc.0.output.0.npy"});
    CHECK(allclose(eager, y, 1e-6, 1e-6));
    set_dump(net.fc, false);
    for (const auto& p : files) fs::remove(tmp.path / p);
    net(x);
    f(x);
    CHECK(files_in(tmp.path).empty());
    set_dump_dir("ms_dump");
  }

  TEST_CASE("dump config dump_mode 2: marked cells, eager iterations and outputs selected") {
    const test::TempDir tmp("ms_dump_mode2");
    const ConfigScope cfg(config(tmp.path, 2, "1-2", 2));
    Block net;
    set_dump(net);  // named after its class
    const Tensor x = arange(-3, 3).reshape({2, 3}).to(float32);
    for (int i = 0; i < 4; ++i) net(x);
    const auto files = files_in(tmp.path / "Net");
    CHECK(files == std::vector<std::string>{"Block.1.output.0.npy", "Block.2.output.0.npy"});
    set_dump(net, false);
  }
}
