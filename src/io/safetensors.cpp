// ms/io/safetensors.hpp: writer (reference-library layout) and validating reader.
#include "ms/io/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_set>

#include "ms/io/file.hpp"

namespace ms::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "ms::io writes tensor bytes as they are in memory: a little-endian host is assumed");

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

struct DTypeEntry {
  std::string_view name;
  DType dtype;
};

// In the reference library's alignment order: writing sorts by this rank, largest first.
constexpr DTypeEntry kDTypes[] = {
    {"BOOL", DType::Bool},     {"U8", DType::UInt8},      {"I8", DType::Int8},
    {"I16", DType::Int16},     {"U16", DType::UInt16},    {"F16", DType::Float16},
    {"BF16", DType::BFloat16}, {"I32", DType::Int32},     {"U32", DType::UInt32},
    {"F32", DType::Float32},   {"C64", DType::Complex64}, {"F64", DType::Float64},
    {"I64", DType::Int64},     {"U64", DType::UInt64},
};
// Named by the format, absent from ms.
constexpr std::string_view kForeignDTypes[] = {"F8_E5M2", "F8_E4M3", "F8_E8M0",
                                               "F4",      "F6_E2M3", "F6_E3M2"};

int dtype_rank(DType t) {
  for (int i = 0; i < static_cast<int>(std::size(kDTypes)); ++i)
    if (kDTypes[i].dtype == t) return i;
  return -1;
}

/// One tensor of a parsed header.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin, end;
};

struct Plan {
  std::vector<Entry> entries;  // sorted by data offsets
  std::map<std::string, std::string> metadata;
};

using detail::squote;

std::string shape_text(const std::vector<std::uint64_t>& dims) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < dims.size(); ++i) os << (i ? ", " : "") << dims[i];
  os << "]";
  return os.str();
}

/// What json::parse does not check, found in one streaming (SAX) pass: no key
/// twice in one object (at any depth) and no nesting deeper than a valid header
/// has (root object > tensor object > shape array). Linear in the header's size:
/// a DOM parse with a callback rescans the parent object after each child and
/// takes quadratic time on a header of many tensors.
class HeaderKeyCheck final : public nlohmann::json_sax<json> {
 public:
  explicit HeaderKeyCheck(const std::string& what) : what_(what) {}

  bool null() override { return true; }
  bool boolean(bool /*val*/) override { return true; }
  bool number_integer(number_integer_t /*val*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*val*/) override { return true; }
  bool number_float(number_float_t /*val*/, const string_t& /*text*/) override { return true; }
  bool string(string_t& /*val*/) override { return true; }
  bool binary(binary_t& /*val*/) override { return true; }
  bool start_object(std::size_t /*elements*/) override {
    open();
    // One key set per open object, kept by depth and reused (cleared, not reallocated).
    if (keys_.size() < depth_) keys_.resize(depth_);
    keys_[depth_ - 1].clear();
    objects_.push_back(depth_ - 1);
    return true;
  }
  bool key(string_t& k) override {
    MS_CHECK(keys_[objects_.back()].insert(k).second, ValueError, what_, ": header has the key '",
             k, "' twice in one object (duplicate keys are ambiguous)");
    return true;
  }
  bool end_object() override {
    objects_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t /*elements*/) override {
    open();
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& e) override {
    detail::raise<ValueError>(what_, ": header is not valid JSON: ", e.what());
  }

 private:
  void open() {
    MS_CHECK(++depth_ <= 3, ValueError, what_,
             ": header JSON is nested deeper than a safetensors header can be");
  }

  const std::string& what_;
  std::size_t depth_ = 0;
  std::vector<std::unordered_set<std::string>> keys_;  // by depth
  std::vector<std::size_t> objects_;                   // depth index of each open object
};

/// Parses the JSON text after HeaderKeyCheck accepted it (two linear passes).
json parse_json_strict(std::string_view text, const std::string& what) {
  HeaderKeyCheck check(what);
  (void)json::sax_parse(text.begin(), text.end(), &check);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    detail::raise<ValueError>(what, ": header is not valid JSON: ", e.what());
  }
}

bool json_u64(const json& v, std::uint64_t& out) {
  if (!v.is_number_unsigned()) {
    // nlohmann stores non-negative literals as unsigned; a signed one here is negative.
    if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {
      out = static_cast<std::uint64_t>(v.get<std::int64_t>());
      return true;
    }
    return false;
  }
  out = v.get<std::uint64_t>();
  return true;
}

