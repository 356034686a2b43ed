// The training loop and callbacks of ms/train/fit.hpp.
#include "ms/train/fit.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <numbers>
#include <sstream>

#include "ms/core/error.hpp"
#include "ms/core/warning.hpp"
#include "ms/io/file.hpp"

namespace ms::train {
namespace detail {

FitResult fit_loop(const std::function<double(const Tensor&, const Tensor&)>& step,
                   data::DataLoader& loader, const FitOptions& o) {
  MS_CHECK(o.epochs >= 0, ValueError, "fit: epochs must be >= 0, got ", o.epochs);
  MS_CHECK(o.initial_epoch >= 0 && o.initial_epoch <= o.epochs, ValueError,
           "fit: initial_epoch must be in [0, epochs = ", o.epochs, "], got ", o.initial_epoch);
  MS_CHECK(o.initial_step >= 0 && o.initial_step <= loader.size(), ValueError,
           "fit: initial_step must be in [0, ", loader.size(), "], got ", o.initial_step);
  for (const auto& cb : o.callbacks) MS_CHECK(cb != nullptr, ValueError, "fit: a callback is null");
  MS_CHECK(o.world_size >= 1 && o.rank >= 0 && o.rank < o.world_size, ValueError,
           "fit: rank must be in [0, world_size) and world_size >= 1, got rank ", o.rank,
           " and world_size ", o.world_size);
  MS_CHECK(o.initial_world_size >= 0, ValueError, "fit: initial_world_size must be >= 0, got ",
           o.initial_world_size);
  // Step k of p ranks with batch b covers positions k p b to (k + 1) p b - 1 of
  // the epoch's order, so a step count saved with one world size names another
  // position with another: refuse it rather than resume at a wrong place.
  MS_CHECK(o.initial_step == 0 || o.initial_world_size == 0 || o.initial_world_size == o.world_size,
           ValueError, "fit: the mid-epoch position initial_step = ", o.initial_step,
           " was counted with initial_world_size = ", o.initial_world_size,
           " and resumes exactly only with that world size, got world_size = ", o.world_size,
           "; resume from an epoch-end checkpoint (initial_step = 0) or with ",
           o.initial_world_size, " ranks");
  TrainState s;
  s.rank = o.rank;
  s.world_size = o.world_size;
  s.epochs = o.epochs;
  s.steps_per_epoch = loader.size();
  s.global_step = o.initial_epoch * s.steps_per_epoch + o.initial_step;
  FitResult res;
  for (auto& cb : o.callbacks) cb->on_train_begin(s);
  for (std::int64_t e = o.initial_epoch; e < o.epochs && !s.stop; ++e) {
    s.epoch = e;
    s.step = 0;
    s.samples = 0;
    s.epoch_loss = 0.0;
    s.metrics.clear();
    loader.set_epoch(e);
    for (auto& cb : o.callbacks) cb->on_epoch_begin(s);
    const auto t0 = std::chrono::steady_clock::now();
    const std::int64_t skip = e == o.initial_epoch ? o.initial_step : 0;
    double sum = 0.0;
    std::int64_t counted = 0;
    for (auto& batch : loader) {
      if (s.step < skip) {  // resumed mid-epoch: these batches were trained on
        ++s.step;
        continue;
      }
      s.loss = step(batch.x, batch.y);
      ++s.step;
      ++s.global_step;
      ++counted;
      s.samples += batch.x.dim(0) * s.world_size;
      sum += s.loss;
      s.epoch_loss = sum / static_cast<double>(counted);
      s.epoch_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      res.step_loss.push_back(s.loss);
      s.step_metrics.clear();
      for (auto& cb : o.callbacks) cb->on_step_end(s);
      if (s.stop) break;
    }
    s.epoch_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto& cb : o.callbacks) cb->on_epoch_end(s);
    res.epoch_loss.push_back(s.epoch_loss);
    res.epoch_seconds.push_back(s.epoch_seconds);
    res.epoch_metrics.push_back(s.metrics);
  }
  for (auto& cb : o.callbacks) cb->on_train_end(s);
  return res;
}

}  // namespace detail

