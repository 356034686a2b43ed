// Fortune files, byte windows and their batches (see ms/data/text.hpp).
#include "ms/data/text.hpp"

#include <algorithm>
#include <numeric>
#include <range/v3/algorithm/copy.hpp>
#include <range/v3/range/conversion.hpp>
#include <range/v3/view/chunk.hpp>
#include <range/v3/view/drop.hpp>
#include <range/v3/view/sliding.hpp>
#include <range/v3/view/stride.hpp>
#include <range/v3/view/take.hpp>
#include <utility>

#include "ms/core/error.hpp"
#include "ms/io/file.hpp"
#include "ms/io/file_system.hpp"
#include "ms/ops/random.hpp"

namespace ms::data {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::vector<std::string> split_fortunes(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    const std::string_view line = text.substr(pos, end - pos);  // with its '\n'
    const std::string_view body =
        nl == std::string_view::npos ? line : line.substr(0, end - pos - 1);
    if (body == "%") {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.append(line);
    }
    pos = end;
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

FortunesCorpus::FortunesCorpus(std::string dir) : dir_(std::move(dir)) {
  const std::shared_ptr<io::FileSystem> fs = io::file_system();
  MS_CHECK(!dir_.empty(), ValueError, "FortunesCorpus: dir must name a directory, got ''");
  MS_CHECK(fs->exists(dir_), ValueError, "FortunesCorpus: dir '", dir_,
           "' does not exist (Debian's fortune files are in ", kFortunesDir,
           ": apt-get install fortunes)");
  for (std::string& name : fs->list_directory(dir_))
    if (!ends_with(name, ".dat") && !ends_with(name, ".u8")) files_.push_back(std::move(name));
  std::sort(files_.begin(), files_.end());
  MS_CHECK(!files_.empty(), ValueError, "FortunesCorpus: dir '", dir_,
           "' holds no fortune files (expected regular files not ending in .dat or .u8)");
  for (const std::string& name : files_) {
    const std::string path = dir_ + "/" + name;
    std::vector<std::uint8_t> bytes;
    try {
      bytes = io::read_file(path);
    } catch (const std::exception& e) {
      ::ms::detail::raise<ValueError>("FortunesCorpus: cannot read '", path, "' of dir '", dir_,
                                      "': ", e.what());
    }
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    for (std::string& f : split_fortunes(text)) {
      num_bytes_ += static_cast<std::int64_t>(f.size());
      fortunes_.push_back(std::move(f));
    }
  }
  MS_CHECK(!fortunes_.empty(), ValueError, "FortunesCorpus: dir '", dir_, "' holds ", files_.size(),
           " fortune files but no fortunes (an empty corpus)");
}

const std::string& FortunesCorpus::fortune(std::int64_t i) const {
  MS_CHECK(i >= 0 && i < size(), IndexError, "FortunesCorpus::fortune: index ", i,
           " is out of range for a corpus of ", size(), " fortunes");
  return fortunes_[static_cast<std::size_t>(i)];
}

std::int64_t FortunesCorpus::split_size(TextSplit split) const {
  const std::int64_t val = size() / kValidationEvery;  // indices 19, 39, ... below size()
  return split == TextSplit::kValidation ? val : size() - val;
}

std::vector<std::uint8_t> FortunesCorpus::stream(TextSplit split) const {
  const bool want_val = split == TextSplit::kValidation;
  std::vector<std::uint8_t> out;
  for (std::int64_t i = 0; i < size(); ++i) {
    if (is_validation(i) != want_val) continue;
    const std::string& f = fortunes_[static_cast<std::size_t>(i)];
    out.insert(out.end(), f.begin(), f.end());
    out.push_back(kSeparator);
  }
  return out;
}

// ------------------------------------------------------------------ ByteTextDataset

ByteTextDataset::ByteTextDataset(std::vector<std::uint8_t> stream, std::int64_t context,
                                 std::int64_t stride, std::string name)
    : stream_(std::move(stream)), context_(context), stride_(stride), name_(std::move(name)) {
  const auto n = static_cast<std::int64_t>(stream_.size());
  MS_CHECK(context_ >= 1, ValueError, "ByteTextDataset: context must be >= 1, got ", context_);
  MS_CHECK(stride_ >= 1, ValueError, "ByteTextDataset: stride must be >= 1, got ", stride_);
  MS_CHECK(context_ + 1 <= n, ValueError, "ByteTextDataset: context must be at most ", n - 1,
           " for the ", name_, " of ", n, " bytes (a window is context + 1 bytes), got ", context_);
  size_ = (n - context_ - 1) / stride_ + 1;
}

std::int64_t ByteTextDataset::window_start(std::int64_t i) const {
  MS_CHECK(i >= 0 && i < size_, IndexError, "ByteTextDataset: window ", i, " is out of range for ",
           size_, " windows of the ", name_);
  return i * stride_;
}

TextSample ByteTextDataset::get(std::int64_t i) const {
  const std::int64_t idx[1] = {i};
  TextBatch b = collate(idx);
  return {b.x.reshape({context_}), b.y.reshape({context_})};
}

TextBatch ByteTextDataset::collate(std::span<const std::int64_t> indices) const {
  for (std::int64_t i : indices) (void)window_start(i);  // range checks first: nothing half-made
  const auto b = static_cast<std::int64_t>(indices.size());
  TextBatch batch{empty({b, context_}, int64), empty({b, context_}, int64)};
  // Window k: the context + 1 bytes at k * stride; inputs its first context
  // bytes, targets its last context (shifted by one).
  auto windows = stream_ | ranges::views::sliding(context_ + 1) | ranges::views::stride(stride_);
  std::int64_t* x = batch.x.data<std::int64_t>();
  std::int64_t* y = batch.y.data<std::int64_t>();
  for (std::int64_t i : indices) {
    auto window = windows[i];
    x = ranges::copy(window | ranges::views::take(context_), x).out;
    y = ranges::copy(window | ranges::views::drop(1), y).out;
  }
  return batch;
}

// ------------------------------------------------------------------ ByteTextLoader

ByteTextLoader::ByteTextLoader(ByteTextDataset dataset, ByteTextLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  MS_CHECK(options_.batch_size >= 1, ValueError, "ByteTextLoader: batch_size must be >= 1, got ",
           options_.batch_size);
  orders_ = EpochOrder(dataset_.size(), options_.shuffle, options_.seed);
}

std::int64_t ByteTextLoader::size() const {
  const std::int64_t n = dataset_.size(), b = options_.batch_size;
  return options_.drop_last ? n / b : n / b + (n % b != 0);
}

void ByteTextLoader::set_epoch(std::int64_t e) {
  MS_CHECK(e >= 0, ValueError, "ByteTextLoader::set_epoch: epoch must be >= 0, got ", e);
  epoch_ = e;
}

std::vector<std::int64_t> ByteTextLoader::order(std::int64_t e) const {
  return orders_(e, "ByteTextLoader::order");
}

std::vector<std::vector<std::int64_t>> ByteTextLoader::batch_indices(std::int64_t e) const {
  const std::vector<std::int64_t> all = order(e);
  return all | ranges::views::chunk(options_.batch_size) | ranges::views::take(size()) |
         ranges::to<std::vector<std::vector<std::int64_t>>>();
}

ByteTextLoader::Iterator ByteTextLoader::begin() {
  Iterator it(this, batch_indices(epoch_));
  ++epoch_;
  return it;
}

ByteTextLoader::Iterator::Iterator(const ByteTextLoader* loader,
                                   std::vector<std::vector<std::int64_t>> batches)
    : loader_(loader), batches_(std::move(batches)), done_(false) {
  ++*this;
}

ByteTextLoader::Iterator& ByteTextLoader::Iterator::operator++() {
  MS_CHECK(loader_ != nullptr, ValueError,
           "ByteTextLoader::Iterator: not made by ByteTextLoader::begin()");
  if (next_ == batches_.size()) {
    current_ = TextBatch{};
    done_ = true;
  } else {
    current_ = loader_->dataset_.collate(batches_[next_++]);
  }
  return *this;
}

}  // namespace ms::data
