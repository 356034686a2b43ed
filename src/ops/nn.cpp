#include "ms/ops/op.hpp"

namespace ms::ops::detail {

void register_nn_ops() {}

}  // namespace ms::ops::detail
