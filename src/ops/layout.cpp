#include "ms/ops/op.hpp"

namespace ms::ops::detail {

void register_layout_ops() {}

}  // namespace ms::ops::detail
