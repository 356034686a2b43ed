// Every op of the op table gives the same result eagerly and under ms::jit
// (jit levels O0 and O1), table-driven over ms::ops::registry(): a new op
// without a sample case here fails the test by name.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <ms/ms.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "random.hpp"
#include "strided.hpp"

using namespace ms;
using ms::test::random_tensor;

namespace {

using Tensors = std::vector<Tensor>;
using CaseFn = std::function<Tensors(const Tensors&)>;

/// One sample of an op: inputs for a seed and the function to run eagerly and jitted.
struct Case {
  std::string op;  ///< the registry op it samples (its O0 graph must hold a node of it)
  std::string label;
  std::function<Tensors(unsigned)> inputs;
  CaseFn fn;
  /// rtol = atol for float results; 0: bit-identical. Non-zero only where a
  /// level legitimately rounds differently from the eager expression tree.
  double tol_o0 = 0, tol_o1 = 0;
};

// ---------------------------------------------------------------- elementwise cases

/// Inputs of elementwise op Op with the given shapes and dtype; `where`'s
/// condition is bool.
template <class Op>
Tensors ew_inputs(const std::vector<Shape>& shapes, DType dt, unsigned seed) {
  Tensors in;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const unsigned s = seed * 31 + static_cast<unsigned>(i);
    if (Op::rule == ops::EwRule::Select && i == 0) {
      in.push_back(random_tensor(bool_, shapes[i], {}, s));
      continue;
    }
    in.push_back(
        random_tensor(dt, shapes[i], test::range_of(ops::ew_domain<Op>(static_cast<int>(i))), s));
  }
  return in;
}

std::vector<Shape> ew_shapes(int arity, bool broadcast3d) {
  if (arity == 1) return {broadcast3d ? Shape{2, 3, 4} : Shape{3, 4}};
  if (arity == 2)
    return broadcast3d ? std::vector<Shape>{{2, 1, 4}, {3, 1}} : std::vector<Shape>{{3, 4}, {4}};
  return broadcast3d ? std::vector<Shape>{{3, 1}, {2, 1, 4}, {}}
                     : std::vector<Shape>{{3, 4}, {4}, {1}};
}

