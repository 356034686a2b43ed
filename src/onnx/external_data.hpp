// src/onnx/external_data.hpp — ONNX external data (private to libms_onnx):
// GraphCell's reader of tensors kept in files next to the model, and
// export_model's writer of them. A tensor with `data_location = EXTERNAL`
// names its file with the `external_data` entry `location` (relative to the
// model's directory), where its bytes start (`offset`, default 0) and how many
// there are (`length`, default: the rest of the file); `checksum` (a SHA-1)
// is accepted and not verified.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ms/core/tensor.hpp"

namespace ms::io {
class InputFile;
}

namespace ms::onnx::detail {

/// The byte alignment of each tensor in a data file export_model writes.
inline constexpr std::uint64_t kExternalAlign = 64;

/// Reads the external data of one model's tensors. Each location is resolved
/// against the model's directory: an absolute location, one that leaves the
/// directory lexically (`..`) or, on the POSIX file system, through a symlink
/// (canonical paths compared), a missing file, an offset or length past the
/// file's end, a length other than the dims say, and an unknown or repeated key
/// are ValueErrors naming GraphCell and the tensor. Each file is opened once
/// (through ms's file system) and each tensor's bytes are read into its storage.
class ExternalReader {
 public:
  /// Resolves locations against `dir`; empty: the model came from bytes and
  /// any external tensor is a ValueError saying a path is needed.
  explicit ExternalReader(std::string dir);
  ~ExternalReader();
  ExternalReader(const ExternalReader&) = delete;
  ExternalReader& operator=(const ExternalReader&) = delete;

  /// Whether `t` keeps its data in a file; ValueError naming `what` when its
  /// fields disagree (external_data entries without EXTERNAL, or inline data too).
  static bool is_external(const ::onnx::TensorProto& t, const std::string& what);
  /// The tensor `t` (external) with dtype `dt` and `numel` elements, read from its file.
  Tensor read(const ::onnx::TensorProto& t, DType dt, std::int64_t numel, const std::string& what);
  /// After the last read: ValueError when a file changed while read; then
  /// points every external tensor of `m` to its file as ms opened it (ONNX's
  /// checker looks each location up relative to the working directory).
  void finish(::onnx::ModelProto& m) const;

 private:
  struct File;
  const File& open(const std::string& location, const std::string& what);
  std::string dir_;
  std::map<std::string, std::unique_ptr<File>> files_;  ///< by location, lexically normal
};

/// One tensor's bytes in a data file move_to_external lays out.
struct ExternalBlob {
  std::uint64_t offset = 0;            ///< where the bytes start in the data file
  std::unique_ptr<std::string> bytes;  ///< the tensor's former raw_data
};
/// Moves the raw data of each initializer of `m` holding at least `threshold`
/// bytes out of the model: the tensors point into the data file `location`
/// (each at an offset aligned to kExternalAlign, zeros between) and the returned
/// blobs, in file order with their offsets, are that file's contents.
std::vector<ExternalBlob> move_to_external(::onnx::ModelProto& m, const std::string& location,
                                           std::int64_t threshold);

}  // namespace ms::onnx::detail
