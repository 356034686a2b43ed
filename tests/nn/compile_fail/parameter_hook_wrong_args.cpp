// A parameter's gradient hook takes the gradient only.
// expect: Parameter::register_hook: the hook must be callable as fn(const ms::Tensor& grad) returning void, a Tensor or a std::optional<ms::Tensor>
#include <ms/nn/parameter.hpp>

int main() {
  ms::Parameter p(ms::ones({3}), "w");
  (void)p.register_hook([](const ms::Tensor& g, int) { return g; });
}
