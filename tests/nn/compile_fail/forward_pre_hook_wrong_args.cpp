// A forward pre-hook takes (cell, args).
// expect: register_forward_pre_hook: the hook must be callable as fn(Cell& cell, const ms::Args& args) returning void, a Tensor, ms::Args or a std::optional of those
#include <ms/nn/cell.hpp>

struct Net : ms::Cell<Net> {
  ms::Tensor construct(const ms::Tensor& x) { return x; }
};

int main() {
  Net net;
  (void)net.register_forward_pre_hook([](int) {});
}
