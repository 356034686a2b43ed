// With ms::with_kwargs the pre-hook takes (cell, args, kwargs).
// expect: register_forward_pre_hook with ms::with_kwargs: the hook must be callable as fn(Cell& cell, const ms::Args& args, const ms::Kwargs& kwargs)
#include <ms/nn/cell.hpp>

struct Net : ms::Cell<Net> {
  ms::Tensor construct(const ms::Tensor& x) { return x; }
};

int main() {
  Net net;
  (void)net.register_forward_pre_hook([](Net&, const ms::Args&) {}, ms::with_kwargs);
}
