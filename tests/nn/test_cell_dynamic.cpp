// Cell::set_inputs and ms::jit(cell): dynamic-shape specs on a cell, and their
// precedence against ms::enable_dynamic (seeds: _generate_compile_args).
#include <doctest/doctest.h>

#include <ms/cell.hpp>

namespace {
struct DenseRelu : ms::Cell<DenseRelu> {
  ms::nn::Dense fc{6, 3};
  DenseRelu() { register_cells("fc", fc); }
  ms::Tensor construct(const ms::Tensor& x) { return ms::relu(fc(x)); }
};
}  // namespace

TEST_CASE("nn: set_inputs gives ms::jit(cell) one graph for every batch size") {
  DenseRelu net;
  net.set_inputs({ms::TensorSpec({ms::Dim("batch"), 6}, ms::float32)});
  auto f = ms::jit(net);
  ms::Generator g(1);
  for (std::int64_t n : {4, 9, 1, 33}) {
    const ms::Tensor x = ms::normal({n, 6}, 0.0, 1.0, g);
    CHECK(ms::allclose(f(x), net(x), 1e-6, 1e-6));
  }
  CHECK(f.compile_count() == 1);
  CHECK(f.phase().find("(f32[batch,6])") != std::string::npos);
  CHECK_THROWS_WITH_AS(f(ms::ones({2, 7})),
                       doctest::Contains("ms::jit set_inputs: argument 0 dim 1 is 7 but its spec "
                                         "Float32[batch,6] needs 6"),
                       ms::ShapeError);
  net.set_inputs({ms::TensorSpec({-1, 6}, ms::float32), ms::TensorSpec({-1}, ms::int32)});
  CHECK_THROWS_WITH_AS(f(ms::ones({2, 6})),
                       doctest::Contains("2 input specs for a call with 1 arguments"),
                       ms::ValueError);
  // Cleared: a new shape compiles a static graph again.
  net.set_inputs({});
  f(ms::ones({5, 6}));
  f(ms::ones({6, 6}));
  CHECK(f.compile_count() == 3);
}

TEST_CASE("nn: enable_dynamic together with set_inputs is a ValueError") {
  DenseRelu net;
  net.set_inputs({ms::TensorSpec({-1, 6}, ms::float32)});
  auto f = ms::jit(ms::enable_dynamic(net, {ms::TensorSpec({-1, 6}, ms::float32)}));
  CHECK_THROWS_WITH_AS(
      f(ms::ones({2, 6})),
      doctest::Contains("when enable_dynamic is provided, set_inputs() cannot be set"),
      ms::ValueError);
  net.set_inputs({});
  CHECK(f(ms::ones({2, 6})).shape() == ms::Shape{2, 3});
  CHECK(f(ms::ones({5, 6})).shape() == ms::Shape{5, 3});
  CHECK(f.compile_count() == 1);
}
