// ms::jit takes the argument kinds its key can hold, not any struct.
// expect: ms::jit: arguments must be tensors, numbers (integers, floats, bools), enums, strings, ms::mutable_ numbers or vectors, std::optional, or std::vector / std::array / std::tuple / std::pair of these
#include <ms/jit/jit.hpp>

struct Options {
  int steps = 1;
};

int main() {
  auto f = ms::jit([](const ms::Tensor& x, const Options& o) { return x * o.steps; });
  (void)f(ms::ones({2}), Options{});
}
