// A backward hook takes (cell, grad_inputs, grad_outputs).
// expect: register_backward_hook: the hook must be callable as fn(Cell& cell, const ms::Args& grad_inputs, const ms::Args& grad_outputs)
#include <ms/nn/cell.hpp>

struct Net : ms::Cell<Net> {
  ms::Tensor construct(const ms::Tensor& x) { return x; }
};

int main() {
  Net net;
  (void)net.register_backward_hook([](Net&, const ms::Args&) {});
}
