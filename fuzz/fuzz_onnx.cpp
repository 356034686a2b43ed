// libFuzzer target: GraphCell's loader, ms::onnx::detail::load_program (the
// protobuf parse, opsets, ops, values, cycles, initializer sizes, then ONNX's
// checker and shape inference). Any ms::Error is an accepted rejection;
// anything else (a crash, a sanitizer report, another exception, a leak) is a
// bug. Seeds: fuzz/corpus/onnx/ (models of tests/onnx/graph_cell_fixtures.py).
#include <cstddef>
#include <cstdint>
#include <ms/onnx/graph_cell.hpp>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    (void)ms::onnx::detail::load_program(bytes, "<fuzz>");
  } catch (const ms::Error&) {
  }
  return 0;
}
