// ms/cell.hpp — what a model author needs: tensors and ops, ms::jit,
// ms::grad / ms::value_and_grad, Cell and Parameter, hooks, layers, losses,
// optimizers and initializers, warnings (ms::set_warning_handler).
//
//   #include <ms/cell.hpp>
//   struct MLP : ms::Cell<MLP> { ... };
#pragma once

#include "ms/autodiff/grad.hpp"
#include "ms/core/warning.hpp"
#include "ms/expr/expr.hpp"
#include "ms/hooks/hook_handle.hpp"
#include "ms/jit/jit.hpp"
#include "ms/nn/amp.hpp"
#include "ms/nn/any_cell.hpp"
#include "ms/nn/cell.hpp"
#include "ms/nn/generation.hpp"
#include "ms/nn/initializer.hpp"
#include "ms/nn/layers.hpp"
#include "ms/nn/loss.hpp"
#include "ms/nn/optim.hpp"
#include "ms/nn/parameter.hpp"
#include "ms/nn/transformer.hpp"
#include "ms/ops/attention.hpp"
#include "ms/ops/elementwise.hpp"
#include "ms/ops/host.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/linalg.hpp"
#include "ms/ops/nn.hpp"
#include "ms/ops/random.hpp"
#include "ms/ops/reduce.hpp"