template <class Op>
void add_ew_cases(std::vector<Case>& cases) {
  const std::string name(Op::name);
  constexpr int n = Op::arity;
  const ops::OpDef* def = &ops::op(name);
  // Through the op table, float32, broadcasting [3,4] with [4] (and [1]).
  auto via_table = [def](const Tensors& xs) { return ops::call(*def, xs); };
  cases.push_back({name, "op table, f32 [3,4] with [4]",
                   [](unsigned s) { return ew_inputs<Op>(ew_shapes(n, false), float32, s); },
                   via_table});
  // Through the expression function (ms::exp, ms::add, ...), float64, 3-d broadcasting.
  auto via_expr = [](const Tensors& xs) -> Tensors {
    if constexpr (n == 1)
      return {EwFunction<Op>{}(xs[0])};
    else if constexpr (n == 2)
      return {EwFunction<Op>{}(xs[0], xs[1])};
    else
      return {EwFunction<Op>{}(xs[0], xs[1], xs[2])};
  };
  cases.push_back({name, "expression, f64 broadcast to [2,3,4]",
                   [](unsigned s) { return ew_inputs<Op>(ew_shapes(n, true), float64, s); },
                   via_expr});
  // Integer dtype (float-rule ops compute as float32; pow of ints stays int).
  cases.push_back({name, "op table, i32",
                   [](unsigned s) { return ew_inputs<Op>(ew_shapes(n, false), int32, s); },
                   via_table});
  // float16 / bfloat16: computed in float32, rounded once on store, as eager.
  cases.push_back({name, "expression, f16",
                   [](unsigned s) { return ew_inputs<Op>(ew_shapes(n, false), float16, s); },
                   via_expr});
  cases.push_back({name, "op table, bf16",
                   [](unsigned s) { return ew_inputs<Op>(ew_shapes(n, false), bfloat16, s); },
                   via_table});
  // Unsigned (values >= 0), empty and rank-0 operands.
  cases.push_back({name, "op table, u8",
                   [](unsigned s) { return ew_inputs<Op>(ew_shapes(n, false), uint8, s); },
                   via_table});
  cases.push_back({name, "op table, empty [0,4] with [4]",
                   [](unsigned s) {
                     std::vector<Shape> sh = ew_shapes(n, false);
                     sh[0] = Shape{0, 4};
                     return ew_inputs<Op>(sh, float32, s);
                   },
                   via_table});
  cases.push_back(
      {name, "expression, rank 0",
       [](unsigned s) { return ew_inputs<Op>(std::vector<Shape>(n, Shape{}), float32, s); },
       via_expr});
  // Mixed dtypes: an int32 tensor with a float32 one promotes.
  if constexpr (n >= 2) {
    cases.push_back({name, "expression, i32 with f32",
                     [name](unsigned s) {
                       Tensors in = ew_inputs<Op>(ew_shapes(n, false), float32, s);
                       if (name != "where")
                         in[0] = ew_inputs<Op>(ew_shapes(n, false), int32, s)[0];
                       else
                         in[1] = ew_inputs<Op>(ew_shapes(n, false), int32, s)[1];
                       return in;
                     },
                     via_expr});
  }
  // Weak scalar operands through the expression templates, and the op inside a
  // fused chain of weak-scalar arithmetic (one tree eagerly, one Fused node at O1).
  auto in1 = [](unsigned s) {
    return Tensors{random_tensor(float32, {3, 4}, test::range_of(ops::ew_domain<Op>(0)), s)};
  };
  if constexpr (n == 1) {
    cases.push_back({name, "in a chain with weak scalars, f32", in1, [](const Tensors& xs) {
                       return Tensors{EwFunction<Op>{}(xs[0] * 0.5f + 0.25f) * 2.f - 1.f};
                     }});
    cases.push_back(
        {name, "in a chain with weak scalars, i32",
         [](unsigned s) {
           return Tensors{random_tensor(int32, {3, 4}, test::range_of(ops::ew_domain<Op>(0)), s)};
         },
         [](const Tensors& xs) { return Tensors{EwFunction<Op>{}(xs[0] * 2 + 1) - 3}; }});
  } else if constexpr (n == 2) {
    const float s1 = name == "pow" ? 2.f : 1.5f;
    cases.push_back({name, "weak scalar rhs / lhs, f32", in1, [s1](const Tensors& xs) {
                       return Tensors{EwFunction<Op>{}(xs[0], s1), EwFunction<Op>{}(s1, xs[0]),
                                      EwFunction<Op>{}(xs[0] * 2.f, 1.f - xs[0])};
                     }});
    cases.push_back({name, "weak int scalar with i64 and f64",
                     [](unsigned s) {
                       return Tensors{
                           random_tensor(int64, {3, 4}, test::range_of(ops::ew_domain<Op>(0)), s),
                           random_tensor(float64, {4}, {0.5, 2}, s + 1)};
                     },
                     [](const Tensors& xs) {
                       return Tensors{EwFunction<Op>{}(xs[0], 2), EwFunction<Op>{}(3, xs[0]),
                                      EwFunction<Op>{}(xs[1], 2), EwFunction<Op>{}(2.5, xs[1])};
                     }});
  } else if constexpr (std::is_same_v<Op, ops::Where>) {
    cases.push_back({name, "weak scalar branches", in1, [](const Tensors& xs) {
                       return Tensors{ms::where(xs[0] > 0.f, xs[0], 0.f),
                                      ms::where(xs[0] < 0.5f, -1.f, xs[0] * 2.f),
                                      ms::where(xs[0] != 0.f, 1, 2)};
                     }});
  } else {
    cases.push_back({name, "weak scalar bounds", in1, [](const Tensors& xs) {
                       return Tensors{ms::clamp(xs[0], -1.f, 1.f), ms::clamp(xs[0] * 3.f, 0.f, 2),
                                      ms::clamp(xs[0], -0.5f, xs[0] * 0.5f)};
                     }});
  }
  // bool inputs where they are meaningful.
  if constexpr (Op::rule == ops::EwRule::Logical || Op::rule == ops::EwRule::Compare) {
    cases.push_back(
        {name, "bool inputs",
         [](unsigned s) {
           Tensors in;
           for (const Shape& sh : ew_shapes(n, false))
             in.push_back(random_tensor(bool_, sh, {}, s * 7 + static_cast<unsigned>(in.size())));
           return in;
         },
         via_table});
  }
}

