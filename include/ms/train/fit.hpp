// ms/train/fit.hpp — the training loop and its callbacks (MindSpore's Model.train).
//
// Stage: train. `fit(step, loader, {.epochs, .callbacks})` calls `step(x, y)`
// (usually an ms::jit-compiled forward + backward + update returning the loss)
// on every batch of every epoch, and tells the callbacks: a progress bar,
// a loss monitor, periodic checkpoints, evaluation at each epoch's end (and
// every N steps), and the loss / accuracy curves as CSV and SVG: per epoch,
// and per step (raw and smoothed loss, validation points).
//
//   auto step = ms::jit([&](const ms::Tensor& x, const ms::Tensor& y) { ... return loss; });
//   ms::train::fit(step, loader, {.epochs = 3, .callbacks = {
//       std::make_shared<ms::train::ProgressBar>(),
//       std::make_shared<ms::train::Evaluate>([&] { return accuracy(net, test); },
//                                              "test_accuracy", true, /*every_steps=*/200),
//       std::make_shared<ms::train::CurveWriter>("curves")}});   // after Evaluate: it
//                                                                 // writes what Evaluate set
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ms/core/std_parts.hpp"
#include "ms/core/tensor.hpp"
#include "ms/data/dataloader.hpp"
#include "ms/nn/optim.hpp"

namespace ms::train {

/// What the loop knows; callbacks read it (and may set `stop`).
struct TrainState {
  std::int64_t epoch = 0;   ///< current epoch, 0-based
  std::int64_t epochs = 0;  ///< epochs to run in all
  std::int64_t step = 0;    ///< step within the epoch, 1-based after a step
  /// steps in one epoch (the loader's batches)
  std::int64_t steps_per_epoch = 0;
  std::int64_t global_step = 0;           ///< steps since training began (including resumed ones)
  double loss = 0.0;                      ///< the last step's loss
  double epoch_loss = 0.0;                ///< mean loss of the epoch so far
  std::int64_t samples = 0;               ///< samples seen this epoch
  double epoch_seconds = 0.0;             ///< time spent in this epoch so far
  std::map<std::string, double> metrics;  ///< set by callbacks (e.g. "test_accuracy")
  /// Set by callbacks in this step's on_step_end (e.g. Evaluate every N steps),
  /// read by the callbacks after them (CurveWriter); cleared before each step's
  /// on_step_end.
  std::map<std::string, double> step_metrics;
  bool stop = false;            ///< a callback may end training early
  std::int64_t rank = 0;        ///< FitOptions::rank (data-parallel runs)
  std::int64_t world_size = 1;  ///< FitOptions::world_size
};

/// Base of the callbacks; every method does nothing by default.
class Callback {
 public:
  virtual ~Callback() = default;
  /// Before the first epoch (after a resume: before the first epoch run).
  virtual void on_train_begin(TrainState&) {}
  /// Before each epoch's first step.
  virtual void on_epoch_begin(TrainState&) {}
  /// After each step; TrainState::loss holds its loss.
  virtual void on_step_end(TrainState&) {}
  /// After each epoch's last step; TrainState::epoch_loss holds its mean loss.
  virtual void on_epoch_end(TrainState&) {}
  /// After the last epoch, or when a callback set TrainState::stop.
  virtual void on_train_end(TrainState&) {}
};

/// The options of ms::train::fit:
/// `ms::train::fit(step, loader, {.epochs = 5, .callbacks =
/// {std::make_shared<ms::train::ProgressBar>()}})`.
struct FitOptions {
  /// The number of epochs (counting those skipped by initial_epoch).
  std::int64_t epochs = 1;
  /// Called in this order at each event.
  std::vector<std::shared_ptr<Callback>> callbacks = {};
  /// Resume: the epoch to start at and the steps of it already done (skipped:
  /// the loader's order for that epoch is replayed, so a resumed run sees the
  /// same batches as an uninterrupted one).
  std::int64_t initial_epoch = 0;
  /// The steps of `initial_epoch` already done (see initial_epoch).
  std::int64_t initial_step = 0;
  /// The world size `initial_step` was counted with (0: this run's world_size).
  /// A mid-epoch position counts steps of each rank's shard, so it resumes
  /// exactly only with the world size it was saved with: initial_step > 0 with
  /// another world size is an ms::ValueError (an epoch's end resumes with any
  /// world size). Store `TrainState::world_size` beside the position when saving.
  std::int64_t initial_world_size = 0;
  /// Data-parallel training: this process's rank and the number of ranks
  /// (ms::parallel::rank() and world_size(); the train stage knows no MPI).
  /// The reporting callbacks (ProgressBar, Evaluate, CurveWriter, Checkpoint,
  /// LossMonitor's printing) act on rank 0 only; other callbacks run on every
  /// rank and read TrainState::rank. TrainState::samples counts the samples of
  /// all ranks (world_size x this rank's batch), so rates are global. Every
  /// rank must take the same steps: a callback that sets `stop` must do so on
  /// every rank.
  std::int64_t rank = 0;
  std::int64_t world_size = 1;  ///< the number of ranks (>= 1)
};

/// Per-epoch results of fit().
struct FitResult {
  /// The mean loss of each epoch run.
  std::vector<double> epoch_loss;
  /// The time each epoch took.
  std::vector<double> epoch_seconds;
  /// TrainState::metrics at the end of each epoch.
  std::vector<std::map<std::string, double>> epoch_metrics;
  std::vector<double> step_loss;  ///< every step's loss, in order
};

namespace detail {
FitResult fit_loop(const std::function<double(const Tensor&, const Tensor&)>& step,
                   data::DataLoader& loader, const FitOptions& o);
}

/// Trains: `step(x, y)` returns the loss (a 0-d tensor) of one batch.
template <class Step>
FitResult fit(Step&& step, data::DataLoader& loader, const FitOptions& o = {}) {
  return detail::fit_loop(
      [&](const Tensor& x, const Tensor& y) { return Tensor(step(x, y)).template item<double>(); },
      loader, o);
}

// ------------------------------------------------------------------ callbacks

/// A progress bar on a terminal (epoch, step/total, loss, samples/s, ETA),
/// redrawn in place; plain lines (every `every` steps and at each epoch's end)
/// when stdout is not a terminal. On rank 0 only (FitOptions::rank).
class ProgressBar : public Callback {
 public:
  /// Plain lines every `every` steps when stdout is not a terminal; ValueError
  /// unless every >= 1.
  explicit ProgressBar(std::int64_t every = 100);
  void on_epoch_begin(TrainState& s) override;
  void on_step_end(TrainState& s) override;
  void on_epoch_end(TrainState& s) override;

