// A cell call takes the argument kinds of ms/nn/cell_args.hpp, not any struct.
// expect: a cell call takes tensors (or expressions, Parameters), std::vector / std::array / std::tuple / std::pair of tensors, std::optional<ms::Tensor>, integers, enums, floats, bools, strings, ms::mutable_ numbers or vectors of tensors, and one trailing ms::Kwargs
#include <ms/nn/cell.hpp>

struct Options {
  int steps = 1;
};

struct Net : ms::Cell<Net> {
  ms::Tensor construct(const ms::Tensor& x, const Options& o) { return x * o.steps; }
};

int main() {
  Net net;
  (void)net(ms::ones({2}), Options{});
}
