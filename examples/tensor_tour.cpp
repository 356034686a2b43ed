// A tour of ms tensors: creation, views, dtypes, fused elementwise maths,
// errors. Run: build/examples/tensor_tour
#include <iostream>
#include <ms/ms.hpp>

int main() {
  ms::set_num_threads(2);

  ms::Tensor x = ms::arange(0, 6).reshape({2, 3});  // float32 [[0,1,2],[3,4,5]]
  std::cout << "x = " << x << "\n";
  std::cout << "x.T (a view, no copy) = " << x.transpose(0, 1) << "\n";
  std::cout << "x as float16 = " << x.to(ms::float16) << "\n";

  // One fused pass over memory, one allocation (the result).
  const ms::Tensor b = ms::tensor({1.f, -2.f, 3.f});  // broadcast along rows
  const auto before = ms::memory_stats().alloc_count;
  ms::Tensor y = ms::relu(x * b + 1.f) * 0.5f;
  std::cout << "relu(x * b + 1) * 0.5 = " << y
            << "  (allocations: " << ms::memory_stats().alloc_count - before << ")\n";

  // Weak scalars lift the kind, not the width: int32 * 0.5 -> float32.
  const ms::Tensor i = ms::tensor({1, 2, 3}, ms::int32);
  std::cout << "int32 * 0.5 -> " << (i * 0.5).dtype() << "\n";  // known without computing
  std::cout << "where(x > 2, x, -1) = " << ms::where(x > 2.f, x, -1.f) << "\n";

  // Bad input is an ms::Error that says what is wrong, raised where the
  // expression is built (not where its value is first used).
  try {
    auto bad = x + ms::ones({4});
    std::cout << "not reached: " << bad.shape() << "\n";
  } catch (const ms::Error& e) {
    std::cout << e.kind() << ": " << e.what() << "\n";
  }
  return 0;
}
