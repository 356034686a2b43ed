// ms::onnx::GraphCell (ms/onnx/graph_cell.hpp): loading, the initializers as
// parameters and buffers of nested scopes, calls.
#include "ms/onnx/graph_cell.hpp"

#include <algorithm>
#include <climits>
#include <filesystem>

#include "graph_program.hpp"
#include "ms/io/file.hpp"

namespace ms::onnx {
namespace {

/// The parts of a dotted name; empty when a part is empty (`a..b`, `.a`, `a.`).
std::vector<std::string> name_parts(const std::string& name) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot - start));
    if (parts.back().empty()) return {};
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

/// The directory of the model file `path` (`.` for a bare file name).
std::string model_dir(const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return dir.empty() ? std::filesystem::path(".").string() : dir.string();
}

}  // namespace

GraphCell::GraphCell(const std::string& path, GraphCellOptions options) {
  const std::vector<std::uint8_t> bytes = io::read_file(path, INT_MAX);
  const std::string dir =
      options.external_data_dir.empty() ? model_dir(path) : options.external_data_dir;
  prog_ = detail::load_program(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path, dir);
  init(options);
}

GraphCell::GraphCell(std::string_view bytes, std::string origin, GraphCellOptions options) {
  prog_ = detail::load_program(bytes, origin, options.external_data_dir);
  init(options);
}

GraphCell::~GraphCell() = default;

detail::GraphScope& GraphCell::scope_for(const std::string& path) {
  for (std::size_t i = 0; i < scope_paths_.size(); ++i)
    if (scope_paths_[i] == path) return *scopes_[i];
  const std::size_t dot = path.rfind('.');
  CellBase& parent =
      dot == std::string::npos ? static_cast<CellBase&>(*this) : scope_for(path.substr(0, dot));
  scopes_.push_back(std::make_unique<detail::GraphScope>());
  scope_paths_.push_back(path);
  parent.insert_child_to_cell(dot == std::string::npos ? path : path.substr(dot + 1),
                              *scopes_.back());
  return *scopes_.back();
}

void GraphCell::init(GraphCellOptions options) {
  for (const auto& [name, t] : prog_->initializers) {
    std::vector<std::string> parts = name_parts(name);
    Slot s;
    if (parts.empty()) {  // an empty level: registered on the cell, '.' read as '_'
      s.owner = this;
      s.local = name;
      std::replace(s.local.begin(), s.local.end(), '.', '_');
    } else {
      s.local = parts.back();
      parts.pop_back();
      std::string path;
      for (const std::string& p : parts) path += (path.empty() ? "" : ".") + p;
      s.owner = path.empty() ? static_cast<CellBase*>(this) : &scope_for(path);
    }
    s.param = dtype_is_float(t.dtype());
    if (s.param)
      s.owner->register_parameter(s.local, Parameter(t, s.local, t.shape().rank() > 0));
    else
      s.owner->register_buffer(s.local, t);
    slots_.push_back(std::move(s));
  }
  if (!options.set_inputs) return;
  for (const auto& in : prog_->inputs)
    for (std::int64_t d : in.dims)
      if (d < 0) return (void)set_inputs(input_specs());
}

std::vector<Tensor> GraphCell::run(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> inits;
  inits.reserve(slots_.size());
  for (const Slot& s : slots_)
    inits.push_back(s.param ? Tensor(s.owner->get_parameter(s.local))
                            : s.owner->get_buffer(s.local));
  return detail::run_program(*prog_, inits, inputs);
}

std::vector<std::string> GraphCell::input_names() const {
  std::vector<std::string> v;
  for (const auto& in : prog_->inputs) v.push_back(in.name);
  return v;
}

std::vector<std::string> GraphCell::output_names() const {
  std::vector<std::string> v;
  for (int o : prog_->outputs) v.push_back(prog_->values[static_cast<std::size_t>(o)]);
  return v;
}

std::vector<TensorSpec> GraphCell::input_specs() const {
  std::vector<TensorSpec> specs;
  for (const auto& in : prog_->inputs) {
    std::vector<Dim> dims;
    for (std::size_t a = 0; a < in.dims.size(); ++a)
      dims.push_back(!in.dim_names[a].empty() ? Dim(in.dim_names[a]) : Dim(in.dims[a]));
    specs.emplace_back(std::move(dims), in.dtype);
  }
  return specs;
}

int GraphCell::opset() const { return prog_->opset; }

}  // namespace ms::onnx
