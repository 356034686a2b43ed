// A backward pre-hook takes (cell, grad_outputs).
// expect: register_backward_pre_hook: the hook must be callable as fn(Cell& cell, const ms::Args& grad_outputs)
#include <ms/nn/cell.hpp>

struct Net : ms::Cell<Net> {
  ms::Tensor construct(const ms::Tensor& x) { return x; }
};

int main() {
  Net net;
  (void)net.register_backward_pre_hook([](Net&, const ms::Args&, const ms::Args&) {});
}