namespace {

std::string fmt_time(double sec) {
  if (!std::isfinite(sec) || sec < 0) return "--:--";
  const auto t = static_cast<std::int64_t>(sec + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  return buf;
}

std::string line_of(const TrainState& s) {
  const double rate = s.epoch_seconds > 0 ? static_cast<double>(s.samples) / s.epoch_seconds : 0;
  const double per_step = s.step > 0 ? s.epoch_seconds / static_cast<double>(s.step) : 0;
  const double eta = per_step * static_cast<double>(s.steps_per_epoch - s.step);
  std::ostringstream os;
  os << "epoch " << s.epoch + 1 << "/" << s.epochs << "  step " << s.step << "/"
     << s.steps_per_epoch << "  loss " << std::fixed << std::setprecision(4) << s.loss << "  "
     << std::setprecision(0) << rate << " samples/s  ETA " << fmt_time(eta);
  return os.str();
}

}  // namespace

ProgressBar::ProgressBar(std::int64_t every) : every_(every), tty_(::isatty(1) != 0) {
  MS_CHECK(every > 0, ValueError, "ProgressBar: every must be > 0, got ", every);
}

void ProgressBar::on_epoch_begin(TrainState&) { last_draw_ = {}; }

void ProgressBar::on_step_end(TrainState& s) {
  if (s.rank != 0) return;
  if (tty_) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(100) && s.step != s.steps_per_epoch) return;
    last_draw_ = now;
    const int width = 24;
    const auto done =
        s.steps_per_epoch > 0 ? static_cast<int>(width * s.step / s.steps_per_epoch) : width;
    std::cout << "\r[" << std::string(static_cast<std::size_t>(done), '#')
              << std::string(static_cast<std::size_t>(width - done), '.') << "] " << line_of(s)
              << "\033[K" << std::flush;
  } else if (s.step % every_ == 0) {
    std::cout << line_of(s) << "\n" << std::flush;
  }
}

void ProgressBar::on_epoch_end(TrainState& s) {
  if (s.rank != 0) return;
  if (tty_) std::cout << "\r\033[K";
  std::ostringstream os;
  os << "epoch " << s.epoch + 1 << "/" << s.epochs << " done: mean loss " << std::fixed
     << std::setprecision(4) << s.epoch_loss << ", " << std::setprecision(2) << s.epoch_seconds
     << " s, " << std::setprecision(0)
     << (s.epoch_seconds > 0 ? static_cast<double>(s.samples) / s.epoch_seconds : 0.0)
     << " samples/s";
  for (const auto& [k, v] : s.metrics) os << ", " << k << " " << std::setprecision(4) << v;
  std::cout << os.str() << "\n" << std::flush;
}

LossMonitor::LossMonitor(std::int64_t every, bool print) : every_(every), print_(print) {
  MS_CHECK(every > 0, ValueError, "LossMonitor: per_print_times must be > 0, got ", every);
}

void LossMonitor::on_step_end(TrainState& s) {
  MS_CHECK(std::isfinite(s.loss), ValueError, "LossMonitor: the loss is ", s.loss, " at epoch ",
           s.epoch + 1, " step ", s.step, "; training stops");
  if (print_ && s.rank == 0 && s.step % every_ == 0)
    std::cout << "epoch: " << s.epoch + 1 << " step: " << s.step << ", loss is " << s.loss << "\n";
}

Evaluate::Evaluate(std::function<double()> eval, std::string name, bool percent,
                   std::int64_t every_steps)
    : eval_(std::move(eval)), name_(std::move(name)), percent_(percent), every_(every_steps) {
  MS_CHECK(static_cast<bool>(eval_), ValueError, "Evaluate: empty function");
  MS_CHECK(every_steps >= 0, ValueError,
           "Evaluate: every_steps must be >= 0 (0: at epoch ends only), got ", every_steps);
}

void Evaluate::on_step_end(TrainState& s) {
  if (s.rank != 0 || every_ == 0 || s.global_step % every_ != 0) return;
  last_value_ = eval_();
  ++calls_;
  last_step_ = s.global_step;
  s.step_metrics[name_] = last_value_;
}

