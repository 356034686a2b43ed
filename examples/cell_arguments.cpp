// cell_arguments — a cell whose construct takes more than tensors.
//
// `construct(x, steps, flag, mask, extra)` takes a tensor, an int, a bool, an
// optional mask and a vector of tensors. It runs eagerly, under ms::jit (the
// int and the bool are constants of the graph: a new value compiles a new
// graph, ms::mutable_ makes the int a graph input instead; a missing mask and
// a present one are two graphs), and with a forward pre-hook that replaces the
// int. The program checks each of these against the eager result and the
// jit's compile counter, and exits with 1 on any mismatch.
//
//   cell_arguments
#include <cstdio>
#include <ms/cell.hpp>
#include <optional>
#include <vector>

namespace {

struct Gated : ms::Cell<Gated> {
  ms::nn::Dense fc{4, 4};
  Gated() { register_cells("fc", fc); }
  // `steps` is an int, or a 0-d tensor when the caller passes ms::mutable_(steps):
  // the same code serves both.
  ms::Tensor construct(const ms::Tensor& x, const auto& steps, bool flag,
                       const std::optional<ms::Tensor>& mask,
                       const std::vector<ms::Tensor>& extra) {
    ms::Tensor y = fc(x) * steps;
    if (flag) y = ms::relu(y);
    if (mask) y = y * *mask;
    for (const ms::Tensor& e : extra) y = y + e;
    return y;
  }
};

int failures = 0;

void check(bool ok, const char* what) {
  std::printf("%-58s %s\n", what, ok ? "ok" : "FAILED");
  if (!ok) ++failures;
}

}  // namespace

int main() {
  Gated net;
  ms::Generator g(0);
  const ms::Tensor x = ms::normal({3, 4}, 0.0, 1.0, g);
  const ms::Tensor mask = ms::bernoulli({3, 4}, 0.5, g);
  const std::vector<ms::Tensor> extra{ms::normal({3, 4}, 0.0, 1.0, g)};

  // Eagerly.
  const ms::Tensor eager2 = net(x, 2, true, std::nullopt, extra);
  const ms::Tensor eager3 = net(x, 3, true, std::nullopt, extra);
  const ms::Tensor eager3m = net(x, 3, true, mask, extra);

  // Under ms::jit: the int, the bool and the mask's presence are in the key.
  auto f = ms::jit(net);
  check(ms::allclose(f(x, 2, true, std::nullopt, extra), eager2, 1e-5, 1e-5), "jit, steps 2");
  f(x, 2, true, std::nullopt, extra);
  check(f.compile_count() == 1, "same int: no recompile");
  check(ms::allclose(f(x, 3, true, std::nullopt, extra), eager3, 1e-5, 1e-5), "jit, steps 3");
  check(f.compile_count() == 2, "new int: recompile");
  check(ms::allclose(f(x, 3, true, mask, extra), eager3m, 1e-5, 1e-5), "jit, with a mask");
  check(f.compile_count() == 3, "nullopt vs mask: two graphs");
  f(x, 3, true, std::nullopt, extra);
  check(f.compile_count() == 3, "nullopt again: the first graph");

  // ms::mutable_: the int is a 0-d tensor input, one graph for every value.
  check(ms::allclose(f(x, ms::mutable_(2), true, std::nullopt, extra), eager2, 1e-5, 1e-5),
        "jit, mutable_(2)");
  check(ms::allclose(f(x, ms::mutable_(3), true, std::nullopt, extra), eager3, 1e-5, 1e-5),
        "jit, mutable_(3)");
  check(f.compile_count() == 4, "mutable_ int changes: no recompile");

  // A forward pre-hook sees every argument and replaces the int (steps + 1).
  ms::HookHandle h = net.register_forward_pre_hook([](Gated&, const ms::ArgList& args) {
    ms::ArgList r = args;
    r.set(1, args.get<std::int64_t>(1) + 1);
    return r;
  });
  check(ms::allclose(net(x, 2, true, std::nullopt, extra), eager3, 1e-5, 1e-5),
        "eager, hook replaces 2 by 3");
  check(ms::allclose(f(x, 2, true, std::nullopt, extra), eager3, 1e-5, 1e-5),
        "jit, hook replaces 2 by 3");
  h.remove();
  check(ms::allclose(f(x, 2, true, std::nullopt, extra), eager2, 1e-5, 1e-5), "jit, hook removed");

  std::printf("%d graphs compiled; %s\n", f.compile_count(), failures ? "FAILED" : "all ok");
  return failures ? 1 : 0;
}