template <class... Ops>
void add_all_ew_cases(std::vector<Case>& cases, ops::OpList<Ops...>) {
  (add_ew_cases<Ops>(cases), ...);
}

/// Op `Op` inside a chain with weak scalars before and after it, over
/// [3, 1000] (more than one kernels::kTile of 512 elements), so that the
/// fused programs' registers are reused from tile to tile.
template <class Op>
void add_ew_multitile_case(std::vector<Case>& cases) {
  const std::string name(Op::name);
  constexpr int n = Op::arity;
  cases.push_back(
      {name, "in a weak-scalar chain over [3, 1000]",
       [](unsigned s) {
         const std::vector<Shape> sh = {{3, 1000}, {1000}, {1}};
         return ew_inputs<Op>(std::vector<Shape>(sh.begin(), sh.begin() + n), float32, s);
       },
       [](const Tensors& xs) -> Tensors {
         if constexpr (n == 1)
           return {EwFunction<Op>{}(xs[0] * 0.5f + 0.25f) * 2.f - 1.f};
         else if constexpr (n == 2)
           return {EwFunction<Op>{}(xs[0] * 0.5f + 0.25f, xs[1] * 2.f) * 2.f - 1.f};
         else if constexpr (std::is_same_v<Op, ops::Where>)
           return {ms::where(xs[0], xs[1] * 0.5f + 0.25f, xs[2] * 2.f) * 2.f - 1.f};
         else
           return {EwFunction<Op>{}(xs[0] * 0.5f + 0.25f, xs[1] * 2.f, xs[2]) * 2.f - 1.f};
       }});
}

template <class... Ops>
std::vector<Case> make_multitile_cases(ops::OpList<Ops...>) {
  std::vector<Case> cases;
  (add_ew_multitile_case<Ops>(cases), ...);
  return cases;
}

// ---------------------------------------------------------------- other ops

