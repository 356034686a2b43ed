// ms/onnx/export.hpp — a traced, optimized graph written as an ONNX model.
//
// Stage: onnx (libms_onnx, built when Debian's libonnx and protobuf are found;
// link `ms_onnx_dep`). `export_model` traces a function or cell on example
// arguments as ms::jit does, runs the jit's graph passes that keep ops whole
// (dead-code and common-subexpression elimination, constant folding,
// simplification, transposed matmuls; no fusion), maps every op to ONNX
// (docs/onnx_ops.md lists the mapping, generated from the table in
// src/onnx/op_rules.cpp) and writes the model atomically through ms's file
// system (ms/io/file_system.hpp). Parameters become initializers named after
// the cell's parameters (`fc1.weight`); `.external_data = true` writes the
// large ones to a data file beside the model (ONNX external data). This header
// includes no ONNX or protobuf header.
//
//   MLP net;
//   net.set_train(false);
//   ms::onnx::export_model(net, ms::zeros({1, 784}), "mlp.onnx",
//                          {.input_names = {"x"}, .output_names = {"logits"},
//                           .dynamic_axes = {{"x", {{0, "batch"}}}, {"logits", {{0, "batch"}}}}});
//
// Symbolic dims come from `ms::enable_dynamic(net, specs...)`, `net.set_inputs(specs)`,
// `ExportOptions::input_signature` (that order of precedence, as ms::jit) and
// `ExportOptions::dynamic_axes`; each becomes a named `dim_param`. The graph is
// traced at the example sizes and again with every symbolic dim moved; numbers
// of the graph that move with them (a reshape's target) become ONNX's size-free
// forms (0: copy the input's dim, -1: inferred, else the dim read with Shape at
// run time), a constant arange(0, n) of a symbolic n becomes Range, and a
// number that cannot is a ValueError naming the op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ms/core/symbolic.hpp"
#include "ms/core/tensor.hpp"
#include "ms/dyn/spec.hpp"
#include "ms/jit/jit.hpp"