 private:
  std::int64_t every_;
  bool tty_;
  std::chrono::steady_clock::time_point last_draw_{};
};

/// Prints the loss every `per_print_times` steps; raises ms::ValueError when
/// the loss becomes NaN or infinite (as MindSpore's LossMonitor stops).
class LossMonitor : public Callback {
 public:
  /// Prints every `per_print_times` steps when `print` (ValueError unless
  /// per_print_times >= 1); checks the loss at every step.
  explicit LossMonitor(std::int64_t per_print_times = 1, bool print = true);
  void on_step_end(TrainState& s) override;

 private:
  std::int64_t every_;
  bool print_;
};

/// Calls `eval()` at each epoch's end and stores its result as metric `name`
/// (printed as a percentage with `percent`). With `every_steps` = N > 0 it also
/// calls `eval()` after every step whose global step is a multiple of N and
/// stores the result in TrainState::step_metrics[name] (not printed: the
/// per-step curves of CurveWriter hold it); when an epoch ends on such a step,
/// that result is reused for the epoch's metric instead of evaluating twice.
class Evaluate : public Callback {
 public:
  /// Stores `eval()` as metric `name`; `percent` prints it times 100 with a % sign;
  /// `every_steps` > 0 also evaluates every that many global steps (0: at epoch
  /// ends only). ValueError for an empty `eval` or every_steps < 0.
  explicit Evaluate(std::function<double()> eval, std::string name = "test_accuracy",
                    bool percent = true, std::int64_t every_steps = 0);
  void on_step_end(TrainState& s) override;
  void on_epoch_end(TrainState& s) override;
  /// The number of times `eval()` was called.
  std::int64_t calls() const { return calls_; }

