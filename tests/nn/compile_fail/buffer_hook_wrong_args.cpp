// A buffer registration hook takes (cell, name, buffer).
// expect: register_cell_buffer_registration_hook: the hook must be callable as fn(ms::CellBase& cell, const std::string& name, const ms::Tensor& buffer)
#include <ms/nn/cell.hpp>

int main() {
  (void)ms::register_cell_buffer_registration_hook([](const ms::Tensor&) {});
}
