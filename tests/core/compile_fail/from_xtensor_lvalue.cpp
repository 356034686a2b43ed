// A tensor over an lvalue container could outlive it: from_xtensor takes it by move.
// expect: ms::from_xtensor: pass the container by move (std::move(c)) or as a std::shared_ptr
#include <ms/core/xtensor.hpp>

int main() {
  xt::xarray<float> z = {1.0f, 2.0f};
  (void)ms::from_xtensor(z);
}
