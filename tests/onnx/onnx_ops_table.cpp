// Prints docs/onnx_ops.md: `build/tests/onnx/onnx_ops_table > docs/onnx_ops.md`.
#include <iostream>

#include "ms/onnx/export.hpp"

int main() { std::cout << ms::onnx::op_support_markdown(); }
