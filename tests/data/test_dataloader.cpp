// DataLoader: batch counts and shapes, every sample once per epoch, orders that
// depend only on (seed, epoch) and match ms::randperm drawn in sequence,
// normalization values, the prefetch thread (same batches as without it,
// exceptions rethrown, early destruction joins), its option checks, and
// sharding by rank (every sample of an epoch in one shard, equal step counts).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <ms/core/storage.hpp>
#include <ms/data/dataloader.hpp>
#include <ms/data/fashion_mnist.hpp>
#include <ms/ops/random.hpp>
#include <numeric>
#include <set>
#include <vector>

using namespace ms;

namespace {

/// n samples of shape `sample`; every element of sample i is i % 256 (uint8), label i.
data::TensorDataset indexed_dataset(std::int64_t n,
                                    const std::vector<std::int64_t>& sample = {4, 4}) {
  std::vector<std::int64_t> dims = sample;
  dims.insert(dims.begin(), n);
  Tensor x = empty(Shape(dims), uint8);
  const std::int64_t row = n > 0 ? x.numel() / n : 0;
  for (std::int64_t i = 0; i < n; ++i)
    std::fill_n(x.data<std::uint8_t>() + i * row, row, static_cast<std::uint8_t>(i % 256));
  Tensor y = empty({n}, int64);
  std::iota(y.data<std::int64_t>(), y.data<std::int64_t>() + n, std::int64_t{0});
  return data::TensorDataset(x, y);
}

/// The labels (= sample indices) of one epoch, batch by batch, checking x against them.
std::vector<std::int64_t> run_epoch(data::DataLoader& loader,
                                    std::vector<std::int64_t>* sizes = nullptr) {
  std::vector<std::int64_t> seen;
  for (auto& [x, y] : loader) {
    REQUIRE(x.dtype() == float32);
    REQUIRE(y.dtype() == int32);
    REQUIRE(x.dim(0) == y.dim(0));
    const std::vector<std::int32_t> labels = y.to_vector<std::int32_t>();
    const std::vector<float> xs = x.to_vector<float>();
    const std::int64_t row = x.numel() / x.dim(0);
    for (std::size_t k = 0; k < labels.size(); ++k) {
      // Without normalization, element = (i % 256) / 255.
      const float expected = static_cast<float>(labels[k] % 256) / 255.0f;
      CHECK(std::abs(xs[k * static_cast<std::size_t>(row)] - expected) <= 1e-6f);
      seen.push_back(labels[k]);
    }
    if (sizes) sizes->push_back(x.dim(0));
  }
  return seen;
}

struct AllocCapGuard {
  ~AllocCapGuard() { set_max_alloc_bytes(0); }
};

}  // namespace

