// with_kwargs is a tag type, not a run-time bool.
// expect: register_forward_hook: pass the tag ms::with_kwargs (not a bool)
#include <ms/nn/cell.hpp>

struct Net : ms::Cell<Net> {
  ms::Tensor construct(const ms::Tensor& x) { return x; }
};

int main() {
  Net net;
  (void)net.register_forward_hook([](Net&, const ms::Args&, const ms::Kwargs&, const ms::Tensor&) {}, true);
}
