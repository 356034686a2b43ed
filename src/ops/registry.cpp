// The op table is filled here, explicitly, in one place: each stage file
// registers its ops. (No static registrars: they vanish from static libraries.)
#include "ms/ops/op.hpp"

namespace ms::ops::detail {

void register_all() {}

}  // namespace ms::ops::detail