/// "<what>: tensor '<name>'" in messages, formatted only when one is raised (a
/// header of a million tensors would otherwise format a million strings).
struct TensorWho {
  const std::string& what;
  const std::string& name;
};
std::ostream& operator<<(std::ostream& os, const TensorWho& w) {
  return os << w.what << ": tensor '" << w.name << "'";
}

Entry parse_entry(const std::string& name, const json& info, const std::string& what) {
  const TensorWho who{what, name};
  MS_CHECK(info.is_object(), ValueError, who, ": expected an object with dtype, shape and ",
           "data_offsets, got ", info.type_name());
  for (const auto& [k, v] : info.items()) {
    (void)v;
    MS_CHECK(k == "dtype" || k == "shape" || k == "data_offsets", ValueError, who, ": unknown key ",
             squote(k), " (expected dtype, shape, data_offsets)");
  }
  for (const char* k : {"dtype", "shape", "data_offsets"})
    MS_CHECK(info.contains(k), ValueError, who, ": missing ", squote(k));

  Entry e{name, DType::Float32, {}, 0, 0};
  const json& jd = info["dtype"];
  MS_CHECK(jd.is_string(), ValueError, who, ": dtype must be a string, got ", jd.type_name());
  const auto& dname = jd.get_ref<const std::string&>();
  bool found = false;
  for (const auto& d : kDTypes)
    if (d.name == dname) {
      e.dtype = d.dtype;
      found = true;
    }
  if (!found) {
    for (const auto f : kForeignDTypes)
      MS_CHECK(f != dname, TypeError, who, ": dtype ", squote(dname),
               " has no ms equivalent (ms loads BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, "
               "BF16, F32, F64, C64)");
    detail::raise<ValueError>(who, ": unknown dtype ", squote(dname.substr(0, 32)));
  }

  const json& js = info["shape"];
  MS_CHECK(js.is_array(), ValueError, who, ": shape must be an array, got ", js.type_name());
  MS_CHECK(js.size() <= 64, ValueError, who, ": shape has ", js.size(),
           " dims (more than 64 is not a tensor ms can hold)");
  std::vector<std::uint64_t> dims;
  for (const auto& d : js) {
    std::uint64_t v = 0;
    MS_CHECK(json_u64(d, v), ValueError, who, ": shape entries must be non-negative integers, got ",
             d.dump());
    dims.push_back(v);
  }
  // numel and bytes, checked against int64 overflow (also when a dim is 0: such a
  // shape has no valid strides in ms either).
  const auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t numel = 1;
  for (const auto d : dims) {
    const std::uint64_t dd = std::max<std::uint64_t>(d, 1);
    MS_CHECK(d <= kMax && numel <= kMax / dd, ValueError, who, ": shape ", shape_text(dims),
             " overflows (more than 2^63 - 1 elements)");
    numel *= dd;
  }
  // Bytes too (again ignoring zero dims: strides in bytes must not overflow either).
  const auto item = static_cast<std::uint64_t>(dtype_itemsize(e.dtype));
  MS_CHECK(numel <= kMax / item, ValueError, who, ": shape ", shape_text(dims), " of ", dname,
           " overflows (more than 2^63 - 1 bytes)");
  for (const auto d : dims) {
    if (d == 0) numel = 0;
    e.shape.push_back(static_cast<std::int64_t>(d));
  }
  const std::uint64_t nbytes = numel * item;

  const json& jo = info["data_offsets"];
  MS_CHECK(jo.is_array() && jo.size() == 2 && json_u64(jo[0], e.begin) && json_u64(jo[1], e.end),
           ValueError, who, ": data_offsets must be [begin, end] non-negative integers, got ",
           jo.dump().substr(0, 64));
  MS_CHECK(e.begin <= e.end, ValueError, who, ": data_offsets [", e.begin, ", ", e.end,
           "] end before they begin");
  MS_CHECK(e.end - e.begin == nbytes, ValueError, who, ": shape ", shape_text(dims), " of ", dname,
           " needs ", nbytes, " bytes but data_offsets [", e.begin, ", ", e.end, "] span ",
           e.end - e.begin);
  return e;
}

