// An ms::ArgList pre-hook returns void, ms::ArgList or an optional of it, not an int.
// expect: a hook seeing every argument kind is fn(Cell& cell, const ms::ArgList& args) returning void, ms::ArgList or a std::optional of it
#include <ms/nn/cell.hpp>

struct Net : ms::Cell<Net> {
  ms::Tensor construct(const ms::Tensor& x) { return x; }
};

int main() {
  Net net;
  (void)net.register_forward_pre_hook([](Net&, const ms::ArgList&) { return 1; });
}
