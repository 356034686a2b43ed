// ms/data/dataloader.hpp — batches of a TensorDataset, shuffled and prefetched.
//
// Stage: data (feeds the train stage). Each epoch (each `begin()`) visits every
// sample once, in an order drawn from an ms::Generator seeded with `seed`: the
// order of epoch e is the (e+1)-th ms::randperm drawn from `Generator(seed)`, so
// it depends only on the seed and the epoch number (`set_epoch(e)` resumes).
// A background thread makes the batches (gather, uint8 -> float32, normalize)
// up to `prefetch` ahead, so the training step does not wait on decoding; an
// exception on that thread is rethrown by the iterator. That thread runs in
// Linux's idle scheduling class: it takes only cores nothing else wants, so
// it never preempts the threads of a training step when every core computes.
// When the next batch is not made or being made yet, the iterator makes it
// on the caller's thread instead of waiting; when that thread is making it,
// the iterator raises it to normal priority until the batch is made (with
// another program busy on every core an idle thread would hardly run).
// The batches and their order are the same with and without prefetching.
//
// Sharding (data-parallel training, MindSpore's `num_shards` / `shard_id`,
// PyTorch's DistributedSampler): with `num_shards = S` each loader reads shard
// `shard_id` of every epoch's order, the samples at positions shard_id,
// shard_id + S, shard_id + 2S, ... Every rank draws the same order (same
// seed), so the S shards together visit every sample of the epoch, and every
// shard holds ceil(N / S) samples: the order is padded by wrapping to its
// start, so the last S*ceil(N/S) - N samples (at most S - 1) are visited twice
// and every rank runs the same number of steps with the same batch sizes.
// With `drop_last` the order is cut to S*floor(N/S) samples instead (at most
// S - 1 are left out of the epoch), then each shard drops its short last batch.
// The data stage knows nothing of MPI: pass the rank and the world size, e.g.
// `.num_shards = ms::parallel::world_size(), .shard_id = ms::parallel::rank()`.
//
//   ms::data::FashionMNIST train;
//   ms::data::DataLoader loader(train, {.batch_size = 64, .seed = 1,
//                                       .normalize = ms::data::Normalize{0.2860, 0.3530}});
//   for (int epoch = 0; epoch < 3; ++epoch)
//     for (auto& [x, y] : loader)        // x float32 [64, 1, 28, 28], y int32 [64]
//       train_step(x, y);
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/data/dataset.hpp"
#include "ms/data/epoch_order.hpp"

namespace ms::data {

/// x -> (x - mean) / std, applied after uint8 samples are scaled to [0, 1].
/// Fashion-MNIST's training set has mean 0.2860 and std 0.3530.
struct Normalize {
  /// Subtracted first.
  double mean = 0.0;
  /// Divided by after (> 0).
  double std = 1.0;
};

/// Options of a DataLoader (designated initializers: `{.batch_size = 128, .shuffle = false}`).
struct DataLoaderOptions {
  /// Samples per batch (> 0).
  std::int64_t batch_size = 64;
  /// Visit the samples in a new random order each epoch (else in index order).
  bool shuffle = true;
  /// Drop the last batch when it has fewer than batch_size samples (and, when
  /// sharded, the samples past S*floor(N/S) instead of padding).
  bool drop_last = false;
  /// Seed of the ms::Generator the orders are drawn from.
  std::uint64_t seed = 0;
  /// Applied to every element of x (std > 0, both finite); none by default.
  std::optional<Normalize> normalize = std::nullopt;
  /// x as [B, prod(sample shape)] (e.g. [B, 784]) instead of [B, 1, H, W].
  bool flatten = false;
  /// Batches made ahead on a background thread (0: made on the caller's thread).
  std::int64_t prefetch = 2;
  /// The number of shards the epoch's order is split into (>= 1): the ranks of
  /// a data-parallel run (see the header comment).
  std::int64_t num_shards = 1;
  /// The shard this loader reads, in [0, num_shards).
  std::int64_t shard_id = 0;
};

/// One batch: `x` float32 [B, ...], `y` int32 [B]. Binds as `auto& [x, y]`.
struct Batch {
  /// The inputs, float32 [B, ...].
  Tensor x;
  /// The labels, int32 [B].
  Tensor y;
};

/// Iterates over a TensorDataset in batches (see the header comment).
/// The shape of x: uint8 samples are divided by 255 (floating samples are taken
/// as they are), then normalized, and laid out as [B, 1, H, W] for samples of
/// rank 2 (images get a channel axis), [B, prod(sample shape)] with `flatten`,
/// else [B, sample shape...]. The loader keeps the dataset's tensors alive.
/// Only one epoch runs at a time: `begin()` stops the previous one (its
/// iterators then raise ms::ValueError), and so does destroying the loader.
/// Example: `for (auto& batch : loader) loss = step(batch.x, batch.y);`
class DataLoader {
 public:
  /// The options type, as `ms::data::DataLoader::Options`.
  using Options = DataLoaderOptions;

