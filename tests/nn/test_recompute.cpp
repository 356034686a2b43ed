// Cell::recompute: gradients bitwise equal with and without it (an MLP, a
// cell with dropout, nested cells; eager and under ms::jit), recompute(false),
// the recomputed ops in the graph dump, and a lower peak memory.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <ms/cell.hpp>
#include <ms/jit/script.hpp>

namespace {

// Dense then relu, tanh or gelu. Relu's gradient reads the pre-activation as
// traced (the passes then fuse the relu into the product and let its
// gradient read the relu's result); gelu's always reads it, so it is kept
// unless the layer is recomputed.
enum class LayerAct { Relu, Tanh, Gelu };
struct Layer : ms::Cell<Layer> {
  ms::nn::Dense fc;
  LayerAct act;
  Layer(std::int64_t in, std::int64_t out, LayerAct a = LayerAct::Relu) : fc(in, out), act(a) {
    register_cells("fc", fc);
  }
  ms::Tensor construct(const ms::Tensor& x) {
    const ms::Tensor h = fc(x);
    switch (act) {
      case LayerAct::Tanh: return ms::tanh(h);
      case LayerAct::Gelu: return ms::gelu(h);
      case LayerAct::Relu: break;
    }
    return ms::relu(h);
  }
};

// `depth` layers of `width`, the odd ones with tanh, the even ones with `even`.
struct Deep : ms::Cell<Deep> {
  std::vector<std::unique_ptr<Layer>> layers;
  Deep(int depth, std::int64_t width, LayerAct even = LayerAct::Gelu) {
    for (int i = 0; i < depth; ++i) {
      layers.push_back(std::make_unique<Layer>(width, width, i % 2 == 1 ? LayerAct::Tanh : even));
      register_cells(std::to_string(i), *layers.back());
    }
  }
  ms::Tensor construct(const ms::Tensor& x) {
    ms::Tensor h = x;
    for (auto& l : layers) h = (*l)(h);
    return h;
  }
  void recompute_layers(bool on) {
    for (auto& l : layers) l->recompute(on);
  }
};

// A layer with dropout inside: the recomputed forward must apply the same mask.
struct DropLayer : ms::Cell<DropLayer> {
  ms::nn::Dense fc;
  ms::nn::Dropout drop;
  DropLayer(std::int64_t in, std::int64_t out, ms::Generator* g) : fc(in, out), drop(0.5, g) {
    register_cells("fc", fc, "drop", drop);
  }
  ms::Tensor construct(const ms::Tensor& x) { return drop(ms::Tensor(ms::relu(fc(x)))); }
};

struct DropNet : ms::Cell<DropNet> {
  DropLayer a, b;
  ms::nn::Dense head;
  explicit DropNet(ms::Generator* g) : a(6, 8, g), b(8, 8, g), head(8, 3) {
    register_cells("a", a, "b", b, "head", head);
  }
  ms::Tensor construct(const ms::Tensor& x) { return head(b(a(x))); }
};

// A marked cell inside a marked cell (the inner one is its own region when
// only it is marked).
struct LayerPair : ms::Cell<LayerPair> {
  Layer inner1, inner2;
  LayerPair() : inner1(5, 7), inner2(7, 4, LayerAct::Tanh) {
    register_cells("inner1", inner1, "inner2", inner2);
  }
  ms::Tensor construct(const ms::Tensor& x) { return inner2(inner1(x)) * 2.f; }
};

struct Nested : ms::Cell<Nested> {
  LayerPair outer;
  ms::nn::Dense head{4, 2};
  Nested() { register_cells("outer", outer, "head", head); }
  ms::Tensor construct(const ms::Tensor& x) { return head(outer(x)); }
};

bool bitwise_equal(const ms::Tensor& a, const ms::Tensor& b) {
  if (a.dtype() != ms::float32 || b.dtype() != ms::float32 || a.shape() != b.shape()) return false;
  const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  return std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0;
}

void check_all_bitwise(const std::vector<ms::Tensor>& a, const std::vector<ms::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(bitwise_equal(a[i], b[i]), "tensor ", i);
}

// The loss, then the gradients of x and of every parameter, by ms::value_and_grad.
template <class Net>
std::vector<ms::Tensor> loss_and_grads(Net& net, const ms::Tensor& x, bool jit) {
  auto loss_fn = [&](const ms::Tensor& in) -> ms::Tensor {
    const ms::Tensor y = net(in);
    return ms::sum(y * y);
  };
  auto step = [&](const ms::Tensor& in) {
    auto [loss, grads] =
        ms::value_and_grad(loss_fn, {.position = 0, .weights = net.trainable_params()})(in);
    grads.insert(grads.begin(), loss);
    return grads;
  };
  if (!jit) return step(x);
  return ms::jit(step)(x);
}

}  // namespace