void Evaluate::on_epoch_end(TrainState& s) {
  if (s.rank != 0) return;
  double v = last_value_;
  if (last_step_ != s.global_step) {  // not evaluated after this step already
    v = eval_();
    ++calls_;
  }
  s.metrics[name_] = v;
  if (percent_) {
    std::string label = name_;
    std::replace(label.begin(), label.end(), '_', ' ');
    std::cout << "epoch " << s.epoch + 1 << "/" << s.epochs << " " << label << ": " << std::fixed
              << std::setprecision(2) << 100.0 * v << "%\n"
              << std::flush;
  }
}

Checkpoint::Checkpoint(SaveFn save, std::string dir, std::string prefix, std::int64_t every,
                       std::int64_t keep)
    : save_(std::move(save)),
      dir_(std::move(dir)),
      prefix_(std::move(prefix)),
      every_(every),
      keep_(keep) {
  MS_CHECK(static_cast<bool>(save_), ValueError, "Checkpoint: empty save function");
  MS_CHECK(every > 0, ValueError, "Checkpoint: every_steps must be > 0, got ", every);
  MS_CHECK(keep > 0, ValueError, "Checkpoint: keep must be > 0, got ", keep);
}

void Checkpoint::save(const TrainState& s) {
  if (s.global_step == last_saved_) return;
  const std::shared_ptr<io::FileSystem> fs = io::file_system();
  try {
    fs->create_directories(dir_);
  } catch (const std::exception& e) {
    ::ms::detail::raise<ValueError>("Checkpoint: cannot create the directory '", dir_,
                                    "': ", e.what());
  }
  const std::string path =
      dir_ + "/" + prefix_ + "-" + std::to_string(s.global_step) + ".safetensors";
  save_(path, s);
  last_saved_ = s.global_step;
  kept_.push_back(path);
  while (static_cast<std::int64_t>(kept_.size()) > keep_) {
    try {
      (void)fs->remove(kept_.front());
    } catch (const std::exception&) {  // best effort, as before: an old file may stay
    }
    kept_.erase(kept_.begin());
  }
}

void Checkpoint::on_step_end(TrainState& s) {
  if (s.rank == 0 && s.global_step % every_ == 0) save(s);
}

void Checkpoint::on_train_end(TrainState& s) {
  if (s.rank == 0 && s.global_step > 0) save(s);
}

CurveWriter::CurveWriter(std::string stem, CurveWriterOptions options)
    : stem_(std::move(stem)), options_(options) {
  MS_CHECK(!stem_.empty(), ValueError, "CurveWriter: empty file stem");
  MS_CHECK(options_.ema_decay >= 0.0 && options_.ema_decay < 1.0, ValueError,
           "CurveWriter: ema_decay must be in [0, 1), got ", options_.ema_decay);
}

double CurveWriter::loss_ema() const {
  return ema_weight_ > 0 ? ema_sum_ / ema_weight_ : std::numeric_limits<double>::quiet_NaN();
}

void CurveWriter::on_step_end(TrainState& s) {
  if (s.rank != 0 || !options_.steps) return;
  // m_n = b m_{n-1} + (1 - b) l_n and its weight 1 - b^n = b (1 - b^(n-1)) + (1 - b).
  const double b = options_.ema_decay;
  ema_sum_ = b * ema_sum_ + (1.0 - b) * s.loss;
  ema_weight_ = b * ema_weight_ + (1.0 - b);
  rows_.push_back({s.global_step, s.epoch + 1, s.loss, loss_ema(), s.step_metrics});
  if (!s.step_metrics.empty()) write_steps();
}

void CurveWriter::on_train_end(TrainState& s) {
  if (s.rank == 0 && options_.steps && !rows_.empty()) write_steps();
}

