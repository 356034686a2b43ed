// A data-parallel training run in which rank 1 fails, for run_failures.sh:
//
//   failing_rank hang <dir>    rank 1 stops answering at step 3: the others raise
//                              ms::parallel::TimeoutError within the 2 s deadline, exit 3
//   failing_rank kill <dir>    rank 1 is killed (SIGKILL) at step 3; rank 0 saves
//                              <dir>/ckpt.safetensors after every step
//   failing_rank verify <file> loads the checkpoint (exit 0 when intact)
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <iostream>
#include <ms/cell.hpp>
#include <ms/parallel/grad_reducer.hpp>
#include <ms/train/checkpoint.hpp>
#include <string>
#include <thread>

namespace {

struct Net : ms::Cell<Net> {
  ms::nn::Dense fc1{16, 32}, fc2{32, 4};
  Net() { register_cells("fc1", fc1, "fc2", fc2); }
  ms::Tensor construct(const ms::Tensor& x) { return fc2(ms::relu(fc1(x))); }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: failing_rank hang|kill|verify <dir or file>\n";
    return 2;
  }
  const std::string mode = argv[1], where = argv[2];
  Net net;
  ms::optim::Momentum opt(net.trainable_params(), {.lr = 0.05, .momentum = 0.9});
  try {
    if (mode == "verify") {
      const ms::CheckpointInfo at = ms::load_checkpoint(where, net, &opt);
      std::cout << "checkpoint intact at step " << at.global_step << "\n";
      return 0;
    }
    ms::parallel::init();
    ms::parallel::set_timeout(2.0);
    const int rank = ms::parallel::rank();
    ms::parallel::DistributedGradReducer reducer(opt.parameters());
    auto loss_fn = [&](const ms::Tensor& x, const ms::Tensor& y) {
      return ms::nn::cross_entropy(net(x), y);
    };
    auto step = ms::jit([&](const ms::Tensor& x, const ms::Tensor& y) {
      auto [loss, grads] = ms::value_and_grad(
          loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
      opt.apply(reducer(grads));
      return loss;
    });
    ms::Generator gen(static_cast<std::uint64_t>(rank));
    for (std::int64_t s = 1; s <= 1000; ++s) {
      if (rank == 1 && s == 3) {
        if (mode == "kill") std::raise(SIGKILL);
        std::this_thread::sleep_for(std::chrono::seconds(60));  // stops answering
      }
      (void)step(ms::normal({8, 16}, 0.0, 1.0, gen), ms::randint(0, 4, {8}, gen, ms::int32));
      if (rank == 0)
        ms::save_checkpoint(where + "/ckpt.safetensors", net, &opt,
                            {.epoch = 0, .step = s, .global_step = s});
    }
    std::cerr << "rank " << rank << ": trained 1000 steps; rank 1 should have failed\n";
    return 4;
  } catch (const ms::Error& e) {
    std::cerr << "rank " << ms::parallel::rank() << ": " << e.kind() << ": " << e.what() << "\n";
    return 3;
  }
}
