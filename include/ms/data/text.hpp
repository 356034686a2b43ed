// ms/data/text.hpp — byte-level text data: Debian's fortune cookies as a corpus,
// windows of a byte stream for next-byte prediction, and their shuffled batches.
//
// Stage: data (feeds the train stage). A FortunesCorpus reads the fortune files
// of a directory (Debian's `fortunes` package installs them in
// /usr/share/games/fortunes), splits them into fortunes and assigns each to the
// training or the validation split by a fixed rule. Each split is one byte
// stream. A ByteTextDataset cuts a stream into windows of context + 1 bytes
// (input: the first `context`, target: the last `context`, i.e. the next byte
// of each input byte), and a ByteTextLoader yields them in shuffled batches of
// int64 tokens (vocabulary 256: a token is a byte), the input and target form
// that ms::nn::Embedding and ms::nn::cross_entropy take.
//
// The existing DataLoader does not fit text: its targets are one label per
// sample ([B] int32) and its inputs are converted to float32, while a language
// model wants [B, context] integer inputs and [B, context] integer targets. So
// ByteTextLoader is its own batch iterator, with DataLoader's epoch rule.
//
//   ms::data::FortunesCorpus corpus;                       // /usr/share/games/fortunes
//   ms::data::ByteTextDataset train(corpus.stream(ms::data::TextSplit::kTrain), 64);
//   ms::data::ByteTextLoader loader(train, {.batch_size = 32, .seed = 1});
//   for (auto& [x, y] : loader)         // x, y int64 [32, 64]; y[b, t] == x[b, t + 1]
//     train_step(x, y);
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/data/epoch_order.hpp"

namespace ms::data {

/// Where Debian's `fortunes` package installs its fortune files.
inline constexpr std::string_view kFortunesDir = "/usr/share/games/fortunes";

/// The two parts of a corpus (see FortunesCorpus::is_validation).
enum class TextSplit {
  kTrain,       ///< every fortune not in the validation split
  kValidation,  ///< every 20th fortune in corpus order
};

/// The fortunes of a directory of fortune files, in a fixed order with a fixed
/// train / validation split.
///
/// Files: every regular file of `dir` whose name does not end in `.dat` (the
/// index files strfile makes) or `.u8`; the file system's listing
/// (ms::io::FileSystem::list_directory) skips symlinks and subdirectories, so
/// the `<name>.u8 -> <name>` links are not read twice. Files are read in byte
/// order of their names, through the active ms::io file system.
///
/// Fortunes: a file is split into lines at newlines; a line that is exactly "%"
/// (no trailing spaces, no carriage return) ends a fortune. A fortune is the bytes of its
/// lines, each with its newline (the last line of a file without a final newline
/// keeps none). Empty fortunes (two "%" lines in a row, or a "%" at a file's
/// start or end) are dropped. Fortunes are numbered 0, 1, ... in corpus order:
/// the files in name order, the fortunes of each in file order.
///
/// Split: fortune i is in the validation split when i % 20 == 19 (every 20th,
/// about 5%), else in the training split.
///
/// Streams: a split's stream is its fortunes in corpus order, each followed by
/// kSeparator (the byte 0, which fortune text does not contain), so a model
/// sees where one fortune ends and the next begins.
///
/// Example: `ms::data::FortunesCorpus c; auto val = c.stream(ms::data::TextSplit::kValidation);`
class FortunesCorpus {
 public:
  /// Fortune i is in the validation split when i % kValidationEvery == kValidationEvery - 1.
  static constexpr std::int64_t kValidationEvery = 20;
  /// The byte that follows every fortune in a split's stream.
  static constexpr std::uint8_t kSeparator = 0;

  /// Reads the fortune files of `dir`. ms::ValueError naming FortunesCorpus, the
  /// argument `dir` and the directory when it does not exist, when a file cannot
  /// be read, or when it holds no fortune files or no fortunes (an empty corpus).
  explicit FortunesCorpus(std::string dir = std::string(kFortunesDir));

