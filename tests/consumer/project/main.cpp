// A user program of ms: makes a tensor, takes a view without a copy, prints it.
#include <iostream>
#include <ms/ms.hpp>

int main() {
  const ms::Tensor x = ms::arange(0, 6).reshape({2, 3});  // [[0, 1, 2], [3, 4, 5]]
  const ms::Tensor t = x.transpose(0, 1);                 // a view: shape [3, 2]
  std::cout << t << "\n";
  std::cout << "view: " << (t.is_contiguous() ? "copy" : "strided") << "\n";
  std::cout << "elements:";
  for (double v : t.to_vector<double>()) std::cout << ' ' << v;
  std::cout << "\n";
  return 0;
}
