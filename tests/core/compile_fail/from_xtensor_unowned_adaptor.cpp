// An adaptor that does not own its memory needs the owner beside it.
// expect: ms::from_xtensor: this adaptor does not own its memory; pass its owner
#include <ms/core/xtensor.hpp>
#include <vector>

int main() {
  std::vector<float> v(4);
  (void)ms::from_xtensor(xt::adapt(v.data(), 4, xt::no_ownership(), std::vector<std::size_t>{4}));
}