void CurveWriter::write_steps() const {
  std::vector<std::string> keys;
  for (const StepRow& r : rows_)
    for (const auto& [k, v] : r.metrics)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  std::ostringstream csv;
  csv << "step,epoch,loss,loss_ema";
  for (const auto& k : keys) csv << "," << k;
  csv << "\n" << std::setprecision(8);
  for (const StepRow& r : rows_) {
    csv << r.step << "," << r.epoch << "," << r.loss << "," << r.loss_ema;
    for (const auto& k : keys) {
      csv << ",";
      if (auto it = r.metrics.find(k); it != r.metrics.end()) csv << it->second;
    }
    csv << "\n";
  }
  const std::string c = csv.str();
  io::write_file_atomic(stem_ + "_steps.csv",
                        std::span(reinterpret_cast<const std::uint8_t*>(c.data()), c.size()));
  std::vector<std::int64_t> steps, eval_steps, point_steps;
  std::vector<double> loss, ema, acc, points;
  for (const StepRow& r : rows_) {
    steps.push_back(r.step);
    loss.push_back(r.loss);
    ema.push_back(r.loss_ema);
    if (auto it = r.metrics.find("test_accuracy"); it != r.metrics.end()) {
      eval_steps.push_back(r.step);
      acc.push_back(it->second);
    }
    if (auto it = r.metrics.find(options_.loss_metric);
        !options_.loss_metric.empty() && it != r.metrics.end()) {
      point_steps.push_back(r.step);
      points.push_back(it->second);
    }
  }
  const std::string svg = curves_steps_svg(steps, loss, ema, eval_steps, acc, point_steps, points,
                                           options_.loss_metric);
  io::write_file_atomic(stem_ + "_steps.svg",
                        std::span(reinterpret_cast<const std::uint8_t*>(svg.data()), svg.size()));
}

void CurveWriter::on_epoch_end(TrainState& s) {
  if (s.rank != 0) return;
  loss_.push_back(s.epoch_loss);
  metrics_.push_back(s.metrics);
  seconds_.push_back(s.epoch_seconds);
  std::vector<std::string> keys;
  for (const auto& m : metrics_)
    for (const auto& [k, v] : m)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  std::ostringstream csv;
  csv << "epoch,loss,seconds";
  for (const auto& k : keys) csv << "," << k;
  csv << "\n" << std::setprecision(8);
  std::vector<double> acc;
  for (std::size_t i = 0; i < loss_.size(); ++i) {
    csv << i + 1 << "," << loss_[i] << "," << seconds_[i];
    for (const auto& k : keys) {
      auto it = metrics_[i].find(k);
      csv << ",";
      if (it != metrics_[i].end()) csv << it->second;
    }
    csv << "\n";
    auto it = metrics_[i].find("test_accuracy");
    if (it != metrics_[i].end()) acc.push_back(it->second);
  }
  const std::string c = csv.str();
  io::write_file_atomic(stem_ + ".csv",
                        std::span(reinterpret_cast<const std::uint8_t*>(c.data()), c.size()));
  const std::string svg =
      curves_svg(loss_, acc.size() == loss_.size() ? acc : std::vector<double>{});
  io::write_file_atomic(stem_ + ".svg",
                        std::span(reinterpret_cast<const std::uint8_t*>(svg.data()), svg.size()));
  if (options_.steps && !rows_.empty()) write_steps();
}

// ------------------------------------------------------------------ CosineSchedule

namespace {
constexpr const char* kSchedKind = "lr_schedule";
constexpr const char* kSchedEpochs = "lr_schedule_epochs";
constexpr const char* kSchedSteps = "lr_schedule_steps";

std::int64_t meta_count(const std::map<std::string, std::string>& m, const char* key) {
  const std::string& s = m.at(key);
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  MS_CHECK(ec == std::errc() && p == s.data() + s.size() && v >= 0, ValueError,
           "CosineSchedule::resume_from: checkpoint metadata '", key, "' = '", s,
           "' is not a non-negative integer");
  return v;
}

double cosine_lr(double base, std::int64_t step, std::int64_t total) {
  return optim::cosine_lr(base, 0.0, step, total);
}
}  // namespace

