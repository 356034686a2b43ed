// The positional form grad(f, position, weights) is gone: one options struct.
// expect: ms::grad and ms::value_and_grad take the function and one options struct: ms::grad(f), ms::grad(f, {.position = {0, 1}, .weights = params, .has_aux = true})
#include <ms/autodiff/grad.hpp>

int main() {
  const ms::Tensor w = ms::ones({3});
  auto f = [&](const ms::Tensor& x) { return ms::sum(x * w); };
  (void)ms::grad(f, 0, std::vector<ms::Tensor>{w});
}
