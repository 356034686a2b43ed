// src/onnx/graph_program.hpp — a loaded ONNX graph as GraphCell runs it
// (private to libms_onnx): values by index, nodes in topological order with
// their attributes decoded, initializers as ms tensors.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/onnx/graph_cell.hpp"

namespace ms::onnx::detail {

/// Elements of one tensor a model may make at most (2^40: sizes beyond are
/// corrupt files): initializers, Constants, ConstantOfShape.
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;

/// One attribute of a node (the field its type uses).
struct Attr {
  std::int64_t i = 0;              ///< INT
  double f = 0;                    ///< FLOAT
  std::string s;                   ///< STRING
  std::vector<std::int64_t> ints;  ///< INTS
  std::vector<double> floats;      ///< FLOATS
  Tensor t;                        ///< TENSOR
};

/// One node: its op, name and the value indices it reads (-1: an omitted optional input) and
/// writes.
struct GNode {
  std::string op;                     ///< op_type
  std::string name;                   ///< the node's name, or `#<index>` when it has none
  std::vector<int> in;                ///< input values (-1: omitted)
  std::vector<int> out;               ///< output values (-1: omitted)
  std::map<std::string, Attr> attrs;  ///< attributes by name
};

/// One graph input (not an initializer).
struct GInput {
  std::string name;                    ///< the input's name
  int value = -1;                      ///< its value index
  DType dtype = DType::Float32;        ///< its element type
  std::vector<std::int64_t> dims;      ///< sizes, -1 where not fixed
  std::vector<std::string> dim_names;  ///< dim_param per dim (empty when none)
};

/// A loaded, checked model.
struct Program {
  std::string origin;                                        ///< the file or `<bytes>`
  int opset = 0;                                             ///< default-domain opset
  std::vector<std::string> values;                           ///< value names by index
  std::vector<GInput> inputs;                                ///< graph inputs, in order
  std::vector<int> outputs;                                  ///< graph outputs' values
  std::vector<std::pair<std::string, Tensor>> initializers;  ///< name, value
  std::vector<int> init_values;                              ///< value index per initializer
  std::vector<GNode> nodes;                                  ///< in topological order
};

/// Runs `p` on `inputs` (graph order, checked against the declared inputs)
/// with `inits` as the initializers' values (graph_run.cpp).
std::vector<Tensor> run_program(const Program& p, std::span<const Tensor> inits,
                                std::span<const Tensor> inputs);
/// The ms dtype of ONNX element type `t`; ValueError naming `what` otherwise.
DType dtype_from_onnx(int t, const std::string& what);
/// Whether GraphCell maps op `op` of the default domain.
bool op_supported(const std::string& op);
/// The op types the loader accepts (graph_load.cpp).
std::vector<std::string> supported_ops();
/// The op types the interpreter implements, sorted (graph_run.cpp).
std::vector<std::string> implemented_ops();

}  // namespace ms::onnx::detail
