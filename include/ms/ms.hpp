// ms/ms.hpp — everything in ms. Model authors usually need only ms/cell.hpp.
//
//   #include <ms/ms.hpp>
//   ms::Tensor a = ms::ones({2, 3}), b = ms::arange(0, 3);
//   ms::Tensor y = ms::relu(a * b + 1.f) * 0.5f;   // one fused pass, one allocation
//   std::cout << y << "\n";
#pragma once

#include "ms/autodiff/grad.hpp"
#include "ms/cell.hpp"
#include "ms/core/dtype.hpp"
#include "ms/core/error.hpp"
#include "ms/core/shape.hpp"
#include "ms/core/storage.hpp"
#include "ms/core/tensor.hpp"
#include "ms/data/dataloader.hpp"
#include "ms/data/fashion_mnist.hpp"
#include "ms/data/idx.hpp"
#include "ms/data/text.hpp"
#include "ms/expr/expr.hpp"
#include "ms/io/npy.hpp"
#include "ms/io/safetensors.hpp"
#include "ms/ir/graph.hpp"
#include "ms/jit/compile.hpp"
#include "ms/jit/dump.hpp"
#include "ms/jit/jit.hpp"
#include "ms/jit/script.hpp"
#include "ms/jit/trace.hpp"
#include "ms/kernels/parallel.hpp"
#include "ms/nn/initializer.hpp"
#include "ms/ops/attention.hpp"
#include "ms/ops/elementwise.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/linalg.hpp"
#include "ms/ops/nn.hpp"
#include "ms/ops/norm.hpp"
#include "ms/ops/op.hpp"
#include "ms/ops/random.hpp"
#include "ms/ops/reduce.hpp"
#include "ms/ops/samples.hpp"
#include "ms/train/checkpoint.hpp"
#include "ms/train/fit.hpp"
