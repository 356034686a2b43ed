// What <ms/cell.hpp> carries for ms::grad: the trace stays behind
// autodiff::detail::GradTrace (defined in libms), so a model file parses no IR,
// no trace and no pass interface; eager and jitted gradients still work from it.
#include <doctest/doctest.h>

#include <ms/cell.hpp>
#include <vector>

// Declared here, defined only by ms/ir/graph.hpp and ms/jit/compile.hpp: if
// <ms/cell.hpp> included them, these types would be complete below.
namespace ms::ir {
struct Graph;
}  // namespace ms::ir
namespace ms::compiler {
class Executable;
}  // namespace ms::compiler

namespace {

template <class T>
concept Complete = requires {
  sizeof(T);
};

static_assert(!Complete<ms::compiler::TraceContext>,
              "<ms/cell.hpp> includes ms/jit/trace.hpp; ms::grad must reach the trace through "
              "autodiff::detail::GradTrace");
static_assert(!Complete<ms::ir::Graph>, "<ms/cell.hpp> includes ms/ir/graph.hpp");
static_assert(!Complete<ms::compiler::Executable>, "<ms/cell.hpp> includes ms/jit/compile.hpp");

}  // namespace

TEST_CASE("grad from <ms/cell.hpp> alone: eager, under ms::jit, and nested") {
  const ms::Tensor x = ms::from_vector<float>({1.f, -2.f, 3.f});
  auto f = [](const ms::Tensor& t) -> ms::Tensor { return ms::sum(t * t * t); };
  const std::vector<float> want{3.f, 12.f, 27.f};  // 3 t^2
  CHECK(ms::grad(f)(x).to_vector<float>() == want);
  auto jitted = ms::jit([&](const ms::Tensor& t) { return ms::grad(f)(t); });
  CHECK(jitted(x).to_vector<float>() == want);
  // grad of grad: d/dt sum(3 t^2) = 6 t.
  auto g = [&](const ms::Tensor& t) -> ms::Tensor { return ms::sum(ms::grad(f)(t)); };
  CHECK(ms::grad(g)(x).to_vector<float>() == std::vector<float>{6.f, -12.f, 18.f});
  auto [value, dx] = ms::value_and_grad(f)(x);
  CHECK(value.item<float>() == doctest::Approx(1.f - 8.f + 27.f));
  CHECK(dx.to_vector<float>() == want);
}