 private:
  std::function<double()> eval_;
  std::string name_;
  bool percent_;
  std::int64_t every_;
  std::int64_t calls_ = 0;
  std::int64_t last_step_ = -1;  ///< the global step of the last evaluation after a step
  double last_value_ = 0.0;
};

/// Calls `save(path, state)` every `every_steps` steps (and at the end of
/// training), with paths `<dir>/<prefix>-<global_step>.safetensors`, keeping
/// the last `keep` files. Directories are created and old files removed through
/// ms::io::file_system().
class Checkpoint : public Callback {
 public:
  /// Writes a checkpoint to `path` (e.g. a lambda calling ms::save_checkpoint).
  using SaveFn = std::function<void(const std::string& path, const TrainState&)>;
  /// Saves with `save` into `dir` (created when missing) every `every_steps`
  /// steps, keeping the last `keep` files; ValueError for an empty `save` or
  /// every_steps or keep < 1.
  Checkpoint(SaveFn save, std::string dir, std::string prefix = "ckpt",
             std::int64_t every_steps = 1000, std::int64_t keep = 3);
  void on_step_end(TrainState& s) override;
  void on_train_end(TrainState& s) override;
  /// The paths of the checkpoints kept, oldest first.
  const std::vector<std::string>& kept() const { return kept_; }

 private:
  void save(const TrainState& s);
  SaveFn save_;
  std::string dir_, prefix_;
  std::int64_t every_, keep_;
  std::int64_t last_saved_ = -1;
  std::vector<std::string> kept_;
};

/// Options of CurveWriter (`{.ema_decay = 0.98}`).
struct CurveWriterOptions {
  /// The decay b of the smoothed loss, in [0, 1): after n steps with losses
  /// l_1..l_n, m_n = b m_{n-1} + (1 - b) l_n with m_0 = 0, and the smoothed
  /// loss is m_n / (1 - b^n) (bias-corrected, so the first value is l_1 and
  /// every value is a weighted mean of the losses so far, weights b^(n-k)).
  /// 0.9 averages over about the last 10 steps.
  double ema_decay = 0.9;
  /// Write the per-step files `<stem>_steps.csv` and `.svg` (see CurveWriter).
  bool steps = true;
  /// A step metric in the loss's units (e.g. "val_loss" set by an Evaluate
  /// every N steps), drawn as points on the loss axis of `<stem>_steps.svg`
  /// (empty: none).
  std::string loss_metric = {};
};

/// Writes the training curves, on rank 0 only. Per epoch, at each epoch's end:
/// `<stem>.csv` (columns epoch, loss, seconds, then each metric of
/// TrainState::metrics) and `<stem>.svg` (loss and, when present, test accuracy
/// per epoch; a self-contained plot). Per step, with options.steps:
/// `<stem>_steps.csv`, one row per step with columns step (the global step,
/// 1-based), epoch (1-based), loss (the step's), loss_ema (the smoothed loss,
/// see CurveWriterOptions::ema_decay), then each metric that appeared in
/// TrainState::step_metrics (e.g. Evaluate's every N steps), filled in the rows
/// of the steps that set it and empty elsewhere, and `<stem>_steps.svg` (the
/// loss, the smoothed loss, and the step metric "test_accuracy" when set: see
/// curves_steps_svg; and CurveWriterOptions::loss_metric as points on the
/// loss axis). The smoothing starts at the first step this writer sees
/// (a resumed run restarts it). The per-step files are rewritten (atomically) after a step that set
/// a step metric, at each epoch's end and when training ends. Place CurveWriter after the callbacks
/// whose metrics it writes (callbacks run in order).
/// Example: `ms::train::CurveWriter cw("curves", {.ema_decay = 0.98, .steps = true});`
class CurveWriter : public Callback {
 public:
  /// Writes `<stem>.csv`, `<stem>.svg`, `<stem>_steps.csv` and `<stem>_steps.svg`; ValueError for
  /// an empty stem or an ema_decay outside [0, 1).
  explicit CurveWriter(std::string stem, CurveWriterOptions options = {});
  void on_step_end(TrainState& s) override;
  void on_epoch_end(TrainState& s) override;
  void on_train_end(TrainState& s) override;
  /// The smoothed loss after the last step seen (NaN before the first).
  double loss_ema() const;