/// Validates a header (the N bytes after the length) for `data_size` bytes of data.
Plan parse_header(std::span<const std::uint8_t> header, std::uint64_t data_size,
                  const std::string& what) {
  const auto bad = utf8_invalid_at(header);
  MS_CHECK(!bad, ValueError, what, ": header is not valid UTF-8 (byte ", bad.value_or(0),
           " of the header)");
  // The JSON parser would stop at a NUL as at the end of its input, accepting
  // "{}\0..." whatever follows; the reference reader rejects NUL anywhere.
  const auto nul = std::find(header.begin(), header.end(), std::uint8_t{0});
  MS_CHECK(nul == header.end(), ValueError, what, ": header holds a NUL byte at byte ",
           nul - header.begin(), " of ", header.size(),
           " (a header is JSON, padded with trailing spaces only)");
  const std::string_view text(reinterpret_cast<const char*>(header.data()), header.size());
  const json j = parse_json_strict(text, what);
  MS_CHECK(j.is_object(), ValueError, what, ": header must be a JSON object, got ", j.type_name());

  Plan plan;
  plan.entries.reserve(j.size());
  for (const auto& [name, info] : j.items()) {
    if (name == "__metadata__") {
      MS_CHECK(info.is_object(), ValueError, what,
               ": __metadata__ must be an object of strings, got ", info.type_name());
      for (const auto& [k, v] : info.items()) {
        MS_CHECK(v.is_string(), ValueError, what, ": __metadata__ ", squote(k),
                 " must be a string, got ", v.type_name());
        plan.metadata.emplace(k, v.get<std::string>());
      }
      continue;
    }
    plan.entries.push_back(parse_entry(name, info, what));
  }

  std::stable_sort(plan.entries.begin(), plan.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // The tensors must tile [0, data_size) exactly, in offset order.
  std::uint64_t cursor = 0;
  const Entry* prev = nullptr;
  for (const auto& e : plan.entries) {
    MS_CHECK(e.end <= data_size, ValueError, what, ": tensor ", squote(e.name), " data_offsets [",
             e.begin, ", ", e.end, "] are out of range: past the end of the data (", data_size,
             " bytes)");
    MS_CHECK(e.begin >= cursor, ValueError, what, ": tensor ", squote(e.name), " data_offsets [",
             e.begin, ", ", e.end, "] overlap tensor ", squote(prev ? prev->name : ""), " [",
             prev ? prev->begin : 0, ", ", prev ? prev->end : 0, "]");
    MS_CHECK(e.begin == cursor, ValueError, what, ": gap of ", e.begin - cursor,
             " bytes in the data before tensor ", squote(e.name), " (data_offsets [", e.begin, ", ",
             e.end, "], previous data ends at ", cursor, ")");
    cursor = e.end;
    prev = &e;
  }
  MS_CHECK(cursor == data_size, ValueError, what, ": ", data_size - cursor,
           " trailing bytes after the last tensor (data is ", data_size,
           " bytes, the tensors cover ", cursor, ")");
  return plan;
}

void check_bool_bytes(const Tensor& t, const std::string& name, const std::string& what) {
  if (t.dtype() != DType::Bool) return;
  const auto* p = reinterpret_cast<const std::uint8_t*>(t.raw_data());
  for (std::int64_t i = 0; i < t.numel(); ++i)
    MS_CHECK(p[i] <= 1, ValueError, what, ": BOOL tensor ", squote(name), " holds byte ",
             static_cast<int>(p[i]), " at element ", i, " (must be 0 or 1)");
}

/// Reads the 8-byte length and the header from `src`, validates, then reads the data.
SafetensorsFile load_from(const ByteSource& src, const std::string& what) {
  const std::uint64_t size = src.size();
  MS_CHECK(size >= 8, ValueError, what, ": file has ", size,
           " bytes; the 8-byte header length is missing");
  std::uint8_t len_bytes[8];
  src.read(0, len_bytes, 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  MS_CHECK(n >= 2, ValueError, what, ": header length ", n,
           " is too small (at least 2: a header is a JSON object, '{}' when empty)");
  MS_CHECK(n <= kSafetensorsMaxHeaderBytes, ValueError, what, ": header length ", n,
           " is over the limit of ", kSafetensorsMaxHeaderBytes, " bytes");
  MS_CHECK(n <= size - 8, ValueError, what, ": header length ", n, " is past the end of the file (",
           size, " bytes)");
  std::vector<std::uint8_t> header(static_cast<std::size_t>(n));
  src.read(8, header.data(), header.size());
  Plan plan = parse_header(header, size - 8 - n, what);

  SafetensorsFile out;
  out.metadata = std::move(plan.metadata);
  out.tensors.reserve(plan.entries.size());
  for (const auto& e : plan.entries) {
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin) src.read(8 + n + e.begin, t.raw_data(), e.end - e.begin);
    check_bool_bytes(t, e.name, what);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  src.finish();
  return out;
}

void check_utf8_name(std::string_view s, std::string_view kind, std::string_view what) {
  MS_CHECK(!utf8_invalid_at(std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size())),
           ValueError, what, ": ", kind, " is not valid UTF-8");
}

void write_safetensors(ByteSink& out, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata, std::string_view what) {
  std::set<std::string_view> names;
  for (const auto& [name, t] : tensors) {
    MS_CHECK(name != "__metadata__", ValueError, what,
             ": the name '__metadata__' is reserved for the metadata");
    MS_CHECK(names.insert(name).second, ValueError, what, ": the name ", squote(name),
             " is given twice");
    check_utf8_name(name, detail::str_cat("tensor name ", squote(name)), what);
    MS_CHECK(t.defined(), ValueError, what, ": tensor ", squote(name), " is undefined");
    MS_CHECK(!t.is_symbolic(), ValueError, what, ": tensor ", squote(name),
             " is symbolic (traced by ms::jit); save concrete tensors");
    (void)safetensors_dtype_name(t.dtype());  // TypeError for complex128 / int4
    MS_CHECK(t.rank() <= 64, ValueError, what, ": tensor ", squote(name), " has rank ", t.rank(),
             ", over the 64 dims the reader accepts");
  }
  for (const auto& [k, v] : metadata) {
    check_utf8_name(k, "a metadata key", what);
    check_utf8_name(v, detail::str_cat("metadata value of ", squote(k)), what);
  }

  std::vector<std::size_t> order(tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const int ra = dtype_rank(tensors[a].second.dtype()),
              rb = dtype_rank(tensors[b].second.dtype());
    return ra != rb ? ra > rb : tensors[a].first < tensors[b].first;
  });

  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  std::uint64_t offset = 0;
  for (const std::size_t i : order) {
    const Tensor& t = tensors[i].second;
    const auto nbytes = static_cast<std::uint64_t>(t.nbytes());
    ordered_json info = ordered_json::object();
    info["dtype"] = std::string(safetensors_dtype_name(t.dtype()));
    info["shape"] = t.shape().dims();
    info["data_offsets"] = {offset, offset + nbytes};
    header[tensors[i].first] = std::move(info);
    offset += nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::uint8_t len[8];
  for (int b = 0; b < 8; ++b) len[b] = static_cast<std::uint8_t>(text.size() >> (8 * b));
  out.write(len, 8);
  out.write(text.data(), text.size());

  const detail::TracingSuspend eager;  // concrete values, even inside a jit trace
  for (const std::size_t i : order) {
    // One tensor copied at a time.
    const Tensor c = detail::to_dense(tensors[i].second, tensors[i].second.dtype());
    if (c.numel() > 0) out.write(c.raw_data(), static_cast<std::size_t>(c.nbytes()));
  }
}

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) {
  const int r = dtype_rank(dtype);
  MS_CHECK(r >= 0, TypeError, "safetensors: dtype ", dtype,
           " has no safetensors name (the format has BOOL, U8, I8, I16, U16, I32, U32, I64, U64, "
           "F16, BF16, F32, F64, C64); cast it first");
  return kDTypes[r].name;
}

