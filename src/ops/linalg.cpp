#include "ms/ops/op.hpp"

namespace ms::ops::detail {

void register_linalg_ops() {}

}  // namespace ms::ops::detail