CosineSchedule::CosineSchedule(optim::Optimizer& opt, double base_lr, std::int64_t epochs,
                               std::int64_t steps_per_epoch)
    : opt_(opt), base_(base_lr), epochs_(epochs) {
  MS_CHECK(std::isfinite(base_lr) && base_lr >= 0.0, ValueError,
           "CosineSchedule: base_lr must be finite and >= 0, got ", base_lr);
  MS_CHECK(epochs >= 0, ValueError, "CosineSchedule: epochs must be >= 0, got ", epochs);
  MS_CHECK(steps_per_epoch >= 1, ValueError, "CosineSchedule: steps_per_epoch must be >= 1, got ",
           steps_per_epoch);
  MS_CHECK(epochs <= std::numeric_limits<std::int64_t>::max() / steps_per_epoch, ValueError,
           "CosineSchedule: ", epochs, " epochs of ", steps_per_epoch, " steps overflow int64");
  total_ = std::max<std::int64_t>(1, epochs * steps_per_epoch);
}

double CosineSchedule::lr_at(std::int64_t global_step) const {
  return cosine_lr(base_, global_step, total_);
}

void CosineSchedule::on_train_begin(TrainState& s) { opt_.set_lr(lr_at(s.global_step)); }
void CosineSchedule::on_step_end(TrainState& s) { opt_.set_lr(lr_at(s.global_step)); }

void CosineSchedule::save_to(std::map<std::string, std::string>& extra) const {
  extra[kSchedKind] = "cosine";
  extra[kSchedEpochs] = std::to_string(epochs_);
  extra[kSchedSteps] = std::to_string(total_);
}

std::string CosineSchedule::resume_from(const std::map<std::string, std::string>& extra,
                                        std::int64_t global_step) const {
  std::ostringstream w;
  w << "resume: ";
  auto kind = extra.find(kSchedKind);
  if (kind == extra.end() || !extra.count(kSchedEpochs) || !extra.count(kSchedSteps)) {
    w << "the checkpoint does not record a learning-rate schedule (saved with a constant rate, "
         "or by an older version), so its length cannot be checked; the cosine schedule now "
         "spans "
      << epochs_ << " epochs (" << total_ << " steps), and the rate at global step " << global_step
      << " is " << lr_at(global_step);
    ms::warn(w.str());
    return w.str();
  }
  MS_CHECK(kind->second == "cosine", ValueError,
           "CosineSchedule::resume_from: checkpoint "
           "metadata 'lr_schedule' = '",
           kind->second, "' is not \"cosine\"");
  const std::int64_t epochs = meta_count(extra, kSchedEpochs);
  const std::int64_t steps = meta_count(extra, kSchedSteps);
  MS_CHECK(steps >= 1, ValueError,
           "CosineSchedule::resume_from: checkpoint metadata 'lr_schedule_steps' = 0 (at least 1)");
  if (epochs == epochs_ && steps == total_) return {};
  w << "the checkpoint's cosine learning-rate schedule spans " << epochs << " epochs (" << steps
    << " steps), this run's spans " << epochs_ << " epochs (" << total_
    << " steps); the new length is used: at global step " << global_step << " the rate is "
    << lr_at(global_step) << " instead of " << cosine_lr(base_, global_step, steps)
    << ", and every later rate follows the new length (resume with " << epochs
    << " epochs to continue the saved schedule)";
  ms::warn(w.str());
  return w.str();
}

LRSchedule::LRSchedule(optim::Optimizer& opt, std::function<double(std::int64_t)> lr_at)
    : opt_(opt), lr_at_(std::move(lr_at)) {
  MS_CHECK(static_cast<bool>(lr_at_), ValueError, "LRSchedule: lr_at is empty");
}
void LRSchedule::on_train_begin(TrainState& s) { opt_.set_lr(lr_at_(s.global_step)); }
void LRSchedule::on_step_end(TrainState& s) { opt_.set_lr(lr_at_(s.global_step)); }

