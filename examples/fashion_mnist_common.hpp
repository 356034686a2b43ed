// examples/fashion_mnist_common.hpp — what the Fashion-MNIST examples share:
// flags (CLI11), data, the jitted training step, evaluation, checkpoints, curves.
// Built with MPI (MS_HAVE_MPI), `mpirun -np N <example>` trains data-parallel:
// each rank reads its shard of every epoch with --batch-size samples a step,
// the gradients are averaged across ranks in the step, rank 0 prints and saves.
// Built with libms_onnx (MS_HAVE_ONNX, meson option `onnx`), `--export m.onnx`
// writes the trained model as ONNX (examples/onnx_run.cpp runs it).
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <ms/cell.hpp>
#include <ms/data/dataloader.hpp>
#include <ms/data/fashion_mnist.hpp>
#include <ms/kernels/parallel.hpp>
#include <ms/train/checkpoint.hpp>
#include <ms/train/fit.hpp>
#include <thread>
#if MS_HAVE_MPI
#include <ms/parallel/collective.hpp>
#include <ms/parallel/grad_reducer.hpp>
#endif
#if MS_HAVE_ONNX
#include <ms/onnx/export.hpp>
#endif

namespace examples {

// Fraction of `data` classified correctly, in batches of 1000 with a jitted forward.
template <class F>
double accuracy(F& forward, ms::data::DataLoader& loader) {
  std::int64_t right = 0, total = 0;
  for (auto& b : loader) {
    const ms::Tensor pred = ms::argmax(forward(b.x), 1);
    right += ms::sum(ms::eq(pred, b.y.to(ms::int64))).item<std::int64_t>();
    total += b.x.dim(0);
  }
  return total > 0 ? static_cast<double>(right) / static_cast<double>(total) : 0.0;
}

#if MS_HAVE_ONNX
// Writes `net` in inference mode to the ONNX file `path`: input "x" ([batch, 784]
// or [batch, 1, 28, 28]), output "logits" [batch, 10], the batch dim dynamic.
// Returns false (after printing why) when the export fails.
template <class Net>
bool export_onnx(Net& net, const std::string& path, bool flatten) {
  try {
    net.set_train(false);
    const ms::Tensor example = flatten ? ms::zeros({1, 784}) : ms::zeros({1, 1, 28, 28});
    ms::onnx::export_model(net, example, path,
                           {.input_names = {"x"},
                            .output_names = {"logits"},
                            .dynamic_axes = {{"x", {{0, "batch"}}}, {"logits", {{0, "batch"}}}}});
    std::cout << "exported: " << path << " (ONNX, input x [batch, "
              << (flatten ? "784" : "1, 28, 28") << "], output logits [batch, 10])\n";
    return true;
  } catch (const ms::Error& e) {
    std::cerr << "--export " << path << " failed: " << e.what() << "\n";
    return false;
  }
}
#endif

/// Parses the common flags, trains `Net` with one jitted step (forward,
/// backward, Momentum update), evaluates, saves. `flatten`: the net takes
/// [B, 784] (else [B, 1, 28, 28]). Returns the process exit code.
template <class Net>
int train_fashion_mnist(const std::string& name, const std::string& title, bool flatten,
                        std::int64_t default_epochs, int argc, char** argv) {
  CLI::App app{title};
  std::int64_t epochs = default_epochs, batch = 64, seed = 1;
  double lr = 0.05, momentum = 0.9;
  int threads = 0;
  std::string data_dir(ms::data::FashionMNIST::kDefaultDir), checkpoint = name + ".safetensors",
                                                             resume, curves = name;
  app.add_option("--epochs", epochs,
                 "epochs to train (in all, counting resumed ones). The cosine schedule spans "
                 "them; with --resume and another count than the checkpoint's, the new count "
                 "sets the schedule's length and a warning names both counts and the rate that "
                 "changes (pass the saved count to continue the saved schedule)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--batch-size", batch, "samples per training step")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  app.add_option("--lr", lr, "learning rate of the Momentum optimizer")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  std::string schedule = "cosine";
  app.add_option("--lr-schedule", schedule,
                 "learning-rate schedule: cosine (from --lr to 0 over all steps) or constant")
      ->check(CLI::IsMember({"cosine", "constant"}))
      ->capture_default_str();
  app.add_option("--momentum", momentum, "momentum")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--threads", threads, "compute threads (0: all cores)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  app.add_option("--data-dir", data_dir,
                 "directory with the four Fashion-MNIST IDX files (Debian: dataset-fashion-mnist)")
      ->capture_default_str();
  app.add_option("--checkpoint", checkpoint,
                 "where to save the model, optimizer and position after each epoch ('' : never)")
      ->capture_default_str();
  app.add_option("--resume", resume, "a checkpoint to continue training from");
  app.add_option("--seed", seed, "seed of the initialization and of the shuffling")
      ->capture_default_str();
  app.add_option(
         "--curves", curves,
         "file stem of the loss / accuracy curves: per epoch (.csv, .svg) and per step "
         "(_steps.csv, _steps.svg: loss, smoothed loss, test accuracy of --eval-every; '' : "
         "none)")
      ->capture_default_str();
  std::int64_t eval_every = 0;
  app.add_option("--eval-every", eval_every,
                 "also measure the test accuracy every this many steps, into the per-step "
                 "curves (0: at epoch ends only)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  std::string amp = "O0", amp_dtype = "bf16";
  app.add_option("--amp", amp,
                 "mixed-precision level (ms::amp::auto_mixed_precision): O0 float32, O1 matmul "
                 "and conv in --amp-dtype, O2 all but norms and losses, O3 all")
      ->check(CLI::IsMember({"O0", "O1", "O2", "O3"}))
      ->capture_default_str();
  app.add_option("--amp-dtype", amp_dtype,
                 "low precision of --amp: bf16 or fp16 (fp16 trains with a dynamic loss scale)")
      ->check(CLI::IsMember({"bf16", "fp16"}))
      ->capture_default_str();
  std::string onnx_path;
  app.add_option("--export", onnx_path,
                 "after training, write the model (inference mode, dynamic batch) to this ONNX "
                 "file (needs a build with libms_onnx, meson option onnx)");
  CLI11_PARSE(app, argc, argv);
#if !MS_HAVE_ONNX
  if (!onnx_path.empty()) {
    std::cerr << "--export: this build has no ONNX support (libms_onnx: meson option onnx, "
                 "Debian libonnx-dev libprotobuf-dev)\n";
    return 2;
  }
#endif

  try {
    // Data parallel (mpirun): this rank, the number of ranks; 0 of 1 otherwise.
    int rank = 0, world = 1;
#if MS_HAVE_MPI
    ms::parallel::init();
    rank = ms::parallel::rank();
    world = ms::parallel::world_size();
    if (rank != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) return 1;  // rank 0 prints
    // Ranks on one machine share its cores.
    if (threads == 0 && world > 1)
      threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / world);
#endif
    if (threads > 0) ms::set_num_threads(threads);
    ms::default_generator().manual_seed(static_cast<std::uint64_t>(seed));
    ms::data::FashionMNIST train_set(data_dir, ms::data::Split::Train);
    ms::data::FashionMNIST test_set(data_dir, ms::data::Split::Test);
    const ms::data::Normalize norm{0.2860, 0.3530};  // mean and std of the training images
    ms::data::DataLoader train(train_set, {.batch_size = batch,
                                           .shuffle = true,
                                           .seed = static_cast<std::uint64_t>(seed),
                                           .normalize = norm,
                                           .flatten = flatten,
                                           .num_shards = world,
                                           .shard_id = rank});
    ms::data::DataLoader test(
        test_set, {.batch_size = 1000, .shuffle = false, .normalize = norm, .flatten = flatten});

    Net net;
    // Float32 master weights and optimizer state whatever the level; float16
    // needs loss scaling (its range is small), bfloat16 has float32's range.
    ms::amp::auto_mixed_precision(net, amp, amp_dtype == "fp16" ? ms::float16 : ms::bfloat16);
    std::unique_ptr<ms::amp::DynamicLossScaleManager> scaler;
    if (amp != "O0" && amp_dtype == "fp16")
      scaler = std::make_unique<ms::amp::DynamicLossScaleManager>();
    ms::optim::Momentum opt(net.trainable_params(), {.lr = lr, .momentum = momentum});
    ms::CheckpointInfo at;
    if (!resume.empty()) {
      at = ms::load_checkpoint(resume, net, &opt);
      std::cout << "resumed from " << resume << " at epoch " << at.epoch + 1 << ", step " << at.step
                << "\n";
    }
#if MS_HAVE_MPI
    // Rank 0's weights on every rank; the gradients averaged across ranks in the step.
    ms::parallel::DistributedGradReducer reducer(opt.parameters());
#endif
    std::cout << net << "\n";
    std::cout << "train: " << train_set.size() << " images, test: " << test_set.size() << ", batch "
              << batch << ", " << train.size() << " steps per epoch\n";
    if (world > 1)
      std::cout << "data parallel: " << world << " ranks, " << batch * world
                << " samples per step in all\n";

    if (amp != "O0")
      std::cout << "mixed precision: " << amp << " in " << amp_dtype
                << (scaler ? " with a dynamic loss scale" : "") << "\n";
    auto loss_fn = [&](const ms::Tensor& x, const ms::Tensor& y) {
      const ms::Tensor loss = ms::nn::cross_entropy(net(x), y);
      return scaler ? scaler->scale(loss) : loss;
    };
    // The optimizer step: with a loss scale, unscaled and skipped on overflow.
    auto update = [&](const std::vector<ms::Tensor>& grads) {
      if (scaler)
        scaler->apply(opt, grads);
      else
        opt.apply(grads);
    };
    // One generalized graph for every batch size: the full batches and the
    // last, partial one (60000 = 937 * 64 + 32) share it.
    const ms::Dim batch_dim("batch");
    ms::TensorSpec x_spec({batch_dim, 784}, ms::float32);
    if (!flatten) x_spec = ms::TensorSpec({batch_dim, 1, 28, 28}, ms::float32);
    auto step = ms::jit(
        [&](const ms::Tensor& x, const ms::Tensor& y) {
          auto [loss, grads] = ms::value_and_grad(
              loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
          if (scaler) loss = ms::Tensor(loss / scaler->loss_scale());
#if MS_HAVE_MPI
          update(reducer(grads));
          return ms::parallel::all_reduce(loss, ms::parallel::ReduceOp::Mean);  // global loss
#else
          update(grads);
          return loss;
#endif
        },
        {.input_signature = {x_spec, ms::TensorSpec({batch_dim}, ms::int32)}});
    auto forward = ms::jit([&](const ms::Tensor& x) { return net(x); });

    std::vector<std::shared_ptr<ms::train::Callback>> callbacks{
        std::make_shared<ms::train::ProgressBar>(200),
        std::make_shared<ms::train::Evaluate>([&] { return accuracy(forward, test); },
                                              "test_accuracy", true, eval_every)};
    if (!curves.empty()) callbacks.push_back(std::make_shared<ms::train::CurveWriter>(curves));
    // The rate follows the schedule by global step (a resumed run continues
    // it). Its length is saved with each checkpoint; a resumed run with
    // another --epochs keeps the new length and prints a warning naming both.
    std::shared_ptr<ms::train::CosineSchedule> cosine;
    if (schedule == "cosine") {
      cosine = std::make_shared<ms::train::CosineSchedule>(opt, lr, epochs, train.size());
      if (!resume.empty()) cosine->resume_from(at.extra, at.global_step);
      callbacks.insert(callbacks.begin(), cosine);
    }
    struct SaveEachEpoch : ms::train::Callback {
      std::function<void(const ms::train::TrainState&)> save;
      void on_epoch_end(ms::train::TrainState& s) override { save(s); }
    };
    if (!checkpoint.empty()) {
      auto cb = std::make_shared<SaveEachEpoch>();
      cb->save = [&](const ms::train::TrainState& s) {
        if (s.rank != 0) return;
        ms::CheckpointInfo info{.epoch = s.epoch + 1, .step = 0, .global_step = s.global_step};
        if (cosine) cosine->save_to(info.extra);
        ms::save_checkpoint(checkpoint, net, &opt, info);
      };
      callbacks.push_back(cb);
    }
    const auto res = ms::train::fit(step, train,
                                    {.epochs = epochs,
                                     .callbacks = callbacks,
                                     .initial_epoch = std::min(at.epoch, epochs),
                                     .initial_step = at.step,
                                     .rank = rank,
                                     .world_size = world});
    double total = 0;
    for (double s : res.epoch_seconds) total += s;
    std::printf("compiled train-step graphs: %d (generalized over the batch size: %s)\n",
                step.compile_count(), step.phase().c_str());
    if (!res.epoch_seconds.empty())
      std::printf("mean seconds per epoch: %.2f\n",
                  total / static_cast<double>(res.epoch_seconds.size()));
    const double acc = accuracy(forward, test);
    std::printf("final test accuracy: %.2f%%\n", 100.0 * acc);
    if (!checkpoint.empty()) std::cout << "checkpoint: " << checkpoint << "\n";
    if (!curves.empty())
      std::cout << "curves: " << curves << ".csv, " << curves << ".svg, " << curves
                << "_steps.csv, " << curves << "_steps.svg\n";
#if MS_HAVE_ONNX
    if (!onnx_path.empty() && rank == 0 && !export_onnx(net, onnx_path, flatten)) return 1;
#endif
  } catch (const ms::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace examples
