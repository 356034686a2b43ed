#include "ms/ops/op.hpp"

namespace ms::ops::detail {

void register_elementwise_ops() {}

}  // namespace ms::ops::detail