std::vector<Case> make_cases() {
  std::vector<Case> c;
  add_all_ew_cases(c, ops::ElementwiseOps{});

  auto one = [](Shape s, DType dt = float32, double lo = -2, double hi = 2) {
    return [s, dt, lo, hi](unsigned seed) {
      return Tensors{random_tensor(dt, s, {lo, hi, std::llround(lo), std::llround(hi)}, seed)};
    };
  };
  auto f1 = [](std::function<Tensor(const Tensor&)> g) {
    return [g](const Tensors& xs) { return Tensors{g(xs[0])}; };
  };
  // A fused float16 chain: eager evaluates the tree in float32 registers and
  // rounds once; O0 runs one node per op and rounds every intermediate to
  // float16 (half an ulp each), so O0 gets a float16-sized tolerance. O1 fuses
  // the same tree and must match exactly.
  c.push_back({"mul", "f16 chain (O0 rounds intermediates)", one({3, 4}, float16),
               f1([](const Tensor& x) { return Tensor(ms::exp(x * 0.7f + 0.1f) * x - 0.3f); }),
               4e-3, 0});

  // Reductions inside expressions (their entries' samples cover the op alone).
  const Shape r3{3, 4, 5};
  c.push_back({"sum", "of an expression, f16", one(r3, float16),
               f1([](auto& x) { return sum(x * 2.f + 1.f, {2}); })});
  c.push_back({"all", "axes {1}", one(r3), f1([](auto& x) { return all(x > -1.5f, {1}); })});
  c.push_back({"any", "all axes", one(r3), f1([](auto& x) { return any(x > 1.9f); })});
  c.push_back({"any", "axes {0, 1} of bool", one(r3), f1([](auto& x) {
                 return any(x < 0.f, {0, 1});
               })});

  // matmul.
  auto two = [](Shape a, Shape b, DType dt = float32) {
    return [a, b, dt](unsigned s) {
      return Tensors{random_tensor(dt, a, {-2, 2, -2, 2}, s),
                     random_tensor(dt, b, {-2, 2, -2, 2}, s + 9)};
    };
  };
  auto f2 = [](std::function<Tensor(const Tensor&, const Tensor&)> g) {
    return [g](const Tensors& xs) { return Tensors{g(xs[0], xs[1])}; };
  };
  // Fused programs without weak scalars over more than one tile (2048 elements).
  // exp(y) of the [1000] operand runs once per broadcast element inside the
  // fused tree (eager, O1) but once on [1000] at O0: an element can fall in
  // Eigen's SIMD body in one and in its scalar tail (std::exp) in the other,
  // which differ by 1 ulp. So O0 gets a 1-ulp tolerance; O1 must be exact.
  c.push_back({"sub", "tensor-only chain over [3, 1000]", two({3, 1000}, {1000}),
               f2([](auto& x, auto& y) { return Tensor((x + y) * x - ms::exp(y) * ms::tanh(x)); }),
               1e-6, 0});
  c.push_back(
      {"matmul", "transposed operand, then bias and relu", two({4, 3}, {4, 5}),
       f2([](auto& a, auto& b) { return Tensor(relu(matmul(transpose(a, 0, 1), b) + 1.f)); })});

  // Layout.
  c.push_back({"reshape", "of a transpose (a copy)", one(r3),
               f1([](auto& x) { return reshape(transpose(x, 0, 2), {-1}); })});
  c.push_back({"reshape", "method on an expression result", one({3, 4}), f1([](auto& x) {
                 return Tensor(x * 2.f).reshape({2, 6});
               })});
  c.push_back({"transpose", "method, then exp", one({3, 4}),
               f1([](auto& x) { return Tensor(ms::exp(x.transpose(0, 1))); })});
  c.push_back({"broadcast_to", "[3,1] -> [2,3,4], then add", one({3, 1}), f1([](auto& x) {
                 return Tensor(broadcast_to(x, {2, 3, 4}) + 1.f);
               })});
  c.push_back(
      {"concat", "axis 0, i32 with f32 promotes", two({2, 4}, {3, 4}), [](const Tensors& xs) {
         return Tensors{concat({xs[0].to(int32), xs[1]}, 0)};
       }});
  c.push_back({"split", "sizes {1, 3} along 0, then used", one({4, 3}), [](const Tensors& xs) {
                 const Tensors p = split(xs[0], std::vector<std::int64_t>{1, 3}, 0);
                 return Tensors{p[0] * 2.f, sum(p[1], {0})};
               }});
  c.push_back({"cast", "f32 -> f16, i32, bool", one({3, 4}), [](const Tensors& xs) {
                 return Tensors{cast(xs[0], float16), cast(xs[0] * 3.f, int32), cast(xs[0], bool_)};
               }});
  c.push_back({"cast", "i64 -> f64 method", one({3, 4}, int64),
               [](const Tensors& xs) { return Tensors{xs[0].to(float64) * 0.5f}; }});
  // Host callbacks run the same C++ at run time as eagerly.
  c.push_back({"host_callback", "scales by 2 on the host", one({3, 4}), f1([](auto& x) {
                 auto twice = [](std::vector<Tensor> v) {
                   return std::vector<Tensor>{Tensor(v[0] * 2.0f)};
                 };
                 return Tensor(ops::host_call(twice, {x}, "twice")[0] + 1.0f);
               })});
  c.push_back({"grad_hook", "identity forward", one({3, 4}), f1([](auto& x) {
                 auto id = [](std::vector<Tensor> g) { return g; };
                 return Tensor(ops::grad_hook(id, {x}, "id")[0] * 3.0f);
               })});
  c.push_back({"custom_grad", "forward is its last input", one({3, 4}), f1([](auto& x) {
                 auto vjp = [](std::vector<Tensor>, Tensor, Tensor dout) {
                   return std::vector<Tensor>{dout};
                 };
                 return Tensor(ops::custom_grad(vjp, {x}, Tensor(x * 3.0f), "c") + 1.0f);
               })});
  // A draw runs when the graph runs; probabilities 1 make its value fixed.
  c.push_back({"random", "bernoulli(probs = 1) times x", one({3, 4}), f1([](auto& x) {
                 static Generator g(3);
                 return Tensor(bernoulli(x * 0.0f + 1.0f, g) * x);
               })});
  // Other dtypes through the non-elementwise ops.
  c.push_back({"sum", "u8 and bool", one({3, 4}, uint8, 0, 9), [](const Tensors& xs) {
                 return Tensors{sum(xs[0], {1}), sum(xs[0] > 4, {0})};
               }});
  c.push_back({"mean", "f16 and bf16", one({3, 4}, float16), [](const Tensors& xs) {
                 return Tensors{mean(xs[0], {1}), mean(xs[0].to(bfloat16))};
               }});
  c.push_back({"max", "i8 and bool", one({3, 4}, int8, -9, 9), [](const Tensors& xs) {
                 return Tensors{max(xs[0], {0}), max(xs[0] > 0, {1})};
               }});
  c.push_back({"concat", "bool", one({2, 3}), [](const Tensors& xs) {
                 return Tensors{concat({xs[0] > 0.f, xs[0] < 0.5f}, 1)};
               }});
  c.push_back(
      {"pad", "f16 constant, bool replicate", one({2, 3}, float16), [](const Tensors& xs) {
         return Tensors{pad(xs[0], {1, 1}, "constant", 0.25), pad(xs[0] > 0, {1, 0}, "replicate")};
       }});
  c.push_back({"cast", "bool -> f32, f16 -> bf16, f64 -> u8", one({3, 4}, float64, 0, 9),
               [](const Tensors& xs) {
                 return Tensors{cast(xs[0] > 4.0, float32), cast(cast(xs[0], float16), bfloat16),
                                cast(xs[0], uint8)};
               }});
  // Outputs that alias each other or the input: an op returning a view, twice.
  c.push_back({"split", "outputs next to the input they view", one({4, 2}), [](const Tensors& xs) {
                 Tensors p = split(xs[0], 2, 0);
                 p.push_back(xs[0]);
                 p.push_back(p[0]);
                 return p;
               }});
  // Empty and rank-0 operands of other ops.
  return c;
}

