// bench/bm_onnx.cpp — an ONNX model exported by ms and loaded back as a
// ms::GraphCell, against the cell it came from (libms_onnx).
//
//   BM_OnnxMlp_Jit/batch:B/nt:N          cache hit of ms::jit(net), the MLP 784-512-256-10
//                                        (ms::nn::Dense, ReLU) as a cell
//   BM_OnnxMlp_GraphCell/batch:B/nt:N    the same net exported (dynamic batch) and loaded
//                                        as a GraphCell, under ms::jit: one graph for
//                                        every batch size (its input spec names the dim)
//   BM_OnnxMlp_GraphCellStatic/batch:B/nt:N  the same file loaded with set_inputs = false:
//                                        ms::jit specializes on the batch as for the cell
//   BM_OnnxLoad_File/nt:1                GraphCell("model.onnx") of a ~100 MB model (an MLP
//                                        4096-4096-2048, 25.2M float32 parameters): read,
//                                        parse, check, map, parameters made
//   BM_OnnxLoad_Bytes/nt:1               the same from bytes already in memory (no read)
//   BM_OnnxLoad_ReadFile/nt:1            ms::io::read_file of that file alone (the floor)
//
// Batches 1 and 64. Each jitted case checks its result against the cell run
// eagerly before its loop and that it compiled exactly once after it, so the
// loop measures cache hits only. The 100 MB file is written once per process
// to the temporary directory and removed at exit. bench/onnx_table.sh turns a
// run into the ratios GraphCell / jit and the load time.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "bench_common.hpp"
#include "ms/io/file.hpp"
#include "ms/onnx/export.hpp"
#include "ms/onnx/graph_cell.hpp"

namespace {

/// The Fashion-MNIST MLP of examples/fashion_mnist_mlp.cpp.
struct MLP : ms::Cell<MLP> {
  ms::nn::Dense fc1{784, 512}, fc2{512, 256}, fc3{256, 10};
  MLP() { register_cells("fc1", fc1, "fc2", fc2, "fc3", fc3); }
  ms::Tensor construct(const ms::Tensor& x) { return fc3(ms::relu(fc2(ms::relu(fc1(x))))); }
};

/// The ~100 MB model: 4096*4096 + 4096 + 4096*2048 + 2048 = 25.17M float32 parameters.
struct BigMLP : ms::Cell<BigMLP> {
  ms::nn::Dense fc1{4096, 4096}, fc2{4096, 2048};
  BigMLP() { register_cells("fc1", fc1, "fc2", fc2); }
  ms::Tensor construct(const ms::Tensor& x) { return fc2(ms::relu(fc1(x))); }
};

/// A file in the temporary directory, removed when the object goes.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& stem)
      : path((std::filesystem::temp_directory_path() /
              (stem + "_" + std::to_string(::getpid()) + ".onnx"))
                 .string()) {}
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
};

/// Writes `net` in inference mode with a dynamic batch (input "x", output "logits").
template <class Net>
void export_dynamic(Net& net, std::int64_t in_features, const std::string& path) {
  net.set_train(false);
  ms::onnx::export_model(net, ms::zeros({1, in_features}), path,
                         {.input_names = {"x"},
                          .output_names = {"logits"},
                          .dynamic_axes = {{"x", {{0, "batch"}}}, {"logits", {{0, "batch"}}}}});
}

/// Seeds ms's default generator (a member before the cells it initializes).
struct Seed {
  explicit Seed(std::uint64_t s) { ms::default_generator().manual_seed(s); }
};

/// The MLP (seeded) and its exported file, made once per process.
struct Exported {
  Seed seed{7};
  MLP net;
  TempFile file{"ms_bm_onnx_mlp"};
  Exported() { export_dynamic(net, 784, file.path); }
};

Exported& exported() {
  static Exported e;
  return e;
}

/// Fails the benchmark unless `f` compiled exactly once (the loop ran cache hits).
template <class F>
void check_cache_hits(benchmark::State& state, const F& f) {
  if (f.compile_count() != 1)
    state.SkipWithError(("expected 1 compile, got " + std::to_string(f.compile_count())).c_str());
}

void mlp_items(benchmark::State& state, std::int64_t batch) {
  // Multiply-adds of the three layers, as flops.
  state.SetItemsProcessed(state.iterations() * batch * 2 * (784 * 512 + 512 * 256 + 256 * 10));
}