  /// ms::ValueError for batch_size <= 0, prefetch < 0, a normalize std <= 0 or
  /// a non-finite mean/std, num_shards < 1 or shard_id outside [0, num_shards);
  /// ms::Error from converting labels that do not fit int32.
  explicit DataLoader(const TensorDataset& dataset, DataLoaderOptions options = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Batches per epoch: ceil(M / batch_size), or floor with drop_last, where M
  /// is the shard's sample count (N unsharded: see shard_size()).
  std::int64_t size() const;
  /// Samples per epoch this loader yields (M, or size() * batch_size with drop_last).
  std::int64_t num_samples() const;
  /// Samples in this loader's shard of an epoch: N unsharded, else ceil(N / S)
  /// (floor with drop_last); the same for every shard.
  std::int64_t shard_size() const;
  /// The options it was made with.
  const DataLoaderOptions& options() const { return options_; }
  /// The dataset it reads.
  const TensorDataset& dataset() const { return dataset_; }

  /// The epoch the next `begin()` runs (0 at first; each begin() adds 1).
  std::int64_t epoch() const { return epoch_; }
  /// Makes the next `begin()` run epoch `e` (>= 0), e.g. to resume training.
  void set_epoch(std::int64_t e);
  /// The sample order of epoch `e` this loader reads: N indices unsharded
  /// (0..N-1 in order without shuffle), else shard_size() indices of this shard.
  std::vector<std::int64_t> order(std::int64_t e) const;
  /// The batch of the samples at `indices` (each in [0, N), else ms::IndexError),
  /// made on the caller's thread.
  Batch collate(std::span<const std::int64_t> indices) const;

  class Iterator;
  /// Starts epoch `epoch()` (stopping an epoch still running) and returns its first batch.
  Iterator begin();
  /// The end of the epoch (compared with an Iterator).
  std::default_sentinel_t end() const { return {}; }

  /// An input iterator over the batches of one epoch.
  class Iterator {
   public:
    /// A batch.
    using value_type = Batch;
    /// As std::input_iterator requires.
    using difference_type = std::ptrdiff_t;
    /// A single-pass input iterator.
    using iterator_concept = std::input_iterator_tag;

    /// The current batch.
    Batch& operator*() { return current_; }
    /// The current batch.
    Batch* operator->() { return &current_; }
    /// Fetches the next batch (waiting for the background thread if it is behind);
    /// rethrows an exception raised while making it.
    Iterator& operator++();
    /// As the prefix form (an input iterator returns nothing).
    void operator++(int) { ++*this; }
    friend bool operator==(const Iterator& it, std::default_sentinel_t) { return it.done_; }

   private:
    friend class DataLoader;
    Iterator(DataLoader* loader, std::uint64_t generation);
    DataLoader* loader_ = nullptr;
    std::uint64_t generation_ = 0;
    Batch current_;
    bool done_ = true;
  };

 private:
  struct Epoch;
  /// The next batch of the running epoch, or nullopt when it is over.
  std::optional<Batch> next(std::uint64_t generation);
  /// Batch `b` of the epoch's order.
  Batch make_batch(const Epoch& ep, std::int64_t b) const;
  /// The background thread's loop: claims and makes batches ahead.
  void prefetch_loop(Epoch& ep) const;
  void stop_epoch();

  TensorDataset dataset_;
  DataLoaderOptions options_;
  Tensor x_;           ///< dataset x, contiguous, uint8 or float32
  Tensor y_;           ///< dataset y, contiguous int32
  EpochOrder orders_;  ///< the order of each epoch, before sharding
  std::int64_t epoch_ = 0;
  std::uint64_t generation_ = 0;  ///< incremented by each begin()
  std::unique_ptr<Epoch> running_;
};

}  // namespace ms::data
