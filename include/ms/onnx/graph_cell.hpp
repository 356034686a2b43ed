// ms/onnx/graph_cell.hpp — an ONNX model loaded as a cell (MindSpore's GraphCell).
//
// Stage: onnx (libms_onnx; link `ms_onnx_dep`). The model is parsed with
// ONNX's C++ library, checked by ONNX's checker and strict shape inference,
// and every node is mapped to ms ops (docs/onnx_import.md lists them). A call
// interprets the nodes with those ops, so a GraphCell runs eagerly, under
// ms::jit (the trace lowers into ms's IR: fusion, memory planning, dynamic
// shapes) and under ms::grad. Float initializers become Parameters named as
// the initializers (`fc1.weight`: a child cell `fc1` holding `weight`, so the
// state dict has the exported model's names); 0-d float initializers (the
// exporter's scalar constants) are Parameters with requires_grad = false;
// other initializers are buffers. Graph inputs with dim_params (or unknown
// dims) give set_inputs specs with named ms::Dim, so ms::jit compiles one
// graph for every size. This header includes no ONNX or protobuf header.
//
//   ms::GraphCell net("mlp.onnx");
//   ms::Tensor logits = net(x);                  // one output
//   std::vector<ms::Tensor> all = net(std::vector<ms::Tensor>{x});   // every output
//   auto f = ms::jit(net);                       // compiled, dynamic batch
//
// set_inputs specs describe tensor arguments, so ms::jit of the cell itself
// takes the tensor form; for the vector form under ms::jit, load with
// `{.set_inputs = false}` (shapes then follow ms::jit's auto-dynamic policy).
//
// Errors (each names GraphCell, the node and its op where there is one):
// ValueError for bytes that are not a ModelProto, an op, domain or opset not
// supported, an input, initializer or value that no one defines, a cycle,
// external data that cannot be read safely (docs/onnx_import.md: a location
// that is absolute or leaves the model's directory, a missing file, offsets
// past its end, a size other than the dims say; from bytes without
// GraphCellOptions::external_data_dir), sizes that overflow, ONNX's checker and
// shape inference rejecting the model, and an attribute ms cannot express;
// ShapeError / TypeError when a given tensor does not fit the declared input.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ms/core/error.hpp"
#include "ms/core/tensor.hpp"
#include "ms/nn/cell.hpp"

namespace ms::onnx {

/// The lowest ONNX opset (default domain) GraphCell loads.
inline constexpr int kMinImportOpset = 13;
/// The highest ONNX opset (default domain) GraphCell loads: Debian's libonnx
/// (1.12), whose checker runs on load, knows opsets up to 17.
inline constexpr int kMaxImportOpset = 17;

namespace detail {
/// A loaded, checked model: nodes in topological order (graph_program.hpp).
struct Program;
/// Parses, checks and maps `bytes` (a serialized ModelProto); `origin` names
/// it in messages; external data is resolved against the directory
/// `external_dir` (empty: none, so external data is an error). The errors of GraphCell.
std::shared_ptr<const Program> load_program(std::string_view bytes, const std::string& origin,
                                            const std::string& external_dir = {});
/// A child cell holding the parameters of one level of a dotted initializer name.
struct GraphScope : Cell<GraphScope> {};
}  // namespace detail

/// Options of GraphCell.
struct GraphCellOptions {
  /// Call set_inputs with the inputs' specs (named ms::Dim for dim_params)
  /// when an input has a dim that is not fixed, so that ms::jit makes that dim dynamic.
  bool set_inputs = true;
  /// The directory the `location` of tensors with external data is relative
  /// to. Empty: the model file's directory when loading from a path; when
  /// loading from bytes, external data is then a ValueError (a path is needed).
  std::string external_data_dir = {};
};

/// An ONNX model as a cell. Not copyable or movable (a cell).
class GraphCell : public Cell<GraphCell> {
 public:
  /// Loads the ONNX file `path` (read through ms's file system, as are the
  /// files of its external data, resolved against its directory).
  explicit GraphCell(const std::string& path, GraphCellOptions options = {});
  /// Loads a serialized ModelProto held in memory (external data only with
  /// GraphCellOptions::external_data_dir).
  GraphCell(std::string_view bytes, std::string origin, GraphCellOptions options = {});
  ~GraphCell() override;

  /// The graph's input names, in call order.
  std::vector<std::string> input_names() const;
  /// The graph's output names, in the order of the vector form's results.
  std::vector<std::string> output_names() const;
  /// One spec per input: dtype and dims (named ms::Dim for a dim_param, -1 for an unknown dim).
  std::vector<TensorSpec> input_specs() const;
  /// The default-domain opset the model imports.
  int opset() const;

  /// Runs the model on its inputs in graph order; the model must have one output.
  template <class... Rest>
  requires(std::is_same_v<Rest, Tensor>&&...) Tensor
      construct(const Tensor& x, const Rest&... rest) {
    const std::vector<Tensor> outs = run({x, rest...});
    MS_CHECK(outs.size() == 1, ValueError, "GraphCell: the model has ", outs.size(),
             " outputs; call it with a std::vector<ms::Tensor> of inputs to get them all");
    return outs[0];
  }
  /// Runs the model; every output, in graph order.
  std::vector<Tensor> construct(const std::vector<Tensor>& inputs) { return run(inputs); }

  /// Runs the model on `inputs` (graph order) with the cell's parameters.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

 private:
  void init(GraphCellOptions options);
  detail::GraphScope& scope_for(const std::string& path);

  std::shared_ptr<const detail::Program> prog_;
  std::vector<std::unique_ptr<detail::GraphScope>> scopes_;
  std::vector<std::string> scope_paths_;
  /// Per initializer: the cell holding it, its name there, and whether it is a Parameter.
  struct Slot {
    CellBase* owner = nullptr;
    std::string local;
    bool param = false;
  };
  std::vector<Slot> slots_;
};

}  // namespace ms::onnx

namespace ms {
/// MindSpore's name: an ONNX model as a cell (ms::onnx::GraphCell).
using GraphCell = onnx::GraphCell;
}  // namespace ms
