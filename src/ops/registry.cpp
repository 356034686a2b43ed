// The op table is filled here, explicitly, in one place: each stage file
// registers its ops. (No static registrars: they vanish from static libraries.)
#include "ms/ops/op.hpp"

namespace ms::ops::detail {

void register_elementwise_ops();  // src/ops/elementwise.cpp
void register_reduce_ops();       // src/ops/reduce.cpp
void register_linalg_ops();       // src/ops/linalg.cpp (matmul)
void register_nn_ops();           // src/ops/nn.cpp (conv2d, pooling)
void register_layout_ops();       // src/ops/layout.cpp (shape and indexing)
void register_view_ops();         // src/ops/view.cpp (slice, select; symbolic views)
void register_host_ops();         // src/ops/host.cpp (host callbacks: hooks in graphs)
void register_random_ops();       // src/ops/random.cpp (random functions under a trace)
void register_attention_ops();    // src/ops/attention.cpp (scaled dot-product attention)
void register_norm_ops();         // src/ops/norm.cpp (layer normalization)

void register_all() {
  register_elementwise_ops();
  register_reduce_ops();
  register_linalg_ops();
  register_nn_ops();
  register_layout_ops();
  register_view_ops();
  register_host_ops();
  register_random_ops();
  register_attention_ops();
  register_norm_ops();
}

}  // namespace ms::ops::detail
