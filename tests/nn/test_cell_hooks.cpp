// Cell hooks in MindSpore's forms: the global buffer registration hook, the
// destination form of state_dict, the full load pre-hook (error_msgs), load
// post-hooks judged before `strict`, and with_kwargs forward hooks eagerly and
// under ms::jit.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <ms/cell.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nn/nn_test_util.hpp"

namespace {

using ms_test::MLP;

// A user cell keeping its buffers in members, as BatchNorm does.
struct Counter : ms::Cell<Counter> {
  ms::Tensor steps, scratch;
  Counter() {
    steps = register_buffer("steps", ms::zeros({2}, ms::int32));
    scratch = register_buffer("scratch", ms::ones({3}), /*persistent=*/false);
  }
  ms::Tensor construct(const ms::Tensor& x) { return x; }
};

struct Scaled : ms::Cell<Scaled> {
  ms::Tensor construct(const ms::Tensor& x, const ms::Kwargs& kw) {
    return x * static_cast<float>(std::get<double>(kw.at("scale")));
  }
};

using ms_test::input;

using Keys = std::vector<std::string>;

}  // namespace

TEST_SUITE("nn") {
  TEST_CASE("buffer registration hook: every cell's buffers, replacement, removal") {
    std::vector<std::string> seen;
    ms::HookHandle h = ms::register_cell_buffer_registration_hook(
        [&](ms::CellBase& c, const std::string& name,
            const ms::Tensor&) -> std::optional<ms::Tensor> {
          seen.push_back(c.cls_name() + "." + name);
          if (name == "steps") return std::nullopt;
          if (name == "moving_variance") return ms::full({3}, 4.0f);
          return std::nullopt;
        });
    ms::nn::BatchNorm1d bn(3);
    Counter counter;
    CHECK(seen == Keys{"BatchNorm1d.moving_mean", "BatchNorm1d.moving_variance", "Counter.steps",
                       "Counter.scratch"});
    // The replacement is what the cell holds and uses (eval: (x - 0) / sqrt(4 + eps)).
    CHECK(ms::allclose(bn.get_buffer("moving_variance"), ms::full({3}, 4.0f), 0, 0));
    CHECK(bn.moving_variance.storage() == bn.get_buffer("moving_variance").storage());
    CHECK(ms::allclose(bn.state_dict()["moving_variance"], ms::full({3}, 4.0f), 0, 0));
    ms::Generator g(3);
    const ms::Tensor x = ms::normal({5, 3}, 0.0, 1.0, g);
    CHECK(ms::allclose(bn(x), x * static_cast<float>(1.0 / std::sqrt(4.0 + 1e-5)), 1e-6, 1e-6));
    h.remove();
    h.remove();  // idempotent
    ms::nn::BatchNorm1d bn2(3);
    CHECK(seen.size() == 4);
    CHECK(ms::allclose(bn2.get_buffer("moving_variance"), ms::ones({3}), 0, 0));
  }

  TEST_CASE("buffer registration hooks: dtype conversion, order, each sees the previous result") {
    std::vector<std::string> order;
    // The first converts `steps` to float64; the second sees that and adds 1.
    ms::ScopedHook h1 = ms::register_cell_buffer_registration_hook(
        [&](ms::CellBase&, const std::string& name, const ms::Tensor& t) {
          order.push_back("h1:" + name);
          return name == "steps" ? ms::cast(t, ms::float64) : t;
        });
    ms::DType second_saw = ms::int32;
    ms::ScopedHook h2 = ms::register_cell_buffer_registration_hook(
        [&](ms::CellBase&, const std::string& name,
            const ms::Tensor& t) -> std::optional<ms::Tensor> {
          order.push_back("h2:" + name);
          if (name != "steps") return std::nullopt;
          second_saw = t.dtype();
          return ms::Tensor(t + 1.0);
        });
    ms::ScopedHook h3 = ms::register_cell_buffer_registration_hook(
        [&](ms::CellBase&, const std::string&, const ms::Tensor&) { order.push_back("h3"); });
    Counter c;
    CHECK(order == Keys{"h1:steps", "h2:steps", "h3", "h1:scratch", "h2:scratch", "h3"});
    CHECK(second_saw == ms::float64);
    CHECK(c.steps.dtype() == ms::float64);
    CHECK(c.get_buffer("steps").dtype() == ms::float64);
    CHECK(ms::allclose(c.state_dict()["steps"], ms::ones({2}, ms::float64), 0, 0));
    // A hook handing back an undefined tensor: a ValueError naming the buffer and the cell.
    ms::ScopedHook bad = ms::register_cell_buffer_registration_hook(
        [](ms::CellBase&, const std::string&, const ms::Tensor&) { return ms::Tensor(); });
    CHECK_THROWS_WITH_AS(Counter(),
                         doctest::Contains("undefined tensor for buffer 'steps' of Counter"),
                         ms::ValueError);
  }

  TEST_CASE("buffer registration hooks while other threads build cells: registering, removing") {
    std::atomic<int> calls{0};
    std::atomic<bool> stop{false};
    std::thread builder([&] {
      while (!stop.load()) {
        ms::nn::BatchNorm1d bn(2);
        CHECK(ms::allclose(bn.moving_mean, ms::zeros({2}), 0, 0));
      }
    });
    for (int i = 0; i < 200; ++i) {
      ms::HookHandle h = ms::register_cell_buffer_registration_hook(
          [&](ms::CellBase&, const std::string&, const ms::Tensor&) { ++calls; });
      ms::nn::BatchNorm1d mine(2);
      h.remove();
    }
    stop = true;
    builder.join();
    // This thread's own cells ran the hook on both buffers each time.
    CHECK(calls.load() >= 400);
    const int before = calls.load();
    ms::nn::BatchNorm1d after(2);
    CHECK(calls.load() == before);
  }

  TEST_CASE("state_dict(destination, prefix, keep_vars)") {
    MLP net;
    ms::StateDict dest{{"model.fc1.bias", ms::zeros({99})}, {"other", ms::ones({1})}};
    // The hooks see this call's entries only, so that one erasing entries
    // cannot touch what `dest` held before.
    bool hook_saw_other = true;
    ms::ScopedHook h = net.register_state_dict_post_hook(
        [&](ms::CellBase&, ms::StateDict& sd, const std::string&) {
          hook_saw_other = sd.contains("other");
          sd.clear();
          sd.emplace_back("model.fc1.weight", net.fc1.weight);
          sd.emplace_back("model.fc1.bias", net.fc1.bias);
          sd.emplace_back("model.fc2.weight", net.fc2.weight);
          sd.emplace_back("model.fc2.bias", net.fc2.bias);
        });
    ms::StateDict& r = net.state_dict(dest, "model", true);
    CHECK(&r == &dest);
    CHECK(!hook_saw_other);
    // A key held before is replaced in place; the others are appended in order.
    CHECK(dest.keys() == Keys{"model.fc1.bias", "other", "model.fc1.weight", "model.fc2.weight",
                              "model.fc2.bias"});
    CHECK(ms::allclose(dest["model.fc1.bias"], net.fc1.bias, 0, 0));
    // keep_vars = true: the cell's own tensors.
    dest["model.fc2.bias"].fill_(7.0);
    CHECK(ms::allclose(net.fc2.bias, ms::full({3}, 7.0f), 0, 0));
    // keep_vars = false: detached copies; MindSpore's "model." prefix is the same prefix.
    ms::StateDict snap;
    net.state_dict(snap, "model.", false);
    CHECK(snap.keys() ==
          Keys{"model.fc1.weight", "model.fc1.bias", "model.fc2.weight", "model.fc2.bias"});
    snap["model.fc2.bias"].fill_(1.0);
    CHECK(ms::allclose(net.fc2.bias, ms::full({3}, 7.0f), 0, 0));
    net.fc1.weight.fill_(2.0);
    CHECK(!ms::allclose(snap["model.fc1.weight"], net.fc1.weight, 0, 0));
    CHECK(snap["model.fc1.weight"].storage() != net.fc1.weight.storage());
    // No prefix: the keys of state_dict().
    ms::StateDict plain;
    CHECK(net.state_dict(plain, "", false).keys() == net.state_dict().keys());
  }

  TEST_CASE("load pre-hook, full form: prefix, metadata, strict, editing the dict, key lists") {
    MLP src, net;
    ms::StateDict old;
    for (auto& [k, t] : src.state_dict()) old.emplace_back(k == "fc1.weight" ? "fc1.w_old" : k, t);
    std::vector<std::string> prefixes;
    bool strict_seen = false, metadata_empty = false;
    ms::ScopedHook h = net.fc1.register_load_state_dict_pre_hook(
        [&](ms::CellBase& c, ms::StateDict& sd, const std::string& prefix,
            const ms::LoadMetadata& md, bool strict, std::vector<std::string>&,
            std::vector<std::string>& unexpected, std::vector<std::string>&) {
          CHECK(&c == &net.fc1);
          prefixes.push_back(prefix);
          strict_seen = strict;
          metadata_empty = md.empty();
          for (auto& [k, t] : sd)
            if (k == prefix + "w_old") k = prefix + "weight";
          if (!strict) unexpected.push_back(prefix + "reported_by_hook");
        });
    ms::ScopedHook root = net.register_load_state_dict_pre_hook(
        [&](ms::CellBase&, ms::StateDict&, const std::string& prefix, const ms::LoadMetadata&, bool,
            std::vector<std::string>&, std::vector<std::string>&,
            std::vector<std::string>&) { prefixes.push_back("root:" + prefix); });
    net.load_state_dict(old);
    CHECK(prefixes == Keys{"root:", "fc1."});  // the cell loaded first, then its children
    CHECK(strict_seen);
    CHECK(metadata_empty);
    CHECK(ms::allclose(net.fc1.weight, src.fc1.weight, 0, 0));
    // Keys a hook appends are reported with those load_state_dict finds.
    const ms::LoadResult res = net.load_state_dict(old, false);
    CHECK(res.unexpected_keys == Keys{"fc1.reported_by_hook"});
    CHECK(res.missing_keys.empty());
  }

  TEST_CASE("load pre-hooks' error_msgs fail the load after all hooks ran, loading nothing") {
    MLP src, net;
    const ms::Tensor before = net.fc1.weight.clone();
    int ran = 0;
    auto complain = [&](std::string msg) {
      return [&ran, msg](ms::CellBase&, ms::StateDict&, const std::string&, const ms::LoadMetadata&,
                         bool, std::vector<std::string>&, std::vector<std::string>&,
                         std::vector<std::string>& errors) {
        ++ran;
        errors.push_back(msg);
      };
    };
    ms::ScopedHook h1 = net.register_load_state_dict_pre_hook(complain("version 1 is too old"));
    ms::ScopedHook h2 = net.fc2.register_load_state_dict_pre_hook(complain("fc2: bad layout"));
    CHECK_THROWS_WITH_AS(
        net.load_state_dict(src.state_dict(), false),
        doctest::Contains("error(s) in loading the state dict for MLP (nothing was loaded):\n\t"
                          "version 1 is too old\n\tfc2: bad layout"),
        ms::ValueError);
    CHECK(ran == 2);
    CHECK(ms::allclose(net.fc1.weight, before, 0, 0));
    // With strict findings too, they come first; and with a post-hook (which
    // sees the loaded values), the old values are put back.
    ms::StateDict partial = src.state_dict();
    partial.pop_back();  // fc2.bias
    bool post_saw_loaded = false;
    ms::ScopedHook post =
        net.register_load_state_dict_post_hook([&](ms::CellBase&, ms::LoadResult&) {
          post_saw_loaded = ms::allclose(net.fc1.weight, src.fc1.weight, 0, 0);
        });
    CHECK_THROWS_WITH_AS(net.load_state_dict(partial),
                         doctest::Contains("missing keys: 'fc2.bias'\n\tversion 1 is too old"),
                         ms::ValueError);
    CHECK(post_saw_loaded);
    CHECK(ms::allclose(net.fc1.weight, before, 0, 0));
    h1.handle().remove();
    h2.handle().remove();
    CHECK_NOTHROW(net.load_state_dict(src.state_dict()));
    CHECK(ms::allclose(net.fc1.weight, src.fc1.weight, 0, 0));
  }

  TEST_CASE("load post-hooks see the keys before strict judges them") {
    MLP src, net;
    const ms::Tensor before = net.fc1.weight.clone();
    ms::StateDict partial = src.state_dict();
    partial.pop_back();  // fc2.bias
    partial.emplace_back("extra", ms::zeros({1}));
    std::vector<std::string> order;
    ms::LoadResult seen;
    ms::ScopedHook child = net.fc2.register_load_state_dict_post_hook(
        [&](ms::CellBase&, ms::LoadResult&) { order.push_back("fc2"); });
    ms::HookHandle h =
        net.register_load_state_dict_post_hook([&](ms::CellBase&, ms::LoadResult& r) {
          order.push_back("net");
          seen = r;
        });
    // A post-hook that leaves the keys: strict raises and nothing stays loaded.
    CHECK_THROWS_WITH_AS(net.load_state_dict(partial),
                         doctest::Contains("missing keys for MLP: 'fc2.bias'"), ms::ValueError);
    CHECK(order == Keys{"fc2", "net"});  // children before their parent
    CHECK(seen.missing_keys == Keys{"fc2.bias"});
    CHECK(seen.unexpected_keys == Keys{"extra"});
    CHECK(ms::allclose(net.fc1.weight, before, 0, 0));
    h.remove();
    // One that clears them: the strict load succeeds and returns the cleared lists.
    ms::ScopedHook clear =
        net.register_load_state_dict_post_hook([](ms::CellBase&, ms::LoadResult& r) {
          r.missing_keys.clear();
          r.unexpected_keys.clear();
        });
    const ms::LoadResult res = net.load_state_dict(partial);
    CHECK(res.missing_keys.empty());
    CHECK(res.unexpected_keys.empty());
    CHECK(ms::allclose(net.fc1.weight, src.fc1.weight, 0, 0));
  }

  TEST_CASE("a load post-hook that throws leaves the old values, strict or not") {
    MLP net, src;
    const ms::Tensor before = net.fc1.weight.clone();
    ms::ScopedHook h = net.register_load_state_dict_post_hook(
        [](ms::CellBase&, ms::LoadResult&) { throw std::runtime_error("post-hook failed"); });
    for (bool strict : {true, false}) {
      CHECK_THROWS_WITH_AS(net.load_state_dict(src.state_dict(), strict),
                           doctest::Contains("post-hook failed"), std::runtime_error);
      CHECK(ms::allclose(net.fc1.weight, before, 0, 0));
    }
  }

  TEST_CASE("with_kwargs pre-hook replaces a kwarg, eagerly and under ms::jit") {
    Scaled cell;
    const ms::Tensor x = input(2, 11);
    double hook_saw = 0;
    ms::ScopedHook h = cell.register_forward_pre_hook(
        [&](Scaled&, const ms::Args& a, const ms::Kwargs& kw) {
          hook_saw = std::get<double>(kw.at("scale"));
          ms::Kwargs out = kw;
          out["scale"] = 5.0;
          return std::pair<ms::Args, ms::Kwargs>{a, out};
        },
        ms::with_kwargs);
    const ms::Tensor eager = cell(x, ms::Kwargs{{"scale", 3.0}});
    CHECK(hook_saw == 3.0);
    CHECK(ms::allclose(eager, x * 5.0f, 0, 0));
    auto f = ms::jit([&](const ms::Tensor& a) { return cell(a, ms::Kwargs{{"scale", 3.0}}); });
    hook_saw = 0;
    const ms::Tensor jitted = f(x);
    CHECK(hook_saw == 3.0);
    CHECK(ms::allclose(jitted, eager, 1e-6, 1e-6));
    // The compiled graph, again: the hook runs (a host callback) and 5 holds.
    hook_saw = 0;
    CHECK(ms::allclose(f(x), eager, 1e-6, 1e-6));
    CHECK(hook_saw == 3.0);
    // Removed: the graph is retraced and the call's own kwarg counts again.
    h.handle().remove();
    CHECK(ms::allclose(f(x), x * 3.0f, 1e-6, 1e-6));
  }

  TEST_CASE("with_kwargs forward hook sees args, kwargs, output and replaces it, eager and jit") {
    Scaled cell;
    const ms::Tensor x = input(2, 11);
    int calls = 0;
    ms::ScopedHook h = cell.register_forward_hook(
        [&](Scaled&, const ms::Args& a, const ms::Kwargs& kw, const ms::Tensor& y) {
          ++calls;
          const double s = std::get<double>(kw.at("scale"));
          CHECK(a.size() == 1);
          CHECK(ms::allclose(y, a[0] * static_cast<float>(s), 1e-6, 1e-6));
          return ms::Tensor(y + a[0] + static_cast<float>(s));  // x * s + x + s
        },
        ms::with_kwargs);
    const ms::Tensor eager = cell(x, ms::Kwargs{{"scale", 2.0}});
    CHECK(calls == 1);
    CHECK(ms::allclose(eager, x * 3.0f + 2.0f, 1e-6, 1e-6));
    auto f = ms::jit([&](const ms::Tensor& a) { return cell(a, ms::Kwargs{{"scale", 2.0}}); });
    const ms::Tensor jitted = f(x);
    CHECK(calls == 2);  // a host callback: runs each time the graph runs
    CHECK(ms::allclose(jitted, eager, 1e-6, 1e-6));
    CHECK(ms::allclose(f(x), eager, 1e-6, 1e-6));
    CHECK(calls == 3);
  }

  TEST_CASE("a forward hook must return as many outputs as the cell returns") {
    ms::nn::Dense fc(4, 3);
    const ms::Tensor x = ms::ones({2, 4});
    {
      ms::ScopedHook more =
          fc.register_forward_hook([](ms::nn::Dense&, const ms::Args&, const ms::Args& o) {
            return ms::Args{o[0], o[0]};
          });
      CHECK_THROWS_WITH_AS(fc(x), doctest::Contains("returned 2 outputs; the cell returns 1"),
                           ms::ValueError);
    }
    {
      ms::ScopedHook fewer = fc.register_forward_hook(
          [](ms::nn::Dense&, const ms::Args&, const ms::Args&) { return ms::Args{}; });
      CHECK_THROWS_WITH_AS(fc(x), doctest::Contains("returned 0 outputs"), ms::ValueError);
    }
    CHECK(fc(x).shape() == ms::Shape{2, 3});
  }
}
