// DataLoader: epoch orders, batch making and the prefetch thread (see ms/data/dataloader.hpp).
#include "ms/data/dataloader.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include "ms/core/error.hpp"
#include "ms/ops/random.hpp"

namespace ms::data {

/// The state of one running epoch. With prefetch > 0 a worker thread makes
/// batches ahead, at most `capacity` beyond the one the consumer waits for;
/// batches are claimed by index (`next_make`), so when the next batch is not
/// claimed yet the consumer makes it itself instead of waiting. Batches are
/// delivered in index order whoever made them.
struct DataLoader::Epoch {
  std::vector<std::int64_t> order;
  std::int64_t num_batches = 0;

  std::size_t capacity = 0;  // 0: no worker, batches are made by next()
  std::mutex mu;
  std::condition_variable not_full, made;
  std::int64_t delivered = 0;           // batches handed to the consumer (under mu)
  std::int64_t next_make = 0;           // the next batch index to claim (under mu)
  std::map<std::int64_t, Batch> ready;  // made, not yet delivered (under mu)
  std::atomic<bool> stop{false};
  bool finished = false;  // the worker has exited (after its last batch or an error)
  std::exception_ptr error;
  std::int64_t error_at = -1;  // the batch whose making failed
  // The worker runs at normal priority until its next batch is made: the
  // consumer waits for it (under mu).
  bool boosted = false;
  std::thread worker;

