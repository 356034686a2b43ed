// A buffer registration hook returns void, a Tensor or a std::optional<ms::Tensor>, not an int.
// expect: register_cell_buffer_registration_hook: the hook must return void, a Tensor or a std::optional<ms::Tensor>
#include <ms/nn/cell.hpp>

int main() {
  (void)ms::register_cell_buffer_registration_hook(
      [](ms::CellBase&, const std::string&, const ms::Tensor&) { return 1; });
}
