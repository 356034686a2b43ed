// The model of the training-loop and checkpoint tests: 5 features, a hidden
// layer of 12, 3 classes.
#pragma once

#include <ms/cell.hpp>

namespace ms_test {

struct Net : ms::Cell<Net> {
  ms::nn::Dense fc1{5, 12}, fc2{12, 3};
  Net() { register_cells("fc1", fc1, "fc2", fc2); }
  ms::Tensor construct(const ms::Tensor& x) { return fc2(ms::relu(fc1(x))); }
};

}  // namespace ms_test