TEST_SUITE("nn.recompute") {
  TEST_CASE("an MLP: loss and gradients bitwise equal with and without recompute") {
    for (const bool jit : {false, true}) {
      CAPTURE(jit);
      ms::manual_seed(3);
      Deep net(4, 16);
      const ms::Tensor x = ms::normal({8, 16});
      const auto plain = loss_and_grads(net, x, jit);
      net.recompute_layers(true);
      CHECK(net.layers[0]->recompute_enabled());
      const auto rc = loss_and_grads(net, x, jit);
      check_all_bitwise(plain, rc);
      // Recompute of the whole net (one region) too.
      net.recompute_layers(false);
      net.recompute();
      check_all_bitwise(plain, loss_and_grads(net, x, jit));
    }
  }

  TEST_CASE("dropout inside a recomputed cell: the recomputed forward applies the same mask") {
    for (const bool jit : {false, true}) {
      CAPTURE(jit);
      ms::manual_seed(5);
      ms::Generator gen;
      DropNet net(&gen);
      net.set_train(true);
      const ms::Tensor x = ms::normal({10, 6});
      gen.manual_seed(11);
      const auto plain = loss_and_grads(net, x, jit);
      net.a.recompute();
      net.b.recompute();
      gen.manual_seed(11);
      const auto rc = loss_and_grads(net, x, jit);
      check_all_bitwise(plain, rc);
      // The masks matter: without dropout (eval mode) the loss differs.
      net.set_train(false);
      CHECK_FALSE(bitwise_equal(plain[0], loss_and_grads(net, x, jit)[0]));
    }
  }

  TEST_CASE("nested cells: inner only, outer only, both") {
    for (const bool jit : {false, true}) {
      CAPTURE(jit);
      ms::manual_seed(7);
      Nested net;
      const ms::Tensor x = ms::normal({3, 5});
      const auto plain = loss_and_grads(net, x, jit);
      net.outer.inner1.recompute();
      check_all_bitwise(plain, loss_and_grads(net, x, jit));
      net.outer.recompute();
      check_all_bitwise(plain, loss_and_grads(net, x, jit));
      net.outer.inner1.recompute(false);
      net.outer.inner2.recompute();
      check_all_bitwise(plain, loss_and_grads(net, x, jit));
    }
  }

  TEST_CASE("grad(grad(f)) through a recomputed cell: equal to rounding") {
    ms::manual_seed(17);
    Layer layer(4, 4, LayerAct::Tanh);  // its second derivative is not zero
    const ms::Tensor x = ms::normal({3, 4});
    auto loss = [&](const ms::Tensor& in) -> ms::Tensor {
      const ms::Tensor y = layer(in);
      return ms::sum(y * y);
    };
    auto grad_norm = [&](const ms::Tensor& in) -> ms::Tensor {
      const ms::Tensor g = ms::grad(loss)(in);
      return ms::sum(g * g);
    };
    const ms::Tensor plain = ms::grad(grad_norm)(x);
    layer.recompute();
    const ms::Tensor rc = ms::grad(grad_norm)(x);
    // Not bitwise: the second backward differentiates the first one's rules
    // through the clones, so the two paths into x and the weight are summed
    // at the region's inputs instead of at its values (another association).
    const ms::Tensor jitted =
        ms::jit([&](const ms::Tensor& in) { return ms::grad(grad_norm)(in); })(x);
    const std::vector<float> p = plain.to_vector<float>(), r = rc.to_vector<float>(),
                             j = jitted.to_vector<float>();
    for (std::size_t i = 0; i < p.size(); ++i) {
      CHECK(r[i] == doctest::Approx(p[i]).epsilon(1e-5));
      CHECK(j[i] == doctest::Approx(p[i]).epsilon(1e-5));
    }
  }

  TEST_CASE(
      "the graph dump shows the recomputed ops in the backward; recompute(false) removes them") {
    ms::manual_seed(9);
    Layer layer(4, 4);
    Layer head(4, 2);
    auto loss_fn = [&](const ms::Tensor& in) -> ms::Tensor { return ms::sum(head(layer(in))); };
    auto fn = [&](const ms::Tensor& in) {
      return ms::grad(loss_fn, {.position = std::nullopt, .weights = layer.trainable_params()})(in);
    };
    const ms::Tensor x = ms::normal({2, 4});
    auto dump = [&] { return ms::advanced::frontend_compile(fn)(x).to_string(); };
    const std::string plain = dump();
    CHECK(plain.find("[recompute]") == std::string::npos);
    CHECK(plain.find("Depend") == std::string::npos);
    layer.recompute();
    const std::string rc = dump();
    // The layer's transpose, matmul and bias add are re-emitted after the
    // head's gradient (its ReluGrad), reading the inputs through Depend (the
    // clone of relu is dead: relu's gradient reads its input).
    std::string marked;
    std::size_t pos = 0;
    while ((pos = rc.find("[recompute]", pos)) != std::string::npos) {
      const auto line_start = rc.rfind('\n', pos);
      marked += rc.substr(line_start + 1, pos - line_start) + "\n";
      ++pos;
    }
    INFO(rc);
    CHECK(marked.find("Transpose(") != std::string::npos);
    CHECK(marked.find("MatMul(") != std::string::npos);
    CHECK(marked.find("Add(") != std::string::npos);
    const auto first_mark = rc.find("[recompute]");
    REQUIRE(rc.find("ReluGrad(") != std::string::npos);
    CHECK(rc.find("ReluGrad(") < first_mark);
    CHECK(rc.find("Depend(") < first_mark);
    layer.recompute(false);
    CHECK_FALSE(layer.recompute_enabled());
    CHECK(dump() == plain);
  }

  // The peak bytes of one training step of `net` on x: eager (mode 0), or a
  // first jitted run in Bfs (1) or Dfs (2) order.
  std::int64_t step_peak(Deep & net, const ms::Tensor& x, int mode) {
    auto step = [&](const ms::Tensor& in) {
      auto [loss, grads] = ms::value_and_grad(
          [&](const ms::Tensor& v) -> ms::Tensor {
            const ms::Tensor y = net(v);
            return ms::mean(y * y);
          },
          {.position = std::nullopt, .weights = net.trainable_params()})(in);
      grads.push_back(loss);
      return grads;
    };
    // A jitted function's first run allocates each value as it runs (and
    // frees it after its last reader); the memory plan it records sizes the
    // arena of later runs. Eager grad runs its graph so too.
    ms::memory_stats_reset_peak();
    const std::int64_t before = ms::memory_stats().live_bytes;
    if (mode == 0)
      step(x);
    else
      ms::jit(step, {.exec_order = mode == 1 ? ms::ExecOrder::Bfs : ms::ExecOrder::Dfs})(x);
    return ms::memory_stats().peak_bytes - before;
  }

  TEST_CASE("a deep MLP: peak memory strictly lower with recompute (eager and jit)") {
    ms::manual_seed(13);
    Deep net(12, 512);
    const ms::Tensor x = ms::normal({64, 512});
    for (int mode : {0, 1, 2}) {
      CAPTURE(mode);
      net.recompute_layers(false);
      const std::int64_t plain = step_peak(net, x, mode);
      net.recompute_layers(true);
      const std::int64_t rc = step_peak(net, x, mode);
      MESSAGE("mode ", mode, " peak bytes: plain ", plain, ", recompute ", rc);
      // Dfs computes every weight's gradient at the end, after the whole
      // input-gradient chain, so each layer's pre-activation gradient is kept
      // and sets the peak with or without recompute: never higher with it.
      if (mode == 2)
        CHECK(rc <= plain);
      else
        CHECK(rc < plain);
    }
  }

  TEST_CASE("a deep MLP with relu keeps no pre-activation: its step peaks as the recomputed one") {
    // relu's gradient reads the relu's result once the relu joins its
    // product (matmul_bias{relu}), so nothing is left for recompute to free.
    ms::manual_seed(13);
    Deep gelu_net(12, 512), relu_net(12, 512, LayerAct::Relu);
    const ms::Tensor x = ms::normal({64, 512});
    for (int mode : {0, 1}) {
      CAPTURE(mode);
      const std::int64_t gelu_plain = step_peak(gelu_net, x, mode);
      gelu_net.recompute_layers(true);
      const std::int64_t gelu_rc = step_peak(gelu_net, x, mode);
      gelu_net.recompute_layers(false);
      const std::int64_t relu_plain = step_peak(relu_net, x, mode);
      MESSAGE("mode ", mode, " peak bytes: gelu ", gelu_plain, ", gelu recomputed ", gelu_rc,
              ", relu ", relu_plain);
      CHECK(relu_plain < gelu_plain);
      CHECK(relu_plain <= gelu_rc);
    }
  }
}
