// ONNX external data (external_data.hpp): GraphCell's checked reader and
// export_model's layout of a data file.
#include "external_data.hpp"

#include <charconv>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>

#include "ms/core/error.hpp"
#include "ms/io/file.hpp"

namespace ms::onnx::detail {
namespace {

using P = ::onnx::TensorProto;
namespace fs = std::filesystem;
constexpr std::string_view kGraphCell = "GraphCell";

/// One tensor's `external_data` entries, parsed.
struct ExtRef {
  std::string location;
  std::uint64_t offset = 0;
  std::optional<std::uint64_t> length;
};

std::uint64_t parse_count(const std::string& key, const std::string& v, const std::string& what) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  MS_CHECK(!v.empty() && ec == std::errc() && end == v.data() + v.size(), ValueError, kGraphCell,
           ": ", what, ": external_data '", key, "' is '", v,
           "'; it must be a non-negative decimal number below 2^64");
  return n;
}

ExtRef parse_ref(const P& t, const std::string& what) {
  ExtRef r;
  std::set<std::string> seen;
  for (const auto& e : t.external_data()) {
    const std::string& k = e.key();
    MS_CHECK(k == "location" || k == "offset" || k == "length" || k == "checksum", ValueError,
             kGraphCell, ": ", what, " has the external_data key '", k,
             "', which ONNX does not define (location, offset, length, checksum)");
    MS_CHECK(seen.insert(k).second, ValueError, kGraphCell, ": ", what,
             " gives the external_data key '", k, "' twice");
    if (k == "location") r.location = e.value();
    if (k == "offset") r.offset = parse_count(k, e.value(), what);
    if (k == "length") r.length = parse_count(k, e.value(), what);
  }
  MS_CHECK(seen.count("location") == 1, ValueError, kGraphCell, ": ", what,
           " keeps its data in an external file but names none (no external_data 'location')");
  return r;
}

/// `location` made relative to the model's directory, lexically normal; ValueError
/// for an empty or absolute location or one that leaves the directory.
fs::path checked_relative(const std::string& location, const std::string& what) {
  MS_CHECK(!location.empty() && location.find('\0') == std::string::npos, ValueError, kGraphCell,
           ": ", what, ": the external data location '", location,
           "' is empty or holds a NUL byte");
  const fs::path p(location);
  MS_CHECK(!p.has_root_path(), ValueError, kGraphCell, ": ", what, ": the external data location '",
           location, "' is absolute; ONNX locations are relative to the model's directory");
  const fs::path n = p.lexically_normal();
  MS_CHECK(n.empty() || *n.begin() != "..", ValueError, kGraphCell, ": ", what,
           ": the external data location '", location, "' leaves the model's directory ('..')");
  return n;
}

/// On the POSIX file system: `full` (inside `dir` lexically) with its symlinks
/// resolved, the path then opened (so the file checked is the file read);
/// ValueError when it does not exist or resolves outside `dir`.
std::string check_inside(const std::string& dir, const std::string& full,
                         const std::string& location, const std::string& what) {
  std::error_code ec;
  const fs::path file = fs::canonical(full, ec);
  MS_CHECK(!ec, ValueError, kGraphCell, ": ", what, ": the external data file '", location, "' ('",
           full, "') cannot be resolved: ", ec.message());
  const fs::path base = fs::canonical(dir, ec);
  MS_CHECK(!ec, ValueError, kGraphCell, ": ", what, ": the model's directory '", dir,
           "' cannot be resolved: ", ec.message());
  const fs::path rel = file.lexically_relative(base);
  MS_CHECK(!rel.empty() && *rel.begin() != ".." && rel != ".", ValueError, kGraphCell, ": ", what,
           ": the external data file '", location, "' resolves to '", file.string(),
           "', outside the model's directory '", base.string(), "' (a symlink)");
  return file.string();
}

}  // namespace

/// One opened data file: the path ms opened and the file.
struct ExternalReader::File {
  std::string path;
  std::unique_ptr<io::InputFile> in;
};

ExternalReader::ExternalReader(std::string dir) : dir_(std::move(dir)) {}
ExternalReader::~ExternalReader() = default;

bool ExternalReader::is_external(const P& t, const std::string& what) {
  const bool ext = t.data_location() == P::EXTERNAL;
  MS_CHECK(ext || t.external_data_size() == 0, ValueError, kGraphCell, ": ", what,
           " has external_data entries but its data_location is not EXTERNAL");
  MS_CHECK(
      !ext || (!t.has_raw_data() && t.float_data_size() == 0 && t.int32_data_size() == 0 &&
               t.int64_data_size() == 0 && t.double_data_size() == 0 && t.uint64_data_size() == 0),
      ValueError, kGraphCell, ": ", what,
      " keeps its data in an external file and inside the model");
  return ext;
}

