// A tour of ms tensors: creation, views, dtypes, printing.
#include <iostream>
#include <ms/ms.hpp>

int main() {
  ms::Tensor x = ms::arange(0, 6).reshape({2, 3});
  std::cout << x << "\n";
  std::cout << "transposed view: " << x.transpose(0, 1) << "\n";
  std::cout << "as float16: " << x.to(ms::float16) << "\n";
  return 0;
}