/// Times cache hits of the jitted `cell` at batch state.range(0), its result
/// checked against the original cell run eagerly.
template <class Cell>
void run_jitted(benchmark::State& state, Cell& cell) {
  const std::int64_t batch = state.range(0);
  bench::set_threads(state.range(1));
  const ms::Tensor x = bench::random_tensor({batch, 784}, 17);
  const ms::Tensor want = exported().net(x);
  auto f = ms::jit(cell);
  if (!bench::check_same(state, f(x), want, 1e-5, "jit vs the cell run eagerly")) return;
  if (!bench::check_same(state, f(x), want, 1e-5, "jit (planned) vs the cell run eagerly")) return;
  for (auto _ : state) {
    ms::Tensor y = f(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  check_cache_hits(state, f);
  mlp_items(state, batch);
}

void BM_OnnxMlp_Jit(benchmark::State& state) { run_jitted(state, exported().net); }

void BM_OnnxMlp_GraphCell(benchmark::State& state) {
  ms::GraphCell g(exported().file.path);
  run_jitted(state, g);
}

void BM_OnnxMlp_GraphCellStatic(benchmark::State& state) {
  ms::GraphCell g(exported().file.path, {.set_inputs = false});
  run_jitted(state, g);
}

/// The ~100 MB model file, written once per process.
struct BigModel {
  TempFile file{"ms_bm_onnx_100mb"};
  std::uintmax_t bytes = 0;
  BigModel() {
    Seed seed{8};
    BigMLP net;
    export_dynamic(net, 4096, file.path);
    bytes = std::filesystem::file_size(file.path);
  }
};

const BigModel& big_model() {
  static const BigModel m;
  return m;
}

void load_label(benchmark::State& state) {
  const double mb = static_cast<double>(big_model().bytes) / 1e6;
  state.SetLabel(std::to_string(static_cast<int>(mb + 0.5)) + " MB");
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(big_model().bytes));
}

void BM_OnnxLoad_File(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const std::string& path = big_model().file.path;
  for (auto _ : state) {
    ms::GraphCell g(path);
    benchmark::DoNotOptimize(&g);
  }
  load_label(state);
}

void BM_OnnxLoad_Bytes(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const std::vector<std::uint8_t> bytes = ms::io::read_file(big_model().file.path);
  const std::string_view view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  for (auto _ : state) {
    ms::GraphCell g(view, "100 MB model");
    benchmark::DoNotOptimize(&g);
  }
  load_label(state);
}

void BM_OnnxLoad_ReadFile(benchmark::State& state) {
  bench::set_threads(state.range(0));
  const std::string& path = big_model().file.path;
  for (auto _ : state) {
    std::vector<std::uint8_t> bytes = ms::io::read_file(path);
    benchmark::DoNotOptimize(bytes.data());
  }
  load_label(state);
}

// ---------------------------------------------------------------- registration

/// A benchmark's name and function.
using Case = std::pair<const char*, void (*)(benchmark::State&)>;

void register_all() {
  for (auto [name, fn] :
       {Case{"BM_OnnxMlp_Jit", BM_OnnxMlp_Jit}, Case{"BM_OnnxMlp_GraphCell", BM_OnnxMlp_GraphCell},
        Case{"BM_OnnxMlp_GraphCellStatic", BM_OnnxMlp_GraphCellStatic}})
    for (std::int64_t nt : {1, 2})
      for (std::int64_t batch : {1, 64})
        benchmark::RegisterBenchmark(name, fn)
            ->ArgNames({"batch", "nt"})
            ->Args({batch, nt})
            ->UseRealTime();
  for (auto [name, fn] :
       {Case{"BM_OnnxLoad_File", BM_OnnxLoad_File}, Case{"BM_OnnxLoad_Bytes", BM_OnnxLoad_Bytes},
        Case{"BM_OnnxLoad_ReadFile", BM_OnnxLoad_ReadFile}})
    benchmark::RegisterBenchmark(name, fn)->ArgName("nt")->Arg(1)->UseRealTime()->Unit(
        benchmark::kMillisecond);
}

const int registered = (register_all(), 0);

}  // namespace

MS_BENCH_MAIN()