const Tensor& SafetensorsFile::at(std::string_view name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  std::string names;
  for (const auto& [n, t] : tensors) names += (names.empty() ? "" : ", ") + squote(n);
  detail::raise<ValueError>("SafetensorsFile::at: no tensor named ", squote(name),
                            " (the file has ", names.empty() ? "none" : names, ")");
}

bool SafetensorsFile::contains(std::string_view name) const {
  return std::any_of(tensors.begin(), tensors.end(),
                     [&](const auto& p) { return p.first == name; });
}

std::vector<std::uint8_t> to_safetensors_bytes(const NamedTensors& tensors,
                                               const std::map<std::string, std::string>& metadata) {
  std::vector<std::uint8_t> out;
  VectorSink sink(out);
  write_safetensors(sink, tensors, metadata, "to_safetensors_bytes");
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string what = "save_safetensors: '" + path + "'";
  write_file_atomic(path,
                    [&](ByteSink& sink) { write_safetensors(sink, tensors, metadata, what); });
}

SafetensorsFile from_safetensors_bytes(std::span<const std::uint8_t> bytes) {
  return memory_error_as("from_safetensors_bytes", [&] {
    return load_from(SpanSource(bytes, "from_safetensors_bytes"), "from_safetensors_bytes");
  });
}

SafetensorsFile load_safetensors(const std::string& path) {
  const std::string what = "load_safetensors: '" + path + "'";
  return memory_error_as(what, [&] {
    const InputFile file(path);
    return load_from(FileSource(file), what);
  });
}

}  // namespace ms::io
