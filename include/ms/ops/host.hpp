// ms/ops/host.hpp — host callbacks: C++ code that runs on concrete tensors in
// the middle of a compiled graph (DESIGN decision 6: hooks also work in graphs).
//
// Stage: ops. `ms::ops::host_call(fn, inputs)` calls `fn` at once on concrete
// tensors; while a trace is active it records a `HostCallback` node instead,
// and the executor calls `fn` each time the graph runs, with the concrete
// values. `fn` returns as many tensors as it was given, each of the same dtype
// and shape as its input (a ms::ValueError names the callback otherwise): it
// may observe them or replace them. Passes never fold, merge or reorder such a
// node past its inputs. For gradients a callback is the identity (its outputs'
// gradients flow to its inputs unchanged). Two more nodes act on gradients
// only, passing a value through at run time: `grad_hook` (backward hooks of
// cells) and `custom_grad` (a value with its own gradient: a Cell's bprop).
//
//   auto y = ms::ops::host_call([](std::vector<ms::Tensor> v) {
//     std::cout << ms::max(v[0]).item<float>() << "\n";   // concrete, even under ms::jit
//     return v;
//   }, {x}, "print_max")[0];
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ms/core/std_parts.hpp"
#include "ms/core/tensor.hpp"

namespace ms::ops {

/// A host callback: concrete tensors in, concrete tensors out (see host_call).
using HostFn = std::function<std::vector<Tensor>(std::vector<Tensor>)>;

/// Runs `fn` on `inputs` now (concrete) or, while tracing, records a node
/// that runs it each time the graph runs. `label` names it in dumps and errors.
std::vector<Tensor> host_call(HostFn fn, std::vector<Tensor> inputs, std::string label);

/// What a gradient hook does while the backward pass is traced: it gets the
/// gradients flowing into `grad_hook`'s outputs (zeros where none flows) and
/// returns the gradients for its inputs (usually through `host_call`, so that
/// user code sees concrete values each time the graph runs).
using GradHookFn = std::function<std::vector<Tensor>(std::vector<Tensor> grads)>;

/// The identity on `inputs`, except for gradients: when a gradient is traced
/// through it, `fn` maps the gradients of the outputs to those of the inputs.
/// Without an active trace no gradient can be taken, so it returns `inputs`.
/// At run time the node passes its inputs through (no copy).
std::vector<Tensor> grad_hook(GradHookFn fn, std::vector<Tensor> inputs, std::string label);

/// What a custom gradient does while the backward pass is traced: it gets the
/// inputs of `custom_grad`, the output `out` and its gradient `dout`, and
/// returns one gradient per input (an undefined Tensor: none), written with
/// ops so that they are recorded into the backward graph.
using CustomGradFn =
    std::function<std::vector<Tensor>(std::vector<Tensor> inputs, Tensor out, Tensor dout)>;

/// `out` (computed from `inputs` by any ops), with `fn` as its gradient: when
/// a gradient is traced through it, the inputs get `fn(inputs, out, dout)`
/// and nothing flows back through the ops that computed `out` (a Parameter
/// used only there gets a zero gradient). A Cell's `bprop` is built on it.
/// `fn` must return inputs.size() gradients, each with its input's shape and
/// dtype (ValueError, ShapeError, TypeError naming `label` and the input
/// otherwise). Without an active trace it returns `out`; at run time the node
/// passes `out` through (no copy).
///
///   // round(x) forward, the identity backward (a straight-through estimator):
///   auto y = ms::ops::custom_grad(
///       [](std::vector<ms::Tensor>, ms::Tensor, ms::Tensor dout) { return std::vector{dout}; },
///       {x}, ms::Tensor(ms::round(x)), "ste");
Tensor custom_grad(CustomGradFn fn, std::vector<Tensor> inputs, Tensor out, std::string label);

/// Number of closures (host callbacks, random draws) recorded into graphs so far that are still
/// alive.
std::size_t host_callbacks_alive();

namespace detail {
/// The closures that graph nodes refer to by their `fn` attribute (host
/// callbacks here, random draws in src/ops/random.cpp): kept for the life of
/// the process (a few bytes each: one per call site per compile).
std::int64_t keep_closure(std::shared_ptr<const void> closure);
/// The closure kept under `id`; ValueError naming `op` when there is none.
std::shared_ptr<const void> find_closure(std::int64_t id, std::string_view op);
}  // namespace detail

}  // namespace ms::ops