  void halt() {
    {
      const std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    not_full.notify_all();
    if (worker.joinable()) worker.join();
  }
  ~Epoch() { halt(); }
};

namespace {

/// The sample shape of the batch x: see the class comment of DataLoader.
std::vector<std::int64_t> batch_sample_dims(const Shape& x_shape, bool flatten) {
  std::vector<std::int64_t> dims(x_shape.dims().begin() + 1, x_shape.dims().end());
  if (flatten) {
    std::int64_t n = 1;
    for (std::int64_t d : dims) n *= d;  // a sub-product of x's checked numel
    return {n};
  }
  if (dims.size() == 2) dims.insert(dims.begin(), 1);
  return dims;
}

}  // namespace

DataLoader::DataLoader(const TensorDataset& dataset, DataLoaderOptions options)
    : dataset_(dataset), options_(options) {
  MS_CHECK(dataset_.x().defined(), ValueError, "DataLoader: the dataset is empty (default-made)");
  MS_CHECK(options_.batch_size > 0, ValueError, "DataLoader: batch_size must be > 0, got ",
           options_.batch_size);
  MS_CHECK(options_.prefetch >= 0, ValueError, "DataLoader: prefetch must be >= 0, got ",
           options_.prefetch);
  MS_CHECK(options_.num_shards >= 1, ValueError, "DataLoader: num_shards must be >= 1, got ",
           options_.num_shards);
  MS_CHECK(options_.shard_id >= 0 && options_.shard_id < options_.num_shards, ValueError,
           "DataLoader: shard_id must be in [0, num_shards = ", options_.num_shards, "), got ",
           options_.shard_id);
  if (options_.normalize) {
    const Normalize& nz = *options_.normalize;
    MS_CHECK(std::isfinite(nz.mean) && std::isfinite(nz.std) && nz.std > 0, ValueError,
             "DataLoader: normalize needs a finite mean and a finite std > 0, got mean ", nz.mean,
             " and std ", nz.std);
  }
  const Tensor& x = dataset_.x();
  x_ = x.dtype() == uint8 ? x.contiguous() : x.to(float32);
  const std::vector<std::int64_t> labels = dataset_.y().to_vector<std::int64_t>();
  y_ = empty({static_cast<std::int64_t>(labels.size())}, int32);
  std::int32_t* y = y_.data<std::int32_t>();
  for (std::size_t i = 0; i < labels.size(); ++i) {
    MS_CHECK(labels[i] >= std::numeric_limits<std::int32_t>::min() &&
                 labels[i] <= std::numeric_limits<std::int32_t>::max(),
             ValueError, "DataLoader: label ", labels[i], " at index ", i,
             " does not fit the int32 labels of a batch");
    y[i] = static_cast<std::int32_t>(labels[i]);
  }
  orders_ = EpochOrder(dataset_.size(), options_.shuffle, options_.seed);
}

DataLoader::~DataLoader() { stop_epoch(); }

std::int64_t DataLoader::shard_size() const {
  const std::int64_t n = dataset_.size(), s = options_.num_shards;
  return options_.drop_last ? n / s : n / s + (n % s != 0);
}

std::int64_t DataLoader::size() const {
  const std::int64_t n = shard_size(), b = options_.batch_size;
  return options_.drop_last ? n / b : n / b + (n % b != 0);
}

std::int64_t DataLoader::num_samples() const {
  return options_.drop_last ? size() * options_.batch_size : shard_size();
}

void DataLoader::set_epoch(std::int64_t e) {
  MS_CHECK(e >= 0, ValueError, "DataLoader::set_epoch: epoch must be >= 0, got ", e);
  epoch_ = e;
}

std::vector<std::int64_t> DataLoader::order(std::int64_t e) const {
  std::vector<std::int64_t> all = orders_(e, "DataLoader::order");
  if (options_.num_shards == 1) return all;
  // Shard `shard_id` of the whole order: positions shard_id + k * S, wrapping
  // past N (the padding; with drop_last no position reaches N).
  const std::int64_t n = dataset_.size();
  std::vector<std::int64_t> mine(static_cast<std::size_t>(shard_size()));
  for (std::size_t k = 0; k < mine.size(); ++k)
    mine[k] = all[static_cast<std::size_t>(
        (options_.shard_id + static_cast<std::int64_t>(k) * options_.num_shards) % n)];
  return mine;
}

Batch DataLoader::collate(std::span<const std::int64_t> indices) const {
  const std::int64_t n = dataset_.size();
  for (std::int64_t i : indices)
    MS_CHECK(i >= 0 && i < n, IndexError, "DataLoader::collate: index ", i,
             " is out of range for a dataset of ", n, " samples");
  const auto b = static_cast<std::int64_t>(indices.size());
  std::vector<std::int64_t> dims = batch_sample_dims(x_.shape(), options_.flatten);
  dims.insert(dims.begin(), b);
  Batch batch{empty(Shape(std::move(dims)), float32), empty({b}, int32)};

  // x * scale + shift: uint8 / 255 (if uint8), then (x - mean) / std, folded.
  double scale = x_.dtype() == uint8 ? 1.0 / 255.0 : 1.0, shift = 0.0;
  if (options_.normalize) {
    scale /= options_.normalize->std;
    shift = -options_.normalize->mean / options_.normalize->std;
  }
  const auto fscale = static_cast<float>(scale), fshift = static_cast<float>(shift);
  const std::int64_t row = n > 0 ? x_.numel() / n : 0;
  float* out = batch.x.data<float>();
  std::int32_t* labels = batch.y.data<std::int32_t>();
  const std::int32_t* y = y_.data<std::int32_t>();
  for (std::int64_t k = 0; k < b; ++k) {
    const std::int64_t i = indices[static_cast<std::size_t>(k)];
    float* dst = out + k * row;
    if (x_.dtype() == uint8) {
      const std::uint8_t* src = x_.data<std::uint8_t>() + i * row;
      for (std::int64_t j = 0; j < row; ++j) dst[j] = static_cast<float>(src[j]) * fscale + fshift;
    } else {
      const float* src = x_.data<float>() + i * row;
      for (std::int64_t j = 0; j < row; ++j) dst[j] = src[j] * fscale + fshift;
    }
    labels[k] = y[i];
  }
  return batch;
}

void DataLoader::stop_epoch() {
  if (running_) running_->halt();
  running_.reset();
}

namespace {

/// Puts `thread` in the idle scheduling class (Linux; elsewhere nothing): it
/// then runs only on a core nothing else wants, so making batches ahead never
/// preempts the training step's threads. With `idle` false, back to the
/// normal class: the consumer waits for the batch it is making, and with
/// another program busy on every core an idle thread would hardly run.
void set_idle_priority(std::thread::native_handle_type thread, bool idle) noexcept {
#if defined(__linux__) && defined(SCHED_IDLE)
  sched_param param{};
  param.sched_priority = 0;
  (void)pthread_setschedparam(thread, idle ? SCHED_IDLE : SCHED_OTHER, &param);  // best effort
#else
  (void)thread;
  (void)idle;
#endif
}

}  // namespace

Batch DataLoader::make_batch(const Epoch& ep, std::int64_t b) const {
  const std::int64_t bs = options_.batch_size, n = static_cast<std::int64_t>(ep.order.size());
  const std::int64_t start = b * bs;
  return collate(std::span<const std::int64_t>(ep.order).subspan(
      static_cast<std::size_t>(start), static_cast<std::size_t>(std::min(bs, n - start))));
}

void DataLoader::prefetch_loop(Epoch& e) const {
  set_idle_priority(pthread_self(), true);
  std::unique_lock<std::mutex> lock(e.mu);
  for (;;) {
    e.not_full.wait(lock, [&e] {
      return e.stop || e.next_make >= e.num_batches ||
             e.next_make - e.delivered < static_cast<std::int64_t>(e.capacity);
    });
    if (e.stop || e.next_make >= e.num_batches) break;
    const std::int64_t b = e.next_make++;
    lock.unlock();
    std::optional<Batch> batch;
    std::exception_ptr error;
    try {
      batch = make_batch(e, b);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) {
      if (!e.error || b < e.error_at) {  // the first failing batch is the one reported
        e.error = error;
        e.error_at = b;
      }
      break;
    }
    e.ready.emplace(b, std::move(*batch));
    if (e.boosted) {
      set_idle_priority(pthread_self(), true);
      e.boosted = false;
    }
    e.made.notify_one();
  }
  e.finished = true;
  lock.unlock();
  e.made.notify_one();
}

DataLoader::Iterator DataLoader::begin() {
  stop_epoch();
  ++generation_;
  auto ep = std::make_unique<Epoch>();
  ep->order = order(epoch_);
  ++epoch_;
  ep->num_batches = size();
  ep->capacity = static_cast<std::size_t>(options_.prefetch);
  if (ep->capacity > 0 && ep->num_batches > 0) {
    Epoch* e = ep.get();
    ep->worker = std::thread([this, e] { prefetch_loop(*e); });
  }
  running_ = std::move(ep);
  return Iterator(this, generation_);
}

std::optional<Batch> DataLoader::next(std::uint64_t generation) {
  MS_CHECK(generation == generation_ && running_, ValueError,
           "DataLoader: this iterator's epoch was stopped by a later begin(); iterate over one "
           "epoch at a time");
  Epoch& ep = *running_;
  std::unique_lock<std::mutex> lock(ep.mu);
  const std::int64_t b = ep.delivered;
  if (b == ep.num_batches) {
    lock.unlock();
    if (ep.worker.joinable()) ep.worker.join();  // it has made its last batch
    return std::nullopt;
  }
  for (;;) {
    if (auto it = ep.ready.find(b); it != ep.ready.end()) {
      Batch batch = std::move(it->second);
      ep.ready.erase(it);
      ++ep.delivered;
      lock.unlock();
      ep.not_full.notify_one();
      return batch;
    }
    // Batches before a failure were delivered first; now the failure itself.
    if (ep.error && ep.error_at == b) std::rethrow_exception(ep.error);
    if (ep.next_make == b) break;  // nobody makes it yet: made here, below
    MS_CHECK(!ep.finished, ValueError, "DataLoader: the prefetch thread stopped after ",
             ep.delivered, " of ", ep.num_batches, " batches");
    if (!ep.boosted &&
        ep.worker.joinable()) {  // it makes batch b now: at normal priority until it is made
      set_idle_priority(ep.worker.native_handle(), false);
      ep.boosted = true;
    }
    ep.made.wait(lock);
  }
  ++ep.next_make;
  lock.unlock();
  Batch batch;
  try {
    batch = make_batch(ep, b);
  } catch (...) {
    const std::lock_guard<std::mutex> relock(ep.mu);
    if (!ep.error || b < ep.error_at) {
      ep.error = std::current_exception();
      ep.error_at = b;
    }
    throw;
  }
  lock.lock();
  ++ep.delivered;
  lock.unlock();
  ep.not_full.notify_one();
  return batch;
}

DataLoader::Iterator::Iterator(DataLoader* loader, std::uint64_t generation)
    : loader_(loader), generation_(generation), done_(false) {
  ++*this;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  MS_CHECK(loader_ != nullptr, ValueError, "DataLoader::Iterator: not made by DataLoader::begin()");
  std::optional<Batch> batch = loader_->next(generation_);
  if (batch) {
    current_ = std::move(*batch);
  } else {
    current_ = Batch{};
    done_ = true;
  }
  return *this;
}

}  // namespace ms::data