namespace {

// The plot both curve pictures share: 640 x 360 with margins for the scales.
constexpr double kSvgW = 640, kSvgH = 360, kSvgL = 60, kSvgR = 60, kSvgT = 30, kSvgB = 40;
constexpr double kPlotW = kSvgW - kSvgL - kSvgR, kPlotH = kSvgH - kSvgT - kSvgB;

// The top of the loss scale: the largest finite loss (1 when there is none).
double loss_scale_top(const std::vector<double>& loss) {
  double lmax = 0;
  for (double v : loss)
    if (std::isfinite(v)) lmax = std::max(lmax, v);
  return lmax <= 0 ? 1 : lmax;
}

// Opens the picture: the frame, `title`, the x axis' `xlabel`, and five grid
// lines with the loss scale on the left and, with `accuracy`, percent on the right.
void svg_open(std::ostringstream& os, const char* title, const char* xlabel, double lmax,
              bool accuracy) {
  os << std::fixed << std::setprecision(1);
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kSvgW << "\" height=\"" << kSvgH
     << "\" viewBox=\"0 0 " << kSvgW << " " << kSvgH
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<rect x=\"" << kSvgL << "\" y=\"" << kSvgT << "\" width=\"" << kPlotW << "\" height=\""
     << kPlotH << "\" fill=\"none\" stroke=\"#888\"/>\n"
     << "<text x=\"" << kSvgW / 2 << "\" y=\"18\" text-anchor=\"middle\">" << title << "</text>\n"
     << "<text x=\"" << kSvgW / 2 << "\" y=\"" << kSvgH - 8 << "\" text-anchor=\"middle\">"
     << xlabel << "</text>\n";
  for (int k = 0; k <= 4; ++k) {
    const double y = kSvgT + kPlotH * k / 4.0;
    os << "<line x1=\"" << kSvgL << "\" y1=\"" << y << "\" x2=\"" << kSvgL + kPlotW << "\" y2=\""
       << y << "\" stroke=\"#eee\"/>\n"
       << "<text x=\"" << kSvgL - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\" fill=\"#c33\">"
       << std::setprecision(3) << lmax * (1 - k / 4.0) << std::setprecision(1) << "</text>\n";
    if (accuracy)
      os << "<text x=\"" << kSvgL + kPlotW + 6 << "\" y=\"" << y + 4 << "\" fill=\"#36c\">"
         << 100.0 * (1 - k / 4.0) << "%</text>\n";
  }
}

}  // namespace

