// With ms::with_kwargs the forward hook takes (cell, args, kwargs, output).
// expect: register_forward_hook with ms::with_kwargs: the hook must be callable as fn(Cell& cell, const ms::Args& args, const ms::Kwargs& kwargs, const ms::Tensor& output)
#include <ms/nn/cell.hpp>

struct Net : ms::Cell<Net> {
  ms::Tensor construct(const ms::Tensor& x) { return x; }
};

int main() {
  Net net;
  (void)net.register_forward_hook([](Net&, const ms::Args&, const ms::Tensor&) {}, ms::with_kwargs);
}
