// ms/ops/detail/nn_impl.hpp — the checked geometry of the nn ops, for the
// jit's fused forms of them.
//
// Stage: ops, internal to libms: the jit's fused conv2d and pooling ops
// (src/jit/fusion.cpp) run the kernels of ms/kernels/{conv,pool}.hpp with the
// sizes that conv2d's and max_pool2d's own checks computed; users include
// <ms/ops/nn.hpp>.
#pragma once

#ifndef MS_BUILDING_LIBRARY
#error "ms/ops/detail/nn_impl.hpp is internal to libms; include <ms/ops/nn.hpp> instead"
#endif

#include "ms/kernels/conv.hpp"
#include "ms/kernels/pool.hpp"
#include "ms/ops/nn.hpp"

namespace ms::ops::detail {

/// The kernel geometry of conv2d(x, w) with output shape ys (all checked by Conv2d::infer).
kernels::Conv2dGeometry conv2d_geometry(const Conv2dOptions& a, const Shape& xs, const Shape& ws,
                                        const Shape& ys);

/// The kernel geometry of max_pool2d(x) with output shape ys (checked by MaxPool2d::infer).
kernels::Pool2dGeometry max_pool2d_geometry(const MaxPool2dOptions& a, const Shape& xs,
                                            const Shape& ys);

/// Whether a and b can be one shape: an unknown rank or dim matches anything.
bool shapes_may_match(const Shape& a, const Shape& b);

}  // namespace ms::ops::detail