  /// The directory read.
  const std::string& dir() const { return dir_; }
  /// The names of the files read, in the order read.
  const std::vector<std::string>& files() const { return files_; }
  /// The number of fortunes.
  std::int64_t size() const { return static_cast<std::int64_t>(fortunes_.size()); }
  /// Fortune `i` (0 <= i < size(), else ms::IndexError), without a separator.
  const std::string& fortune(std::int64_t i) const;
  /// The bytes of all fortunes (without separators).
  std::int64_t num_bytes() const { return num_bytes_; }
  /// Whether fortune `index` is in the validation split: index % 20 == 19.
  static bool is_validation(std::int64_t index) {
    return index % kValidationEvery == kValidationEvery - 1;
  }
  /// The number of fortunes in `split`.
  std::int64_t split_size(TextSplit split) const;
  /// The byte stream of `split`: its fortunes in corpus order, each followed by kSeparator.
  std::vector<std::uint8_t> stream(TextSplit split) const;

 private:
  std::string dir_;
  std::vector<std::string> files_;
  std::vector<std::string> fortunes_;
  std::int64_t num_bytes_ = 0;
};

/// The fortunes of one file's contents, by the rule of FortunesCorpus (public for tests).
/// Two fortunes, "a" and "b", each with its newline:
/// Example: `auto f = ms::data::split_fortunes("a\n%\nb\n");`
std::vector<std::string> split_fortunes(std::string_view text);

/// One window: `x` the inputs, `y` the targets (the next byte of each input),
/// both int64 [context].
struct TextSample {
  /// The inputs, int64 [context].
  Tensor x;
  /// The targets, int64 [context]: y[t] is the byte after x[t].
  Tensor y;
};

/// One batch: `x` and `y` int64 [B, context]. Binds as `auto& [x, y]`.
struct TextBatch {
  /// The inputs, int64 [B, context].
  Tensor x;
  /// The targets, int64 [B, context]: y[b, t] is the byte after x[b, t].
  Tensor y;
};

/// The windows of a byte stream for next-byte prediction: window k holds the
/// context + 1 bytes at start k * stride; its inputs are the first `context`
/// bytes and its targets the last `context`. Every start s with
/// s + context + 1 <= stream size that is a multiple of `stride` makes a
/// window: size() = (stream size - context - 1) / stride + 1. With stride 1
/// every position is a window start; with stride == context the targets of
/// the windows tile the stream.
/// One window, x "ab" and y "bc":
/// Example: `ms::data::ByteTextDataset ds({'a', 'b', 'c'}, 2);`
class ByteTextDataset {
 public:
  /// Windows of `stream` (whose name, e.g. "validation stream", appears in
  /// messages). ms::ValueError naming ByteTextDataset and the argument when
  /// context < 1, stride < 1, or context + 1 > the stream's size (the stream
  /// is too short for one window; the message gives the largest context it allows).
  ByteTextDataset(std::vector<std::uint8_t> stream, std::int64_t context, std::int64_t stride = 1,
                  std::string name = "stream");

  /// The number of windows.
  std::int64_t size() const { return size_; }
  /// The bytes per input (and per target).
  std::int64_t context() const { return context_; }
  /// The distance between the starts of consecutive windows.
  std::int64_t stride() const { return stride_; }
  /// The stream's name, for messages.
  const std::string& name() const { return name_; }
  /// The stream.
  const std::vector<std::uint8_t>& stream() const { return stream_; }
  /// Where window `i` starts in the stream: i * stride.
  std::int64_t window_start(std::int64_t i) const;
  /// Window `i` (0 <= i < size(), else ms::IndexError).
  TextSample get(std::int64_t i) const;
  /// The windows at `indices` (each in [0, size()), else ms::IndexError) as one batch.
  TextBatch collate(std::span<const std::int64_t> indices) const;