const ExternalReader::File& ExternalReader::open(const std::string& location,
                                                 const std::string& what) {
  MS_CHECK(!dir_.empty(), ValueError, kGraphCell, ": ", what,
           " keeps its data in an external file ('", location,
           "'), which is resolved against the model's directory: a model loaded from bytes "
           "needs a path (load it from its file, or set GraphCellOptions::external_data_dir)");
  const fs::path rel = checked_relative(location, what);
  if (auto it = files_.find(rel.string()); it != files_.end()) return *it->second;
  auto f = std::make_unique<File>();
  f->path = (fs::path(dir_) / rel).string();
  if (io::file_system()->name() == "posix") f->path = check_inside(dir_, f->path, location, what);
  try {
    f->in = std::make_unique<io::InputFile>(f->path);
  } catch (const Error& e) {
    ::ms::detail::raise<ValueError>(kGraphCell, ": ", what, ": the external data file '", location,
                                    "' cannot be read: ", e.what());
  }
  return *files_.emplace(rel.string(), std::move(f)).first->second;
}

Tensor ExternalReader::read(const P& t, DType dt, std::int64_t numel, const std::string& what) {
  const ExtRef r = parse_ref(t, what);
  const File& f = open(r.location, what);
  const std::uint64_t size = f.in->size();
  MS_CHECK(r.offset <= size, ValueError, kGraphCell, ": ", what, ": external data offset ",
           r.offset, " is past the end of '", r.location, "' (", size, " bytes)");
  const std::uint64_t length = r.length.value_or(size - r.offset);
  MS_CHECK(length <= size - r.offset, ValueError, kGraphCell, ": ", what, ": external data offset ",
           r.offset, " + length ", length, " is past the end of '", r.location, "' (", size,
           " bytes)");
  const auto want = static_cast<std::uint64_t>(numel * dtype_itemsize(dt));
  MS_CHECK(length == want, ValueError, kGraphCell, ": ", what, " has ", length,
           " bytes of external data in '", r.location, "', its dims and type need ", want);
  Tensor out = empty(Shape(std::vector<std::int64_t>(t.dims().begin(), t.dims().end())), dt);
  if (want > 0) f.in->read_at(r.offset, out.raw_data(), static_cast<std::size_t>(want));
  return out;
}

void ExternalReader::finish(::onnx::ModelProto& m) const {
  for (const auto& [location, f] : files_) f->in->check_unchanged();
  const bool local = io::file_system()->name() == "posix";
  auto repoint = [&](P& t) {
    if (t.data_location() != P::EXTERNAL) return;
    for (auto& e : *t.mutable_external_data())
      if (e.key() == "location") {
        auto it = files_.find(fs::path(e.value()).lexically_normal().string());
        // Another backend's files are not on the local disk: ms has read and
        // checked them, so the checker is shown the working directory.
        if (it != files_.end()) e.set_value(local ? it->second->path : ".");
      }
  };
  auto* g = m.mutable_graph();
  for (auto& t : *g->mutable_initializer()) repoint(t);
  for (auto& n : *g->mutable_node())
    for (auto& a : *n.mutable_attribute())
      if (a.has_t()) repoint(*a.mutable_t());
}

std::vector<ExternalBlob> move_to_external(::onnx::ModelProto& m, const std::string& location,
                                           std::int64_t threshold) {
  std::vector<ExternalBlob> blobs;
  std::uint64_t end = 0;
  for (P& t : *m.mutable_graph()->mutable_initializer()) {
    if (!t.has_raw_data() || static_cast<std::int64_t>(t.raw_data().size()) < threshold) continue;
    ExternalBlob b;
    b.offset = (end + kExternalAlign - 1) / kExternalAlign * kExternalAlign;
    b.bytes.reset(t.release_raw_data());
    end = b.offset + b.bytes->size();
    t.set_data_location(P::EXTERNAL);
    auto add = [&t](const char* key, std::string value) {
      auto* e = t.add_external_data();
      e->set_key(key);
      e->set_value(std::move(value));
    };
    add("location", location);
    add("offset", std::to_string(b.offset));
    add("length", std::to_string(b.bytes->size()));
    blobs.push_back(std::move(b));
  }
  return blobs;
}

}  // namespace ms::onnx::detail
