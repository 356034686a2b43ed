// bench/bm_parallel.cpp — collectives and data-parallel steps across ranks.
//
//   mpirun -np 2 --oversubscribe --mca btl self,vader build/bench/bm_parallel
//
// Every rank runs every benchmark with a fixed iteration count (a collective
// needs all ranks, so Google Benchmark may not pick the count per process);
// rank 0 reports. For each message size:
//   BM_AllReduce_Mpi      a plain MPI_Allreduce loop (in place, float32, sum): the baseline
//   BM_AllReduce_Ms       ms::parallel::all_reduce (header exchange + MPI_Iallreduce, polled)
//   BM_GradReducer_Ms     DistributedGradReducer on one parameter of that size
//                         (reduce-scatter + all-gather, the same bits on every rank)
// with "busbw" = 2 (p - 1) / p * bytes / time, the bytes each rank's link moves
// in a ring all-reduce (NCCL's bus bandwidth), comparable across rank counts.
// Then the MLP 784-512-256-10 training step at 32 samples per rank:
//   BM_MlpStep_Local      the jitted step alone (no communication)
//   BM_MlpStep_DataParallel  the same step with the reducer (25 MB: one bucket)
//   BM_MlpStep_Buckets    the same with 256 KB buckets (reduction overlaps backward)
//   BM_MlpGrads_AllReduce the reducer on the MLP's 2.1 MB of gradients alone
// The fraction of the all-reduce hidden behind backward is
// 1 - (DataParallel - Local) / AllReduce (docs/distributed.md).
#include <benchmark/benchmark.h>
// MPI's C API only: OpenMPI's mpi.h would also pull in the deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <ms/cell.hpp>
#include <ms/parallel/collective.hpp>
#include <ms/parallel/grad_reducer.hpp>
#include <vector>