namespace ms::onnx {

/// The lowest ONNX opset export_model writes.
inline constexpr int kMinOpset = 13;
/// The highest ONNX opset export_model writes.
inline constexpr int kMaxOpset = 17;

/// Options of export_model, with the names of MindSpore's and PyTorch's ONNX export.
struct ExportOptions {
  /// Names of the graph inputs, one per tensor argument (empty: `input_0`, `input_1`, ...).
  /// Fewer names than inputs name the first ones.
  std::vector<std::string> input_names = {};
  /// Names of the graph outputs (empty: `output_0`, ...). Fewer names name the first ones.
  std::vector<std::string> output_names = {};
  /// The ONNX opset (default domain), kMinOpset to kMaxOpset. MindSpore's
  /// default, 11, is not written: opset 13 changed Squeeze, Unsqueeze, Split
  /// and ReduceSum to take their axes as inputs, and ms writes only that form.
  int opset_version = kMaxOpset;
  /// Parameters become initializers holding their values; false: graph inputs
  /// without values (the caller feeds the weights).
  bool export_params = true;
  /// Also list the parameters' and constant tensors' initializers among the
  /// graph inputs (older runtimes want it); the small shape and axes constants
  /// the mapping adds stay initializers only.
  bool keep_initializers_as_inputs = false;
  /// Symbolic dims by input or output name: axis -> dim name (`{{"x", {{0, "batch"}}}}`).
  /// Names an axis that a spec already made symbolic, or makes one symbolic.
  std::map<std::string, std::map<int, std::string>> dynamic_axes = {};
  /// Specs of the tensor arguments (as JitConfig::input_signature), when the
  /// function brings none of its own (enable_dynamic, set_inputs).
  std::vector<TensorSpec> input_signature = {};
  /// The model's doc_string.
  std::string doc_string = {};
  /// The model's producer_name.
  std::string producer_name = "ms";
  /// The model's producer_version.
  std::string producer_version = "0.1.0";
  /// Write the initializers holding at least external_data_threshold bytes to
  /// a data file next to the model (ONNX external data: each tensor's
  /// `location`, `offset` aligned to 64 bytes, `length`), as
  /// `onnx.save_model(..., save_as_external_data=True)` does; for models over
  /// protobuf's 2 GiB. The data file is written first, then the model, each
  /// atomically; when no initializer is that large, no data file is written.
  bool external_data = false;
  /// The data file's name, in the model's directory (no '/'); empty: the
  /// model's file name with `.data` appended (`mlp.onnx.data`).
  std::string external_data_file = {};
  /// The smallest raw size in bytes an initializer must have to go to the data
  /// file (onnx's `size_threshold`); 0: every initializer with raw data.
  std::int64_t external_data_threshold = 1024;
};

/// How one op of ms's op table exports.
struct OpSupport {
  /// The op-table name (`conv2d`).
  std::string op;
  /// Whether export_model maps it.
  bool supported = false;
  /// The ONNX ops it becomes (`Conv`, `Mul(x, Sigmoid(x))`), or empty.
  std::string onnx;
  /// Opset differences, or why it is unsupported.
  std::string note;
};

/// One row per op of ms::ops::registry(), in registration order: the export
/// mapping, or why there is none. An op the table does not name is listed
/// unsupported ("no ONNX mapping").
std::vector<OpSupport> op_support();

/// docs/onnx_ops.md: the table of op_support() as Markdown.
std::string op_support_markdown();

namespace detail {

/// What the template side of export_model hands to libms_onnx.
struct ExportRequest {
  /// Calls the function on symbolic inputs (one per example) and returns its
  /// flattened results.
  std::function<std::vector<Tensor>(std::span<const Tensor>)> trace;
  /// The example arguments (dtypes, sizes).
  std::vector<Tensor> examples;
  /// Specs of the function itself (enable_dynamic, set_inputs) and which API gave them.
  const std::vector<TensorSpec>* specs = nullptr;
  /// The API the specs came from ("enable_dynamic", "set_inputs"), or empty.
  std::string spec_api;
  /// The cell's parameters and buffers with their names (empty for a plain function).
  std::vector<std::pair<std::string, Tensor>> named_tensors;
};

/// Traces, maps and writes (src/onnx/export.cpp).
void export_request(const ExportRequest& req, const std::string& path, const ExportOptions& opts);

/// The named parameters and buffers of a cell, of the cell a wrapper holds, or none.
template <class F>
std::vector<std::pair<std::string, Tensor>> named_tensors_of(const F& f) {
  if constexpr (requires {
                  f.parameters_and_names();
                  f.buffers_and_names();
                }) {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const auto& [name, p] : f.parameters_and_names()) out.emplace_back(name, Tensor(p));
    for (const auto& [name, b] : f.buffers_and_names()) out.emplace_back(name, b);
    return out;
  } else if constexpr (dyn::IsEnableDynamic<F>::value) {
    return named_tensors_of(f.fn);
  } else if constexpr (requires { *f.cell; }) {
    return named_tensors_of(*f.cell);
  } else {
    return {};
  }
}

/// The specs a function brings (enable_dynamic, then set_inputs), and their API.
template <class F>
std::pair<std::string, const std::vector<TensorSpec>*> specs_of(const F& f) {
  if constexpr (dyn::IsEnableDynamic<F>::value) {
    return {"enable_dynamic", &f.specs};
  } else if constexpr (dyn::HasInputs<F>) {
    if (!f.get_inputs().empty()) return {"set_inputs", &f.get_inputs()};
  }
  return {"", nullptr};
}

}  // namespace detail

/// Exports `fn` (a cell or a function of tensors; taken by reference, not
/// copied) traced on `example_args` (a tuple of tensors) to the ONNX file
/// `path`. ValueError for options out of range, an op without an ONNX
/// mapping (naming it), an in-place parameter update, or a dim that cannot be
/// symbolic; the io stage's errors when the file cannot be written (the old
/// file is kept).
template <class F, class... A>
void export_model(F&& fn, const std::tuple<A...>& example_args, const std::string& path,
                  const ExportOptions& options = {}) {
  static_assert((std::is_same_v<A, Tensor> && ...),
                "ms::onnx::export_model: example arguments must be ms::Tensor");
  auto& f = fn;  // const when fn is: a const function object exports too
  detail::ExportRequest req;
  req.trace = [&f](std::span<const Tensor> in) {
    auto r = [&]<std::size_t... I>(std::index_sequence<I...>) { return f(in[I]...); }
    (std::index_sequence_for<A...>{});
    using Out = ResultTraits<std::remove_cvref_t<decltype(r)>>;
    std::vector<Tensor> flat;
    std::vector<std::size_t> structure;
    Out::flatten(r, flat, structure);
    return flat;
  };
  std::apply([&](const auto&... a) { (req.examples.push_back(a), ...); }, example_args);
  auto [api, specs] = detail::specs_of(f);
  req.spec_api = api;
  req.specs = specs;
  req.named_tensors = detail::named_tensors_of(f);
  detail::export_request(req, path, options);
}

/// export_model with one example argument.
template <class F>
void export_model(F&& fn, const Tensor& example, const std::string& path,
                  const ExportOptions& options = {}) {
  export_model(std::forward<F>(fn), std::tuple<Tensor>(example), path, options);
}

}  // namespace ms::onnx
