// has_aux is a field of the options, not a trailing bool.
// expect: ms::value_and_grad(f, {.position = {0, 1}, .weights = params, .has_aux = true}) (every field may be left out
#include <ms/autodiff/grad.hpp>

int main() {
  auto f = [](const ms::Tensor& x) { return ms::sum(x); };
  (void)ms::value_and_grad(f, std::nullopt, true);
}