// ---------------------------------------------------------------- running a case

/// Equal dtype and shape; integer and bool values bit-exact; float values
/// within tol (0: exact; NaNs equal).
bool same(const Tensor& got, const Tensor& want, double tol, std::string& why) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    why = ::ms::detail::str_cat("type ", got.dtype(), got.shape(), " vs eager ", want.dtype(),
                                want.shape());
    return false;
  }
  const bool fp = dtype_is_float(want.dtype()) || dtype_is_complex(want.dtype());
  const bool ok = fp ? allclose(got, want, tol, tol, true)
                     : got.to_vector<std::int64_t>() == want.to_vector<std::int64_t>();
  if (!ok) {
    const auto g = got.to(float64).to_vector<double>(), w = want.to(float64).to_vector<double>();
    double worst = 0;
    std::size_t at = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
      if (std::abs(g[i] - w[i]) > worst || (std::isnan(g[i]) != std::isnan(w[i]))) {
        worst = std::abs(g[i] - w[i]);
        at = i;
      }
    std::ostringstream os;
    os.precision(17);
    os << "values differ; e.g. element " << at << ": " << (g.empty() ? 0 : g[at]) << " vs eager "
       << (w.empty() ? 0 : w[at]);
    why = os.str();
  }
  return ok;
}

void check_all(const Tensors& got, const Tensors& want, double tol, const std::string& where) {
  CHECK_MESSAGE(got.size() == want.size(), where, ": ", got.size(), " outputs vs eager ",
                want.size());
  for (std::size_t k = 0; k < std::min(got.size(), want.size()); ++k) {
    std::string why;
    CHECK_MESSAGE(same(got[k], want[k], tol, why), where, ", output ", k, ": ", why);
  }
}