 private:
  /// One row of the per-step file.
  struct StepRow {
    std::int64_t step, epoch;
    double loss, loss_ema;
    std::map<std::string, double> metrics;
  };
  void write_steps() const;
  std::string stem_;
  CurveWriterOptions options_;
  std::vector<double> loss_;
  std::vector<std::map<std::string, double>> metrics_;
  std::vector<double> seconds_;
  std::vector<StepRow> rows_;
  double ema_sum_ = 0.0;     ///< m_n of CurveWriterOptions::ema_decay
  double ema_weight_ = 0.0;  ///< 1 - b^n
};

/// The learning rate by global step (so a resumed run continues it): a half
/// cosine from `base_lr` at step 0 to 0 at `epochs * steps_per_epoch`, and 0
/// after. Its length is part of a checkpoint (`save_to`); a resumed run whose
/// length differs keeps its own and says so (`resume_from`), so changing the
/// number of epochs on resume never changes the schedule silently.
///
///   auto sched = std::make_shared<ms::train::CosineSchedule>(opt, 0.05, epochs, loader.size());
///   ms::CheckpointInfo at = ms::load_checkpoint(path, net, &opt);
///   sched->resume_from(at.extra, at.global_step);   // warns when the lengths differ
///   ms::CheckpointInfo info{.epoch = 1};
///   sched->save_to(info.extra);                     // before ms::save_checkpoint
class CosineSchedule : public Callback {
 public:
  /// ValueError unless base_lr is finite and >= 0, epochs >= 0 and steps_per_epoch >= 1.
  CosineSchedule(optim::Optimizer& opt, double base_lr, std::int64_t epochs,
                 std::int64_t steps_per_epoch);
  /// The rate after `global_step` steps.
  double lr_at(std::int64_t global_step) const;
  /// The length in epochs.
  std::int64_t epochs() const { return epochs_; }
  /// Steps from base_lr to 0: epochs * steps_per_epoch (at least 1).
  std::int64_t total_steps() const { return total_; }
  void on_train_begin(TrainState& s) override;
  void on_step_end(TrainState& s) override;
  /// Writes the length into checkpoint metadata: `lr_schedule` = "cosine",
  /// `lr_schedule_epochs` and `lr_schedule_steps`.
  void save_to(std::map<std::string, std::string>& extra) const;
  /// Compares this schedule with the one a checkpoint's metadata (`extra`)
  /// describes, resuming at `global_step`. When they differ this schedule is
  /// kept (the new length wins: more epochs train on with a rate above 0)
  /// and a warning (ms::warn) names both lengths, in epochs and steps, and
  /// the rate at `global_step` under each; it is also returned. Empty when
  /// they agree. A checkpoint without the entries gets a warning saying the
  /// length cannot be checked; malformed entries are a ValueError.
  std::string resume_from(const std::map<std::string, std::string>& extra,
                          std::int64_t global_step) const;

 private:
  optim::Optimizer& opt_;
  double base_;
  std::int64_t epochs_;
  std::int64_t total_;
};

/// Sets the optimizer's rate to `lr_at(global_step)` when training begins and
/// after every step, so a schedule written as a function of the step (such
/// as ms::optim::WarmupCosineLR::lr_at) follows fit's global step, also on
/// resume. The schedule object is then not step()ped by hand.
///   ms::optim::WarmupCosineLR warm(opt, 100, epochs * loader.size(), 1e-5);
///   auto sched = std::make_shared<ms::train::LRSchedule>(
///       opt, [&](std::int64_t s) { return warm.lr_at(s); });
class LRSchedule : public Callback {
 public:
  /// Drives `opt`'s rate by `lr_at`; ValueError when lr_at is empty.
  LRSchedule(optim::Optimizer& opt, std::function<double(std::int64_t)> lr_at);
  void on_train_begin(TrainState& s) override;
  void on_step_end(TrainState& s) override;

 private:
  optim::Optimizer& opt_;
  std::function<double(std::int64_t)> lr_at_;
};

/// The SVG of one or two curves over epochs (used by CurveWriter; public for tests).
std::string curves_svg(const std::vector<double>& loss, const std::vector<double>& accuracy);

/// The SVG of the per-step curves (used by CurveWriter; public for tests): the
/// loss at each of `steps` (thin) and its smoothed form `loss_ema` (thick) on
/// the left axis, `accuracy` measured at `eval_steps` (points, 0-100% on
/// the right axis; none when empty), and `loss_points` (e.g. a validation
/// loss; points on the left axis, labelled `loss_points_name`) at
/// `loss_point_steps`. ValueError when loss or loss_ema is not as long as
/// steps, accuracy not as long as eval_steps, or loss_points not as long as
/// loss_point_steps.
/// Example: `auto svg = ms::train::curves_steps_svg({1, 2}, {2.0, 1.0}, {2.0, 1.5}, {2}, {0.5});`
std::string curves_steps_svg(const std::vector<std::int64_t>& steps,
                             const std::vector<double>& loss, const std::vector<double>& loss_ema,
                             const std::vector<std::int64_t>& eval_steps,
                             const std::vector<double>& accuracy,
                             const std::vector<std::int64_t>& loss_point_steps = {},
                             const std::vector<double>& loss_points = {},
                             const std::string& loss_points_name = "validation loss");

}  // namespace ms::train