 private:
  std::vector<std::uint8_t> stream_;
  std::int64_t context_, stride_, size_;
  std::string name_;
};

/// Options of a ByteTextLoader (`{.batch_size = 32, .seed = 7}`).
struct ByteTextLoaderOptions {
  /// Windows per batch (> 0).
  std::int64_t batch_size = 32;
  /// A new random order of the windows each epoch (else in stream order).
  bool shuffle = true;
  /// Drop the last batch when it has fewer than batch_size windows.
  bool drop_last = false;
  /// Seed of the ms::Generator the orders are drawn from.
  std::uint64_t seed = 0;
};

/// Batches of a ByteTextDataset. Each epoch (each `begin()`) visits every window
/// once, in the order `order(e)`: with shuffle, the (e+1)-th ms::randperm drawn
/// from `ms::Generator(seed)`, so it depends only on the seed and the epoch
/// number (as ms::data::DataLoader); batch k holds positions
/// [k * batch_size, (k + 1) * batch_size) of that order. Batches are made on the
/// caller's thread (copying bytes is far cheaper than a training step).
/// Example: `ms::data::ByteTextLoader tl(ms::data::ByteTextDataset(bytes, 4), {.batch_size = 2});`
class ByteTextLoader {
 public:
  /// The options type, as `ms::data::ByteTextLoader::Options`.
  using Options = ByteTextLoaderOptions;

  /// ms::ValueError naming ByteTextLoader and batch_size when batch_size < 1.
  /// The loader keeps its own copy of the dataset.
  explicit ByteTextLoader(ByteTextDataset dataset, ByteTextLoaderOptions options = {});

  /// Batches per epoch: ceil(N / batch_size), or floor with drop_last.
  std::int64_t size() const;
  /// The dataset it reads.
  const ByteTextDataset& dataset() const { return dataset_; }
  /// The options it was made with.
  const ByteTextLoaderOptions& options() const { return options_; }
  /// The epoch the next `begin()` runs (0 at first; each begin() adds 1).
  std::int64_t epoch() const { return epoch_; }
  /// Makes the next `begin()` run epoch `e` (>= 0, else ms::ValueError).
  void set_epoch(std::int64_t e);
  /// The window order of epoch `e` (all N window indices; 0..N-1 without shuffle).
  std::vector<std::int64_t> order(std::int64_t e) const;
  /// The batches of epoch `e` as lists of window indices (order(e) in chunks of
  /// batch_size; the short last chunk dropped with drop_last).
  std::vector<std::vector<std::int64_t>> batch_indices(std::int64_t e) const;

  class Iterator;
  /// Starts epoch `epoch()` and returns its first batch.
  Iterator begin();
  /// The end of the epoch.
  std::default_sentinel_t end() const { return {}; }

  /// An input iterator over the batches of one epoch (it holds the epoch's
  /// order; the loader must outlive it).
  class Iterator {
   public:
    /// A batch.
    using value_type = TextBatch;
    /// As std::input_iterator requires.
    using difference_type = std::ptrdiff_t;
    /// A single-pass input iterator.
    using iterator_concept = std::input_iterator_tag;

    /// The current batch.
    TextBatch& operator*() { return current_; }
    /// The current batch.
    TextBatch* operator->() { return &current_; }
    /// Makes the next batch.
    Iterator& operator++();
    /// As the prefix form (an input iterator returns nothing).
    void operator++(int) { ++*this; }
    friend bool operator==(const Iterator& it, std::default_sentinel_t) { return it.done_; }

   private:
    friend class ByteTextLoader;
    Iterator(const ByteTextLoader* loader, std::vector<std::vector<std::int64_t>> batches);
    const ByteTextLoader* loader_ = nullptr;
    std::vector<std::vector<std::int64_t>> batches_;
    std::size_t next_ = 0;
    TextBatch current_;
    bool done_ = true;
  };

 private:
  ByteTextDataset dataset_;
  ByteTextLoaderOptions options_;
  EpochOrder orders_;  ///< the order of each epoch
  std::int64_t epoch_ = 0;
};

}  // namespace ms::data