/// Runs `c` eagerly and jitted at O0 and O1, three calls each (the 2nd and
/// 3rd on the planned arena, the 3rd with new values in the other layout:
/// strided inputs after contiguous ones or the reverse, so that views become
/// copies and the replayed allocations differ from the recorded ones), keeping
/// every result alive to the end so that a reused buffer would show. Returns
/// true when the O0 graph holds a node of c.op.
bool run_case(const Case& c, bool strided_first) {
  Tensors in1 = c.inputs(1), in2 = c.inputs(2);
  for (Tensor& t : strided_first ? in1 : in2) t = test::strided(t);
  const std::string id =
      ::ms::detail::str_cat(c.op, " [", c.label, strided_first ? ", strided first" : "", "]");
  Tensors want1, want2;
  try {
    want1 = c.fn(in1);
    want2 = c.fn(in2);
  } catch (const std::exception& e) {
    FAIL_CHECK(id, ": eager call threw: ", e.what());
    return false;
  }
  bool recorded = false;
  for (const JitLevel level : {JitLevel::O0, JitLevel::O1}) {
    const double tol = level == JitLevel::O0 ? c.tol_o0 : c.tol_o1;
    const std::string where = ::ms::detail::str_cat(id, " at ", level);
    try {
      auto f = jit([fn = c.fn](const Tensors& xs) { return fn(xs); },
                   {.jit_level = level, .verify = true});
      const Tensors r1 = f(in1);
      const Tensors r2 = f(in1);
      const Tensors r3 = f(in2);
      check_all(r1, want1, tol, where + ", call 1");
      check_all(r2, want1, tol, where + ", call 2 (planned)");
      check_all(r3, want2, tol, where + ", call 3 (new values, other layout)");
      CHECK_MESSAGE(f.compile_count() == 1, where, ": ", f.compile_count(), " compiles");
      if (level == JitLevel::O0) {
        const std::string node = " = " + ops::ir_name(ops::op(c.op)) + "(";
        recorded = f.dump().find(node) != std::string::npos;
        CHECK_MESSAGE(recorded, where, ": the graph has no '", c.op, "' node:\n", f.dump());
      }
    } catch (const std::exception& e) {
      FAIL_CHECK(where, ": threw: ", e.what());
    }
  }
  return recorded;
}

}  // namespace

