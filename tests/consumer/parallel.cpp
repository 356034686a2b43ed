// A user kernel on ms's thread pool: kernels::parallel_for is instantiated in
// this program and hands its chunks to libms's pool, so it must link with
// `pkg-config --libs ms` alone (the install test compiles and links in
// separate steps, as build systems do).
#include <cstdint>
#include <iostream>
#include <ms/ms.hpp>
#include <vector>

int main() {
  ms::set_num_threads(2);
  std::vector<std::int64_t> v(100000);
  ms::kernels::parallel_for(static_cast<std::int64_t>(v.size()), 1000,
                            [&](std::int64_t begin, std::int64_t end) {
                              for (std::int64_t i = begin; i < end; ++i) v[i] = 2 * i;
                            });
  std::int64_t sum = 0;
  for (std::int64_t x : v) sum += x;
  std::cout << "parallel_for sum: " << sum << "\n";  // 2 * (0 + ... + 99999) = 9999900000
  return sum == 9999900000 ? 0 : 1;
}