TEST_SUITE("data") {
  TEST_CASE("DataLoader: batch counts, the last partial batch, drop_last") {
    const data::TensorDataset ds = indexed_dataset(103);
    for (std::int64_t prefetch : {0, 1, 2, 5}) {
      CAPTURE(prefetch);
      data::DataLoader keep(ds, {.batch_size = 10, .shuffle = false, .prefetch = prefetch});
      CHECK(keep.size() == 11);
      CHECK(keep.num_samples() == 103);
      std::vector<std::int64_t> sizes;
      std::vector<std::int64_t> seen = run_epoch(keep, &sizes);
      CHECK(sizes == std::vector<std::int64_t>{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 3});
      std::vector<std::int64_t> expected(103);
      std::iota(expected.begin(), expected.end(), 0);
      CHECK(seen == expected);  // no shuffle: index order

      data::DataLoader drop(ds, {.batch_size = 10, .drop_last = true, .prefetch = prefetch});
      CHECK(drop.size() == 10);
      CHECK(drop.num_samples() == 100);
      sizes.clear();
      seen = run_epoch(drop, &sizes);
      CHECK(sizes == std::vector<std::int64_t>(10, 10));
      CHECK(std::set<std::int64_t>(seen.begin(), seen.end()).size() == 100);
    }
    // Exact multiples, one batch larger than the dataset, an empty dataset.
    CHECK(data::DataLoader(ds, {.batch_size = 103}).size() == 1);
    CHECK(data::DataLoader(ds, {.batch_size = 1}).size() == 103);
    CHECK(data::DataLoader(ds, {.batch_size = 500}).size() == 1);
    CHECK(data::DataLoader(ds, {.batch_size = 500, .drop_last = true}).size() == 0);
    data::DataLoader none(indexed_dataset(0), {.batch_size = 4});
    CHECK(none.size() == 0);
    CHECK(none.begin() == none.end());
    data::DataLoader dropped(ds, {.batch_size = 500, .drop_last = true});
    CHECK(dropped.begin() == dropped.end());
  }

  TEST_CASE("DataLoader: every sample exactly once per epoch, shuffled") {
    const data::TensorDataset ds = indexed_dataset(1000);
    data::DataLoader loader(ds, {.batch_size = 64, .seed = 7});
    std::vector<std::int64_t> expected(1000);
    std::iota(expected.begin(), expected.end(), 0);
    std::vector<std::vector<std::int64_t>> epochs;
    for (int e = 0; e < 3; ++e) {
      CHECK(loader.epoch() == e);
      std::vector<std::int64_t> seen = run_epoch(loader);
      CHECK(seen != expected);  // shuffled (identity with probability 1/1000!)
      epochs.push_back(seen);
      std::sort(seen.begin(), seen.end());
      CHECK(seen == expected);
    }
    CHECK(loader.epoch() == 3);
    CHECK(epochs[0] != epochs[1]);  // a new order each epoch
    CHECK(epochs[1] != epochs[2]);
  }

  TEST_CASE("DataLoader: the order depends only on seed and epoch, as randperm in sequence") {
    const data::TensorDataset ds = indexed_dataset(257);
    data::DataLoader a(ds, {.batch_size = 16, .seed = 42});
    data::DataLoader b(ds, {.batch_size = 16, .seed = 42, .prefetch = 0});
    data::DataLoader c(ds, {.batch_size = 16, .seed = 43});
    // The reference: one generator, one randperm per epoch.
    Generator gen(42);
    for (int e = 0; e < 3; ++e) {
      const std::vector<std::int64_t> ref = randperm(257, gen).to_vector<std::int64_t>();
      CHECK(a.order(e) == ref);
      const std::vector<std::int64_t> sa = run_epoch(a), sb = run_epoch(b), sc = run_epoch(c);
      CHECK(sa == ref);
      CHECK(sb == ref);  // prefetch does not change anything
      CHECK(sc != ref);  // another seed, another order
    }
    // Resuming: set_epoch(2) on a new loader replays epoch 2.
    data::DataLoader resumed(ds, {.batch_size = 16, .seed = 42});
    resumed.set_epoch(2);
    CHECK(run_epoch(resumed) == a.order(2));
    CHECK(resumed.epoch() == 3);
    a.set_epoch(0);
    Generator fresh(42);
    CHECK(run_epoch(a) == randperm(257, fresh).to_vector<std::int64_t>());
  }

  TEST_CASE("DataLoader: the same batches, bit for bit, whoever makes them") {
    // prefetch 0: every batch made by the iterator; 1-3: by the background
    // thread ahead, or by the iterator when that thread has not claimed the
    // next batch yet. Shuffled, normalized, several epochs, a partial last batch.
    Tensor x = empty({203, 5, 7}, uint8);
    for (std::int64_t i = 0; i < x.numel(); ++i)
      x.data<std::uint8_t>()[i] = static_cast<std::uint8_t>((i * 37 + 11) % 256);
    Tensor y = empty({203}, int64);
    std::iota(y.data<std::int64_t>(), y.data<std::int64_t>() + 203, std::int64_t{0});
    const data::TensorDataset ds(x, y);
    auto epochs = [&](std::int64_t prefetch) {
      data::DataLoader loader(ds, {.batch_size = 16,
                                   .seed = 5,
                                   .normalize = data::Normalize{0.25, 0.5},
                                   .prefetch = prefetch});
      std::vector<data::Batch> all;
      for (int e = 0; e < 3; ++e)
        for (auto& batch : loader) all.push_back(batch);
      return all;
    };
    const std::vector<data::Batch> ref = epochs(0);
    REQUIRE(ref.size() == 3 * 13);
    for (std::int64_t prefetch : {1, 2, 3}) {
      CAPTURE(prefetch);
      const std::vector<data::Batch> got = epochs(prefetch);
      REQUIRE(got.size() == ref.size());
      for (std::size_t k = 0; k < ref.size(); ++k) {
        CAPTURE(k);
        REQUIRE(got[k].x.shape() == ref[k].x.shape());
        CHECK(std::memcmp(got[k].x.raw_data(), ref[k].x.raw_data(),
                          static_cast<std::size_t>(ref[k].x.nbytes())) == 0);
        CHECK(got[k].y.to_vector<std::int32_t>() == ref[k].y.to_vector<std::int32_t>());
      }
    }
  }

  TEST_CASE("DataLoader: normalization, layouts and dtypes of x") {
    const data::TensorDataset ds = indexed_dataset(20);
    const double mean = 0.25, sd = 0.5;
    data::DataLoader norm(
        ds, {.batch_size = 8, .shuffle = false, .normalize = data::Normalize{mean, sd}});
    auto it = norm.begin();
    CHECK(it->x.shape() == Shape{8, 1, 4, 4});  // rank-2 samples get a channel axis
    CHECK(it->y.shape() == Shape{8});
    const std::vector<float> xs = it->x.to_vector<float>();
    for (std::int64_t k = 0; k < 8; ++k)
      for (std::int64_t j = 0; j < 16; ++j)
        CHECK(xs[static_cast<std::size_t>(k * 16 + j)] ==
              doctest::Approx((static_cast<double>(k) / 255.0 - mean) / sd).epsilon(1e-6));

    data::DataLoader flat(ds, {.batch_size = 8, .flatten = true});
    CHECK(flat.begin()->x.shape() == Shape{8, 16});
    data::DataLoader flat_norm(
        indexed_dataset(5, {28, 28}),
        {.batch_size = 5, .normalize = data::Normalize{0.2860, 0.3530}, .flatten = true});
    CHECK(flat_norm.begin()->x.shape() == Shape{5, 784});

    // Rank-1 and rank-3 samples keep their shape.
    CHECK(data::DataLoader(indexed_dataset(6, {5}), {.batch_size = 4}).begin()->x.shape() ==
          Shape{4, 5});
    CHECK(data::DataLoader(indexed_dataset(6, {3, 2, 2}), {.batch_size = 4}).begin()->x.shape() ==
          Shape{4, 3, 2, 2});

    // Floating samples are not divided by 255; float64 becomes float32.
    const Tensor xf = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2});
    data::DataLoader fl(
        data::TensorDataset(xf, tensor({0, 1, 2}, int32)),
        {.batch_size = 3, .shuffle = false, .normalize = data::Normalize{1.0, 2.0}});
    auto b = fl.begin();
    CHECK(b->x.dtype() == float32);
    CHECK(b->x.to_vector<float>() == std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f});
    CHECK(b->y.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, 2});

    // Non-contiguous x and labels of another integer dtype.
    const Tensor xt = arange(0, 12, 1, float32).reshape({3, 4}).transpose(0, 1);  // [4, 3]
    data::DataLoader nc(data::TensorDataset(xt, tensor({9, 8, 7, 6}, uint8)),
                        {.batch_size = 4, .shuffle = false});
    auto c = nc.begin();
    CHECK(c->x.to_vector<float>() == xt.to_vector<float>());
    CHECK(c->y.to_vector<std::int32_t>() == std::vector<std::int32_t>{9, 8, 7, 6});

    // collate: any indices, checked.
    const std::vector<std::int64_t> pick = {3, 3, 0};
    const data::Batch p = norm.collate(pick);
    CHECK(p.y.to_vector<std::int32_t>() == std::vector<std::int32_t>{3, 3, 0});
    const std::vector<std::int64_t> out_of_range = {1, 20};
    CHECK_THROWS_WITH_AS(norm.collate(out_of_range),
                         doctest::Contains("collate: index 20 is out of range for a dataset of 20"),
                         IndexError);
  }

  TEST_CASE("DataLoader: bad options and labels") {
    const data::TensorDataset ds = indexed_dataset(10);
    CHECK_THROWS_WITH_AS(data::DataLoader(ds, {.batch_size = 0}),
                         doctest::Contains("DataLoader: batch_size must be > 0, got 0"),
                         ValueError);
    CHECK_THROWS_AS(data::DataLoader(ds, {.batch_size = -3}), ValueError);
    CHECK_THROWS_WITH_AS(data::DataLoader(ds, {.prefetch = -1}),
                         doctest::Contains("prefetch must be >= 0, got -1"), ValueError);
    CHECK_THROWS_WITH_AS(data::DataLoader(ds, {.normalize = data::Normalize{0.5, 0.0}}),
                         doctest::Contains("normalize needs a finite mean and a finite std > 0"),
                         ValueError);
    CHECK_THROWS_AS(data::DataLoader(ds, {.normalize = data::Normalize{0.5, -1.0}}), ValueError);
    CHECK_THROWS_AS(data::DataLoader(ds, {.normalize = data::Normalize{NAN, 1.0}}), ValueError);
    CHECK_THROWS_AS(data::DataLoader(ds, {.normalize = data::Normalize{0.0, INFINITY}}),
                    ValueError);
    CHECK_THROWS_WITH_AS(data::DataLoader(data::TensorDataset{}),
                         doctest::Contains("the dataset is empty"), ValueError);
    const Tensor big = tensor({1, std::int64_t{1} << 40}, int64);
    CHECK_THROWS_WITH_AS(data::DataLoader(data::TensorDataset(zeros({2, 3}), big)),
                         doctest::Contains("label 1099511627776 at index 1 does not fit"),
                         ValueError);
    data::DataLoader loader(ds);
    CHECK_THROWS_WITH_AS(loader.set_epoch(-1), doctest::Contains("epoch must be >= 0, got -1"),
                         ValueError);
    CHECK_THROWS_AS(loader.order(-2), ValueError);
  }

  TEST_CASE("DataLoader: an error on the prefetch thread is rethrown by the iterator") {
    const data::TensorDataset ds = indexed_dataset(50);
    for (std::int64_t prefetch : {0, 2}) {
      CAPTURE(prefetch);
      data::DataLoader loader(ds, {.batch_size = 10, .shuffle = false, .prefetch = prefetch});
      {
        const AllocCapGuard guard;
        set_max_alloc_bytes(100);  // a batch's x needs 10 * 16 * 4 = 640 bytes
        CHECK_THROWS_WITH_AS(loader.begin(), doctest::Contains("over the limit of 100 bytes"),
                             MemoryError);
      }
      // The loader still works afterwards: the next epoch runs normally.
      CHECK(run_epoch(loader).size() == 50);
    }
  }

  TEST_CASE("DataLoader: stopping early, restarting, destroying mid-epoch") {
    const data::TensorDataset ds = indexed_dataset(2000, {28, 28});
    {
      data::DataLoader loader(ds, {.batch_size = 16, .prefetch = 3});
      int taken = 0;
      for (auto& batch : loader) {
        CHECK(batch.x.dim(0) == 16);
        if (++taken == 2) break;  // the worker is blocked on a full queue now
      }
    }  // destroyed mid-epoch: joins the worker
    {
      data::DataLoader loader(ds, {.batch_size = 16});
      auto it = loader.begin();  // never consumed
      (void)it;
    }
    {
      data::DataLoader loader(ds, {.batch_size = 500, .seed = 3});
      auto first = loader.begin();
      ++first;
      auto second = loader.begin();  // stops epoch 0, runs epoch 1
      CHECK_THROWS_WITH_AS(++first, doctest::Contains("this iterator's epoch was stopped"),
                           ValueError);
      std::int64_t n = 0;
      for (; second != loader.end(); ++second) n += second->x.dim(0);
      CHECK(n == 2000);
      CHECK(loader.epoch() == 2);
      ++second;  // past the end: stays at the end
      CHECK(second == loader.end());
    }
    // Many short epochs with a small queue (a stress test for the hand-over).
    data::DataLoader loader(indexed_dataset(37), {.batch_size = 2, .seed = 9, .prefetch = 1});
    for (int e = 0; e < 50; ++e) {
      std::vector<std::int64_t> seen = run_epoch(loader);
      CHECK(seen == loader.order(e));
    }
  }

  TEST_CASE("DataLoader over Fashion-MNIST (when installed)") {
    if (!std::filesystem::exists(std::string(data::FashionMNIST::kDefaultDir) +
                                 "/t10k-images-idx3-ubyte.gz")) {
      MESSAGE("skipped: Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");
      return;
    }
    const data::FashionMNIST test(std::string(data::FashionMNIST::kDefaultDir), data::Split::Test);
    data::DataLoader loader(
        test, {.batch_size = 64, .seed = 1, .normalize = data::Normalize{0.2860, 0.3530}});
    CHECK(loader.size() == 157);
    std::vector<std::int64_t> histogram(10, 0);
    double sum = 0, sum_sq = 0;
    std::int64_t batches = 0, last = 0, count = 0;
    for (auto& [x, y] : loader) {
      CHECK(x.shape() == Shape{y.dim(0), 1, 28, 28});
      for (std::int32_t label : y.to_vector<std::int32_t>())
        ++histogram[static_cast<std::size_t>(label)];
      for (float v : x.to_vector<float>()) {
        sum += v;
        sum_sq += static_cast<double>(v) * v;
        ++count;
      }
      ++batches;
      last = y.dim(0);
    }
    CHECK(batches == 157);
    CHECK(last == 10000 - 156 * 64);
    CHECK(histogram == std::vector<std::int64_t>(10, 1000));
    // Normalized with the training set's statistics, the test set is close to N(0, 1).
    const double mean = sum / static_cast<double>(count);
    const double var = sum_sq / static_cast<double>(count) - mean * mean;
    CHECK(std::abs(mean) < 0.02);
    CHECK(std::abs(std::sqrt(var) - 1.0) < 0.02);
  }

  TEST_CASE("DataLoader: shards split every epoch's order; equal steps; pad or drop") {
    for (const bool shuffle : {false, true})
      for (const std::int64_t n : {12, 13, 2})
        for (const std::int64_t shards : {1, 2, 3, 5})
          for (const bool drop : {false, true}) {
            CAPTURE(shuffle);
            CAPTURE(n);
            CAPTURE(shards);
            CAPTURE(drop);
            const data::TensorDataset ds = indexed_dataset(n);
            const std::int64_t per_shard = drop ? n / shards : (n + shards - 1) / shards;
            std::vector<std::int64_t> all;  // every shard's samples of epoch 1
            std::vector<std::int64_t> steps;
            for (std::int64_t id = 0; id < shards; ++id) {
              data::DataLoader loader(ds, {.batch_size = 2,
                                           .shuffle = shuffle,
                                           .drop_last = drop,
                                           .seed = 9,
                                           .num_shards = shards,
                                           .shard_id = id});
              data::DataLoader whole(ds, {.batch_size = 2, .shuffle = shuffle, .seed = 9});
              CHECK(loader.shard_size() == per_shard);
              CHECK(loader.size() == (drop ? per_shard / 2 : (per_shard + 1) / 2));
              // Shard id of the whole order: positions id, id + S, ..., wrapping past N.
              const std::vector<std::int64_t> order = whole.order(1);
              std::vector<std::int64_t> want;
              for (std::int64_t k = 0; k < per_shard; ++k)
                want.push_back(order[static_cast<std::size_t>((id + k * shards) % n)]);
              CHECK(loader.order(1) == want);
              loader.set_epoch(1);
              std::vector<std::int64_t> sizes;
              const std::vector<std::int64_t> seen = run_epoch(loader, &sizes);
              if (!drop) CHECK(seen == want);
              all.insert(all.end(), seen.begin(), seen.end());
              steps.push_back(static_cast<std::int64_t>(sizes.size()));
              CHECK(static_cast<std::int64_t>(seen.size()) == loader.num_samples());
            }
            // Every rank runs the same number of steps.
            CHECK(std::count(steps.begin(), steps.end(), steps[0]) == shards);
            std::set<std::int64_t> distinct(all.begin(), all.end());
            if (!drop) {
              // Padding: every sample at least once, at most shards - 1 of them twice.
              CHECK(static_cast<std::int64_t>(distinct.size()) == n);
              CHECK(static_cast<std::int64_t>(all.size()) == per_shard * shards);
              CHECK(per_shard * shards - n < shards);
            } else {
              // Dropping: no sample twice, at most shards - 1 (plus short batches) left out.
              CHECK(distinct.size() == all.size());
            }
          }
    const data::TensorDataset ds = indexed_dataset(10);
    CHECK_THROWS_WITH_AS(data::DataLoader(ds, {.num_shards = 0}),
                         doctest::Contains("DataLoader: num_shards must be >= 1, got 0"),
                         ValueError);
    CHECK_THROWS_WITH_AS(data::DataLoader(ds, {.num_shards = 2, .shard_id = 2}),
                         doctest::Contains("shard_id must be in [0, num_shards = 2), got 2"),
                         ValueError);
    CHECK_THROWS_AS(data::DataLoader(ds, {.num_shards = 2, .shard_id = -1}), ValueError);
  }
}
