// A forward hook returns void, a Tensor, ms::Args or an optional of those, not an int.
// expect: register_forward_hook: the hook must be callable as fn(Cell& cell, const ms::Args& args, const ms::Tensor& output) or fn(Cell& cell, const ms::Args& args, const ms::Args& outputs)
#include <ms/nn/cell.hpp>

struct Net : ms::Cell<Net> {
  ms::Tensor construct(const ms::Tensor& x) { return x; }
};

int main() {
  Net net;
  (void)net.register_forward_hook([](Net&, const ms::Args&, const ms::Tensor&) { return 1; });
}