namespace {

// Iterations per size: about 0.2-1 s per benchmark on one machine.
std::int64_t iterations_for(std::int64_t bytes) {
  return bytes <= (64 << 10) ? 2000 : bytes <= (1 << 20) ? 300 : bytes <= (8 << 20) ? 40 : 10;
}

void set_counters(benchmark::State& state, std::int64_t bytes) {
  const double p = ms::parallel::world_size();
  const auto n = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(n) * bytes);
  state.counters["busbw"] =
      benchmark::Counter(2.0 * (p - 1) / p * static_cast<double>(bytes) * n,
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}

void BM_AllReduce_Mpi(benchmark::State& state) {
  const std::int64_t bytes = state.range(0), n = bytes / 4;
  std::vector<float> buf(static_cast<std::size_t>(n), 1.0f);
  MPI_Barrier(MPI_COMM_WORLD);
  for (auto _ : state) {
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    benchmark::DoNotOptimize(buf.data());
  }
  set_counters(state, bytes);
}

void BM_AllReduce_Ms(benchmark::State& state) {
  const std::int64_t bytes = state.range(0);
  const ms::Tensor x = ms::ones({bytes / 4});
  ms::parallel::barrier();
  for (auto _ : state) {
    ms::Tensor y = ms::parallel::all_reduce(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_counters(state, bytes);
}

void BM_GradReducer_Ms(benchmark::State& state) {
  const std::int64_t bytes = state.range(0);
  ms::ParameterList ps{ms::Parameter(ms::zeros({bytes / 4}), "w")};
  ms::parallel::DistributedGradReducer reducer(ps, {.mean = false});
  const std::vector<ms::Tensor> g{ms::ones({bytes / 4})};
  ms::parallel::barrier();
  for (auto _ : state) {
    std::vector<ms::Tensor> r = reducer(g);
    benchmark::DoNotOptimize(r[0].raw_data());
  }
  set_counters(state, bytes);
}

struct MLP : ms::Cell<MLP> {
  ms::nn::Dense fc1{784, 512}, fc2{512, 256}, fc3{256, 10};
  MLP() { register_cells("fc1", fc1, "fc2", fc2, "fc3", fc3); }
  ms::Tensor construct(const ms::Tensor& x) { return fc3(ms::relu(fc2(ms::relu(fc1(x))))); }
};

// mode 0: no reducer; 1: one 25 MB bucket; 2: 256 KB buckets.
void mlp_step(benchmark::State& state, int mode) {
  MLP net;
  ms::optim::Momentum opt(net.trainable_params(), {.lr = 0.01, .momentum = 0.9});
  std::optional<ms::parallel::DistributedGradReducer> reducer;
  if (mode > 0)
    reducer.emplace(opt.parameters(), ms::parallel::GradReducerOptions{
                                          .bucket_bytes = mode == 1 ? 25 << 20 : 256 << 10});
  auto loss_fn = [&](const ms::Tensor& x, const ms::Tensor& y) {
    return ms::nn::cross_entropy(net(x), y);
  };
  auto step = ms::jit([&](const ms::Tensor& x, const ms::Tensor& y) {
    auto [loss, grads] =
        ms::value_and_grad(loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
    opt.apply(reducer ? (*reducer)(grads) : grads);
    return loss;
  });
  ms::Generator gen(1);
  const ms::Tensor x = ms::normal({32, 784}, 0.0, 1.0, gen);
  const ms::Tensor y = ms::randint(0, 10, {32}, gen, ms::int32);
  (void)step(x, y);  // compile
  ms::parallel::barrier();
  for (auto _ : state) benchmark::DoNotOptimize(step(x, y).raw_data());
  state.SetItemsProcessed(state.iterations() * 32 * ms::parallel::world_size());
}

void BM_MlpStep_Local(benchmark::State& state) { mlp_step(state, 0); }
void BM_MlpStep_DataParallel(benchmark::State& state) { mlp_step(state, 1); }
void BM_MlpStep_Buckets(benchmark::State& state) { mlp_step(state, 2); }

void BM_MlpGrads_AllReduce(benchmark::State& state) {
  MLP net;
  ms::parallel::DistributedGradReducer reducer(net.trainable_params());
  std::vector<ms::Tensor> g;
  for (const ms::Parameter& p : net.trainable_params()) g.push_back(ms::ones(p.shape()));
  ms::parallel::barrier();
  for (auto _ : state) benchmark::DoNotOptimize(reducer(g)[0].raw_data());
  std::int64_t bytes = 0;
  for (const ms::Tensor& t : g) bytes += t.nbytes();
  set_counters(state, bytes);
}

void sizes(benchmark::internal::Benchmark* b) {
  // Every rank must run the same iterations: fixed per size, never chosen by time.
  b->ArgName("bytes")->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  ms::parallel::init();
  for (std::int64_t bytes : {std::int64_t{4} << 10, std::int64_t{64} << 10, std::int64_t{1} << 20,
                             std::int64_t{8} << 20, std::int64_t{32} << 20})
    for (auto [name, fn] : {std::pair{"BM_AllReduce_Mpi", &BM_AllReduce_Mpi},
                            std::pair{"BM_AllReduce_Ms", &BM_AllReduce_Ms},
                            std::pair{"BM_GradReducer_Ms", &BM_GradReducer_Ms}}) {
      auto* b =
          benchmark::RegisterBenchmark(name, fn)->Arg(bytes)->Iterations(iterations_for(bytes));
      sizes(b);
    }
  for (auto [name, fn] : {std::pair{"BM_MlpStep_Local", &BM_MlpStep_Local},
                          std::pair{"BM_MlpStep_DataParallel", &BM_MlpStep_DataParallel},
                          std::pair{"BM_MlpStep_Buckets", &BM_MlpStep_Buckets},
                          std::pair{"BM_MlpGrads_AllReduce", &BM_MlpGrads_AllReduce}})
    benchmark::RegisterBenchmark(name, fn)->Iterations(200)->UseRealTime();
  benchmark::Initialize(&argc, argv);
  if (ms::parallel::rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  ms::parallel::finalize();
  return 0;
}
