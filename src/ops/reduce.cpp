#include "ms/ops/op.hpp"

namespace ms::ops::detail {

void register_reduce_ops() {}

}  // namespace ms::ops::detail