std::string curves_svg(const std::vector<double>& loss, const std::vector<double>& accuracy) {
  const double L = kSvgL, T = kSvgT, pw = kPlotW, ph = kPlotH;
  const std::size_t n = loss.size();
  const double lmax = loss_scale_top(loss);
  auto x_of = [&](std::size_t i) {
    return L + (n <= 1 ? pw / 2 : pw * static_cast<double>(i) / static_cast<double>(n - 1));
  };
  std::ostringstream os;
  svg_open(os, "training curves", "epoch", lmax, !accuracy.empty());
  for (std::size_t i = 0; i < n; ++i)
    os << "<text x=\"" << x_of(i) << "\" y=\"" << T + ph + 16 << "\" text-anchor=\"middle\">"
       << i + 1 << "</text>\n";
  auto poly = [&](const std::vector<double>& v, double scale, const char* color, const char* name) {
    os << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double val = std::isfinite(v[i]) ? std::clamp(v[i] / scale, 0.0, 1.0) : 0.0;
      os << x_of(i) << "," << T + ph * (1 - val) << " ";
    }
    os << "\"/>\n";
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double val = std::isfinite(v[i]) ? std::clamp(v[i] / scale, 0.0, 1.0) : 0.0;
      os << "<circle cx=\"" << x_of(i) << "\" cy=\"" << T + ph * (1 - val) << "\" r=\"3\" fill=\""
         << color << "\"><title>" << name << " " << v[i] << "</title></circle>\n";
    }
  };
  poly(loss, lmax, "#c33", "loss");
  os << "<text x=\"" << L + 8 << "\" y=\"" << T + 16 << "\" fill=\"#c33\">loss</text>\n";
  if (!accuracy.empty()) {
    poly(accuracy, 1.0, "#36c", "test accuracy");
    os << "<text x=\"" << L + 8 << "\" y=\"" << T + 32 << "\" fill=\"#36c\">test accuracy</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

namespace {

// The length checks of curves_steps_svg.
void check_step_curves(std::size_t steps, std::size_t loss, std::size_t loss_ema,
                       std::size_t eval_steps, std::size_t accuracy, std::size_t point_steps,
                       std::size_t points) {
  MS_CHECK(loss == steps && loss_ema == steps, ValueError,
           "curves_steps_svg: loss and loss_ema must hold one value per step (", steps, "), got ",
           loss, " and ", loss_ema);
  MS_CHECK(accuracy == eval_steps, ValueError,
           "curves_steps_svg: accuracy must hold one value per eval step (", eval_steps, "), got ",
           accuracy);
  MS_CHECK(points == point_steps, ValueError,
           "curves_steps_svg: loss_points must hold one value per step of loss_point_steps (",
           point_steps, "), got ", points);
}

}  // namespace

std::string curves_steps_svg(const std::vector<std::int64_t>& steps,
                             const std::vector<double>& loss, const std::vector<double>& loss_ema,
                             const std::vector<std::int64_t>& eval_steps,
                             const std::vector<double>& accuracy,
                             const std::vector<std::int64_t>& loss_point_steps,
                             const std::vector<double>& loss_points,
                             const std::string& loss_points_name) {
  check_step_curves(steps.size(), loss.size(), loss_ema.size(), eval_steps.size(), accuracy.size(),
                    loss_point_steps.size(), loss_points.size());
  const double L = kSvgL, T = kSvgT, pw = kPlotW, ph = kPlotH;
  const double lmax = loss_scale_top(loss);
  const double first = steps.empty() ? 0.0 : static_cast<double>(steps.front());
  const double last = steps.empty() ? 1.0 : static_cast<double>(steps.back());
  auto x_of = [&](std::int64_t step) {
    return last <= first ? L + pw / 2
                         : L + pw * (static_cast<double>(step) - first) / (last - first);
  };
  auto y_of = [&](double v, double scale) {
    return T + ph * (1 - (std::isfinite(v) ? std::clamp(v / scale, 0.0, 1.0) : 0.0));
  };
  std::ostringstream os;
  svg_open(os, "training curves per step", "step", lmax, !accuracy.empty());
  for (int k = 0; k <= 4; ++k) {
    // Step ticks at 0, 1/4, ..., 1 of the range, rounded to whole steps.
    const auto tick = static_cast<std::int64_t>(std::llround(first + (last - first) * k / 4.0));
    if (!steps.empty())
      os << "<text x=\"" << x_of(tick) << "\" y=\"" << T + ph + 16 << "\" text-anchor=\"middle\">"
         << tick << "</text>\n";
  }
  auto poly = [&](const std::vector<double>& v, const char* color, double width) {
    os << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"" << width
       << "\" points=\"";
    for (std::size_t i = 0; i < v.size(); ++i)
      os << x_of(steps[i]) << "," << y_of(v[i], lmax) << " ";
    os << "\"/>\n";
  };
  poly(loss, "#e9a0a0", 1);
  poly(loss_ema, "#c33", 2);
  for (std::size_t i = 0; i < accuracy.size(); ++i)
    os << "<circle cx=\"" << x_of(eval_steps[i]) << "\" cy=\"" << y_of(accuracy[i], 1.0)
       << "\" r=\"3\" fill=\"#36c\"><title>step " << eval_steps[i] << " test accuracy "
       << std::setprecision(4) << accuracy[i] << std::setprecision(1) << "</title></circle>\n";
  for (std::size_t i = 0; i < loss_points.size(); ++i)
    os << "<rect x=\"" << x_of(loss_point_steps[i]) - 3 << "\" y=\""
       << y_of(loss_points[i], lmax) - 3 << "\" width=\"6\" height=\"6\" fill=\"#393\"><title>step "
       << loss_point_steps[i] << " " << loss_points_name << " " << std::setprecision(4)
       << loss_points[i] << std::setprecision(1) << "</title></rect>\n";
  if (!loss_points.empty())
    os << "<text x=\"" << L + 8 << "\" y=\"" << T + 48 << "\" fill=\"#393\">" << loss_points_name
       << "</text>\n";
  os << "<text x=\"" << L + 8 << "\" y=\"" << T + 16 << "\" fill=\"#c33\">loss (smoothed)</text>\n";
  if (!accuracy.empty())
    os << "<text x=\"" << L + 8 << "\" y=\"" << T + 32 << "\" fill=\"#36c\">test accuracy</text>\n";
  os << "</svg>\n";
  return os.str();
}

}  // namespace ms::train