TEST_SUITE("jit") {
  TEST_CASE("every op of the table: eager == jit O0 == jit O1") {
    const std::vector<Case> cases = make_cases();
    std::map<std::string, int> covered;
    for (const Case& c : cases)
      for (bool strided_first : {false, true})
        if (run_case(c, strided_first)) ++covered[c.op];
    int ops_seen = 0;
    for (const ops::OpDef* def : ops::registry()) {
      ++ops_seen;
      const std::string name(def->name);
      if (def->samples != nullptr) continue;  // its entry's samples: tests/ops/test_entries.cpp
      CHECK_MESSAGE(covered.contains(name), "op '", name,
                    "' has no sample case in tests/jit/test_ops_jit.cpp (or its case records no '",
                    name, "' node): add one");
    }
    MESSAGE(ops_seen, " ops, ", cases.size(),
            " cases, each run with contiguous and strided inputs");
  }

  TEST_CASE("a small MLP mixing ops: eager == jit O0 == jit O1") {
    const Tensor w1 = random_tensor(float32, {6, 8}, {-2, 2}, 11),
                 b1 = random_tensor(float32, {8}, {-2, 2}, 12),
                 w2 = random_tensor(float32, {8, 5}, {-2, 2}, 13),
                 b2 = random_tensor(float32, {5}, {-2, 2}, 14);
    auto mlp = [&](const auto& x, const auto& y) {
      Tensor h = relu(matmul(x, w1) + b1);
      Tensor z = matmul(h, w2) + b2;
      Tensor lp = log_softmax(z, -1);
      Tensor nll = sum(lp * y, {1}, true) * -1.f;     // [4, 1]
      Tensor t = reshape(transpose(lp, 0, 1), {-1});  // [20]
      auto parts = split(z, std::vector<std::int64_t>{2, 3}, 1);
      return std::make_tuple(concat({t, reshape(nll, {-1})}, 0), mean(nll),
                             Tensor(parts[0] * parts[0]));
    };
    const Tensor x1 = random_tensor(float32, {4, 6}, {-2, 2}, 1),
                 x2 = random_tensor(float32, {4, 6}, {-2, 2}, 2);
    const Tensor y = one_hot(random_tensor(int64, {4}, {.int_lo = 0, .int_hi = 5 - 1}, 3), 5);
    const auto want1 = mlp(x1, y), want2 = mlp(x2, y);
    for (const JitLevel level : {JitLevel::O0, JitLevel::O1}) {
      CAPTURE(level);
      auto f = jit(mlp, {.jit_level = level, .verify = true});
      const auto r1 = f(x1, y);
      const auto r2 = f(x1, y);
      const auto r3 = f(x2, y);
      for (const auto* r : {&r1, &r2}) {
        CHECK(allclose(std::get<0>(*r), std::get<0>(want1), 0, 0));
        CHECK(allclose(std::get<1>(*r), std::get<1>(want1), 0, 0));
        CHECK(allclose(std::get<2>(*r), std::get<2>(want1), 0, 0));
      }
      CHECK(allclose(std::get<0>(r3), std::get<0>(want2), 0, 0));
      CHECK(allclose(std::get<1>(r3), std::get<1>(want2), 0, 0));
      CHECK(allclose(std::get<2>(r3), std::get<2>(want2), 0, 0));
      CHECK(f.compile_count() == 1);
      CHECK(f.dump().find("MatMul") != std::string::npos);
    }
  }

  TEST_CASE("a captured parameter modified in place between calls is followed") {
    for (const JitLevel level : {JitLevel::O0, JitLevel::O1}) {
      CAPTURE(level);
      Tensor w = random_tensor(float32, {4, 3}, {-2, 2}, 21),
             b = random_tensor(float32, {3}, {-2, 2}, 22);
      auto fn = [&](const auto& x) {
        return std::make_tuple(Tensor(relu(matmul(x, w) + b)), sum(w * 2.f, {0}));
      };
      auto f = jit(fn, {.jit_level = level, .verify = true});
      const Tensor x = random_tensor(float32, {2, 4}, {-2, 2}, 23);
      for (int step = 0; step < 4; ++step) {
        CAPTURE(step);
        const auto want = fn(x);
        const auto got = f(x);
        CHECK(allclose(std::get<0>(got), std::get<0>(want), 0, 0));
        CHECK(allclose(std::get<1>(got), std::get<1>(want), 0, 0));
        w += 1.f;  // in place: the graph reads w by identity
        if (step == 1) b *= -1.f;
      }
      CHECK(f.compile_count() == 1);
    }
  }

  TEST_CASE("a split result as a tuple through a generic lambda") {
    auto fn = [](const auto& x) {
      auto p = split(x, std::vector<std::int64_t>{1, 3}, 1);
      return std::make_tuple(p[0], Tensor(p[1] + 1.f));
    };
    const Tensor x = random_tensor(float32, {2, 4}, {-2, 2}, 31);
    const auto want = fn(x);
    for (const JitLevel level : {JitLevel::O0, JitLevel::O1}) {
      CAPTURE(level);
      auto f = jit(fn, {.jit_level = level, .verify = true});
      for (int call = 0; call < 2; ++call) {
        const auto got = f(x);
        CHECK(allclose(std::get<0>(got), std::get<0>(want), 0, 0));
        CHECK(allclose(std::get<1>(got), std::get<1>(want), 0, 0));
      }
    }
  }
  // ------------------------------------------------------------ regressions
  // Mismatches between eager and jitted results this test found (all fixed).

  // O1's common-subexpression elimination keyed weak scalars and float
  // attributes by their text with 6 significant digits, so distinct values
  // that print alike were merged: `x + 1e6` and `x + 1000001` became one node.
  TEST_CASE("CSE keeps weak scalars and float attributes that print alike apart") {
    const std::vector<Case> cases = {
        {"add", "x + 1e6 and x + 1000001",
         [](unsigned s) {
           return Tensors{random_tensor(float32, {3, 4}, {-2, 2}, s)};
         },
         [](const Tensors& xs) { return Tensors{(xs[0] + 1000000.f) - (xs[0] + 1000001.f)}; }},
        {"mul", "x * 0.1f and x * 0.1000001f",
         [](unsigned s) {
           return Tensors{random_tensor(float32, {3, 4}, {-2, 2}, s)};
         },
         [](const Tensors& xs) { return Tensors{xs[0] * 0.1f - xs[0] * 0.1000001f}; }},
        {"pad", "constant values 1e6 and 1000001",
         [](unsigned s) {
           return Tensors{random_tensor(float32, {3}, {-2, 2}, s)};
         },
         [](const Tensors& xs) {
           return Tensors{concat({pad(xs[0], {1, 1}, "constant", 1000000.0),
                                  pad(xs[0], {1, 1}, "constant", 1000001.0)})};
         }},
    };
    for (const Case& c : cases) run_case(c, false);
  }

  // The fused tile loop released the register slot of a weak-scalar constant
  // after its last use, but constants are filled once per chunk: from the 2nd
  // tile on (> 2048 elements) they read clobbered values. Eager expression
  // trees and O1's Fused nodes were wrong; O0 (one op per program) was right.
  TEST_CASE("elementwise chains with weak scalars over more than one tile") {
    for (const Case& c : make_multitile_cases(ops::ElementwiseOps{})) run_case(c, false);
  }

  // O1's simplification rewrote x + 0 to x, but in IEEE arithmetic
  // -0.0 + 0.0 is +0.0: 1 / (x + 0) was +inf eagerly and -inf jitted.
  TEST_CASE("x + 0 keeps the sign of zero") {
    const Case c{"reciprocal", "1 / (x + 0) with x = -0.0",
                 [](unsigned) {
                   return Tensors{tensor({-0.f, 0.f, 2.f})};
                 },
                 [](const Tensors& xs) { return Tensors{reciprocal(xs[0] + 0.f)}; }};
    run_case(c, false);
  }

  // Copying Tensor methods (to, clone, reshape when it must copy) on a
  // concrete captured tensor ran at trace time: their result was a Const of
  // the graph, so in-place updates of the parameter after compiling were not
  // seen (the free functions ms::cast / ms::reshape recorded ops).
  TEST_CASE("copies of a captured tensor made by Tensor methods follow in-place updates") {
    for (const JitLevel level : {JitLevel::O0, JitLevel::O1}) {
      CAPTURE(level);
      Tensor w = random_tensor(float32, {2, 3}, {-2, 2}, 41);
      const Tensor base = random_tensor(float32, {3, 2}, {-2, 2}, 42);
      Tensor wt = base.transpose(0, 1);  // reshape({-1}) of it must copy
      auto fn = [&](const auto& x) {
        return std::make_tuple(Tensor(x.to(float64) * w.to(float64)), Tensor(x + w.clone()),
                               Tensor(x.reshape({-1}) + wt.reshape({-1})));
      };
      auto f = jit(fn, {.jit_level = level, .verify = true});
      const Tensor x = random_tensor(float32, {2, 3}, {-2, 2}, 43);
      for (int step = 0; step < 3; ++step) {
        CAPTURE(step);
        const auto want = fn(x);
        const auto got = f(x);
        CHECK_MESSAGE(allclose(std::get<0>(got), std::get<0>(want), 0, 0), "w.to(float64)");
        CHECK_MESSAGE(allclose(std::get<1>(got), std::get<1>(want), 0, 0), "w.clone()");
        CHECK_MESSAGE(allclose(std::get<2>(got), std::get<2>(want), 0, 0), "wt.reshape({-1})");
        w += 1.f;
        wt += 1.f;
      }
    }
  }
}
