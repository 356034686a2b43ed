// Cell lookup and traversal: apply, parameters_dict, get_parameter /
// get_buffer / get_sub_cell, update_parameters_name, unregistering (also under
// ms::jit), on a three-level model: Net -> SequentialCell of Blocks -> Dense
// and BatchNorm1d.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <ms/cell.hpp>
#include <string>
#include <vector>

#include "nn/nn_test_util.hpp"

namespace {

using ms::nn::BatchNorm1d;
using ms::nn::Dense;
using Names = std::vector<std::string>;

struct Block : ms::Cell<Block> {
  Dense fc{4, 4};
  BatchNorm1d bn{4};
  Block() { register_cells("fc", fc, "bn", bn); }
  ms::Tensor construct(const ms::Tensor& x) { return bn(fc(x)); }
};

struct Net : ms::Cell<Net> {
  std::shared_ptr<Block> b0 = std::make_shared<Block>(), b1 = std::make_shared<Block>();
  ms::nn::SequentialCell body{b0, b1};
  Dense head{4, 2};
  Dense aux{4, 2};
  bool use_aux = true;  // the forward uses aux only while this is set
  Net() { register_cells("body", body, "head", head, "aux", aux); }
  ms::Tensor construct(const ms::Tensor& x) {
    ms::Tensor h = body(x);
    ms::Tensor y = head(h);
    return use_aux ? ms::Tensor(y + aux(h)) : y;
  }
};

using ms_test::input;

Names keys_of(const std::vector<std::pair<std::string, ms::Parameter>>& v) {
  Names out;
  for (const auto& [n, p] : v) out.push_back(n);
  return out;
}

Names keys_of(const ms::StateDict& sd) { return sd.keys(); }

Names cell_names(ms::CellBase& c) {
  Names out;
  for (const auto& [n, ch] : c.cells_and_names()) out.push_back(n);
  return out;
}

const Names kParams = {"body.0.fc.weight", "body.0.fc.bias", "body.0.bn.gamma", "body.0.bn.beta",
                       "body.1.fc.weight", "body.1.fc.bias", "body.1.bn.gamma", "body.1.bn.beta",
                       "head.weight",      "head.bias",      "aux.weight",      "aux.bias"};

}  // namespace

// A cell with extra state: a tag and a step count, saved as bytes.
struct Tagged : ms::Cell<Tagged> {
  Dense fc{2, 2};
  std::string tag = "none";
  std::int64_t steps = 0;
  int sets = 0;  // set_extra_state calls
  Tagged() { register_cells("fc", fc); }
  ms::Tensor construct(const ms::Tensor& x) {
    ++steps;
    return fc(x);
  }
  ms::Tensor get_extra_state() const override {
    return ms::extra_state_from_string(tag + ":" + std::to_string(steps));
  }
  void set_extra_state(const ms::Tensor& t) override {
    const std::string s = ms::extra_state_to_string(t);
    const auto colon = s.find(':');
    MS_CHECK(colon != std::string::npos, ms::ValueError, "Tagged: bad extra state '", s, "'");
    tag = s.substr(0, colon);
    steps = std::stoll(s.substr(colon + 1));
    ++sets;
  }
};

// Extra state as a float tensor whose length changes.
struct History : ms::Cell<History> {
  std::vector<float> seen;
  ms::Tensor construct(const ms::Tensor& x) { return x; }
  ms::Tensor get_extra_state() const override {
    return ms::from_vector(seen, ms::Shape{static_cast<std::int64_t>(seen.size())});
  }
  void set_extra_state(const ms::Tensor& t) override { seen = t.to_vector<float>(); }
};

// Overrides get_extra_state only: loading it is an error.
struct HalfDone : ms::Cell<HalfDone> {
  ms::Tensor construct(const ms::Tensor& x) { return x; }
  ms::Tensor get_extra_state() const override { return ms::zeros({1}); }
};

struct Pair : ms::Cell<Pair> {
  Tagged a, b;
  Pair() { register_cells("a", a, "b", b); }
  ms::Tensor construct(const ms::Tensor& x) { return b(a(x)); }
};

TEST_SUITE("nn") {
  TEST_CASE("apply: every descendant before its parent, the root last; chains") {
    Net net;
    std::map<const ms::CellBase*, std::string> name_of;
    for (const auto& [n, c] : net.cells_and_names()) name_of[c] = n;
    Names order, types;
    ms::CellBase& r = net.apply([&](ms::CellBase& c) {
      order.push_back(name_of.at(&c));
      types.push_back(c.cls_name());
    });
    CHECK(&r == &net);
    CHECK(order == Names{"body.0.fc", "body.0.bn", "body.0", "body.1.fc", "body.1.bn", "body.1",
                         "body", "head", "aux", ""});
    CHECK(types == Names{"Dense", "BatchNorm1d", "Block", "Dense", "BatchNorm1d", "Block",
                         "SequentialCell", "Dense", "Dense", "Net"});
  }

  TEST_CASE("apply re-initializes every Dense weight, and only those") {
    Net net;
    const ms::Tensor gamma_before = net.b0->bn.gamma.clone();
    int denses = 0;
    net.apply([&](ms::CellBase& c) {
         if (auto* d = dynamic_cast<Dense*>(&c)) {
           d->weight.set_data(ms::full(d->weight.shape(), 0.25f));
           ++denses;
         }
       })
        .set_train(false);
    CHECK(denses == 4);
    for (const Dense* d : {&net.b0->fc, &net.b1->fc, &net.head, &net.aux})
      CHECK(ms::allclose(d->weight, ms::full(d->weight.shape(), 0.25f), 0, 0));
    CHECK(ms::allclose(net.b0->bn.gamma, gamma_before, 0, 0));
  }

  TEST_CASE("parameters_dict: the parameters under their state-dict names, in order") {
    Net net;
    const auto pd = net.parameters_dict();
    CHECK(keys_of(pd) == kParams);
    // The state dict holds the same names, plus the persistent buffers.
    Names sd_params;
    for (const auto& k : net.state_dict().keys())
      if (k.find("moving_") == std::string::npos) sd_params.push_back(k);
    CHECK(sd_params == kParams);
    CHECK(pd[0].second.same_as(net.b0->fc.weight));
    CHECK(pd[11].second.same_as(net.aux.bias));
    for (const auto& [n, p] : pd) CHECK(p.name() == n);
    // Not recursive: the cell's own parameters only.
    CHECK(keys_of(net.head.parameters_dict(false)) == Names{"weight", "bias"});
    CHECK(net.parameters_dict(false).empty());
  }

  TEST_CASE("get_parameter, get_buffer, get_sub_cell find nested items by path") {
    Net net;
    CHECK(net.get_parameter("body.1.fc.weight").same_as(net.b1->fc.weight));
    CHECK(net.get_parameter("head.bias").same_as(net.head.bias));
    CHECK(net.get_buffer("body.0.bn.moving_mean").is_same(net.b0->bn.moving_mean));
    CHECK(net.get_buffer("body.1.bn.moving_variance").is_same(net.b1->bn.moving_variance));
    CHECK(&net.get_sub_cell("body.1.bn") == &net.b1->bn);
    CHECK(&net.get_sub_cell("body") == &net.body);
    CHECK(&net.get_sub_cell("") == &net);
    CHECK(net.get_sub_cell("body.0").get_parameter("fc.bias").same_as(net.b0->fc.bias));
  }

  TEST_CASE("get_*: a missing part is a KeyError naming the path, the part and what exists") {
    Net net;
    CHECK_THROWS_WITH_AS(net.get_parameter("body.2.fc.weight"),
                         doctest::Contains("get_parameter: 'body.2.fc.weight': 'body' "
                                           "(SequentialCell) has no child cell '2'"),
                         ms::KeyError);
    CHECK_THROWS_WITH_AS(net.get_parameter("body.2.fc.weight"),
                         doctest::Contains("child cells: '0', '1'"), ms::KeyError);
    CHECK_THROWS_WITH_AS(net.get_parameter("body.0.fc.weigth"),
                         doctest::Contains("get_parameter: 'body.0.fc.weigth': 'body.0.fc' (Dense) "
                                           "has no parameter 'weigth'; its parameters: 'weight', "
                                           "'bias'"),
                         ms::KeyError);
    CHECK_THROWS_WITH_AS(net.get_buffer("body.0.bn.gamma"),
                         doctest::Contains("get_buffer: 'body.0.bn.gamma': 'body.0.bn' "
                                           "(BatchNorm1d) has no buffer 'gamma'"),
                         ms::KeyError);
    CHECK_THROWS_WITH_AS(net.get_buffer("body.0.bn.gamma"),
                         doctest::Contains("buffers: 'moving_mean', 'moving_variance'"),
                         ms::KeyError);
    CHECK_THROWS_WITH_AS(net.get_sub_cell("hed.fc"),
                         doctest::Contains("get_sub_cell: 'hed.fc': Net has no child cell 'hed'; "
                                           "its parameters: none; buffers: none; child cells: "
                                           "'body', 'head', 'aux'"),
                         ms::KeyError);
    CHECK_THROWS_WITH_AS(net.get_sub_cell("body.0.fc.weight"),
                         doctest::Contains("'body.0.fc' (Dense) has no child cell 'weight'"),
                         ms::KeyError);
  }

  TEST_CASE("update_parameters_name: the names of parameters_dict and of the state dict") {
    Net net;
    net.update_parameters_name("net1.");
    Names expected;
    for (const auto& k : kParams) expected.push_back("net1." + k);
    CHECK(keys_of(net.parameters_dict()) == expected);
    for (const auto& [n, p] : net.parameters_dict()) CHECK(p.name() == n);
    const ms::StateDict sd = net.state_dict();
    CHECK(sd.contains("net1.body.0.fc.weight"));
    CHECK(sd.contains("net1.body.1.bn.moving_mean"));
    CHECK_FALSE(sd.contains("body.0.fc.weight"));
    CHECK(sd.at("net1.head.weight").is_same(net.head.weight));
    // The renamed state dict loads back; paths for lookup are unchanged.
    CHECK(net.load_state_dict(sd).missing_keys.empty());
    CHECK(net.get_parameter("head.weight").same_as(net.head.weight));

    // On a child: its names become the prefix + its own names (MindSpore's).
    net.head.update_parameters_name("h_");
    CHECK(net.head.weight.name() == "h_weight");
    Names sd_keys = keys_of(net.state_dict());
    CHECK(std::find(sd_keys.begin(), sd_keys.end(), "h_weight") != sd_keys.end());
    CHECK(keys_of(net.parameters_dict())[8] == "h_weight");
    CHECK(keys_of(net.parameters_dict())[10] == "net1.aux.weight");

    // An empty prefix names them after their paths again.
    net.update_parameters_name("");
    CHECK(keys_of(net.parameters_dict()) == kParams);
    CHECK(net.head.weight.name() == "head.weight");
    CHECK_THROWS_WITH_AS(net.update_parameters_name("a b."),
                         doctest::Contains("update_parameters_name: prefix 'a b.' holds ' '"),
                         ms::ValueError);

    // A cell registered under a prefixed one: its parameters take the prefix,
    // in their names as in the state dict.
    struct Holder : ms::Cell<Holder> {
      ms::nn::Dense fc{2, 2};
      ms::nn::Dense extra{2, 2};
      Holder() { register_cells("fc", fc); }
      ms::Tensor construct(const ms::Tensor& x) { return fc(x); }
    } holder;
    holder.update_parameters_name("p.");
    holder.register_cells("extra", holder.extra);
    CHECK(holder.extra.weight.name() == "p.extra.weight");
    CHECK(keys_of(holder.state_dict())[2] == "p.extra.weight");
  }

  TEST_CASE("unregister_*: parameters(), the state dict and named iteration no longer see it") {
    Net net;
    const std::size_t n = net.parameters().size();
    net.unregister_cell("aux");
    CHECK(net.parameters().size() == n - 2);
    for (const auto& p : net.parameters()) CHECK_FALSE(p.same_as(net.aux.weight));
    CHECK_FALSE(net.state_dict().contains("aux.weight"));
    CHECK(cell_names(net) == Names{"", "body", "body.0", "body.0.fc", "body.0.bn", "body.1",
                                   "body.1.fc", "body.1.bn", "head"});

    net.head.unregister_parameter("bias");
    CHECK_FALSE(net.state_dict().contains("head.bias"));
    CHECK(keys_of(net.parameters_and_names()).back() == "head.weight");

    net.get_sub_cell("body.0.bn").unregister_buffer("moving_variance");
    CHECK_FALSE(net.state_dict().contains("body.0.bn.moving_variance"));
    CHECK(net.buffers().size() == 3);

    CHECK_THROWS_WITH_AS(net.unregister_cell("aux"),
                         doctest::Contains("unregister_cell: 'aux': Net has no child cell 'aux'; "
                                           "its parameters: none; buffers: none; child cells: "
                                           "'body', 'head'"),
                         ms::KeyError);
    CHECK_THROWS_WITH_AS(net.head.unregister_parameter("bias"),
                         doctest::Contains("unregister_parameter: 'bias': Dense has no parameter "
                                           "'bias'; its parameters: 'weight'"),
                         ms::KeyError);
    CHECK_THROWS_WITH_AS(net.b0->bn.unregister_buffer("moving_variance"),
                         doctest::Contains("BatchNorm1d has no buffer 'moving_variance'; its "
                                           "parameters: 'gamma', 'beta'; buffers: 'moving_mean'"),
                         ms::KeyError);
  }

  TEST_CASE("unregister_cell on containers removes the cell itself (as pop)") {
    Net net;
    net.body.unregister_cell("0");
    CHECK(net.body.size() == 1);
    CHECK(net.get_parameter("body.0.fc.weight").same_as(net.b1->fc.weight));
    CHECK_THROWS_AS(net.get_sub_cell("body.1"), ms::KeyError);
    CHECK_THROWS_WITH_AS(net.body.unregister_cell("1"),
                         doctest::Contains("SequentialCell has no child cell '1'"), ms::KeyError);

    ms::nn::CellDict heads{{"cls", std::make_shared<Dense>(4, 3)},
                           {"box", std::make_shared<Dense>(4, 2)}};
    heads.unregister_cell("cls");
    CHECK(heads.keys() == Names{"box"});
    CHECK(keys_of(heads.parameters_dict()) == Names{"box.weight", "box.bias"});
    CHECK_THROWS_AS(heads.unregister_cell("cls"), ms::KeyError);
  }

  TEST_CASE("ms::jit after unregistering: the graph is traced again, not served stale") {
    Net net;
    const ms::Tensor x = input(3, 7);
    auto f = ms::jit([&](const ms::Tensor& a) { return net(a); });
    const ms::Tensor with_aux = f(x);
    CHECK(ms::allclose(with_aux, net(x), 1e-6, 1e-6));
    CHECK(f.compile_count() == 1);

    net.use_aux = false;
    net.unregister_cell("aux");
    const ms::Tensor eager = net(x);
    CHECK_FALSE(ms::allclose(eager, with_aux, 1e-3, 1e-3));
    CHECK(ms::allclose(f(x), eager, 1e-6, 1e-6));
    CHECK(f.compile_count() == 2);

    // A container's forward changes with its registry.
    net.body.unregister_cell("1");
    const ms::Tensor one_block = net(x);
    CHECK_FALSE(ms::allclose(one_block, eager, 1e-3, 1e-3));
    CHECK(ms::allclose(f(x), one_block, 1e-6, 1e-6));
    CHECK(f.compile_count() == 3);
    CHECK(ms::allclose(f(x), one_block, 1e-6, 1e-6));
    CHECK(f.compile_count() == 3);

    // So does it with the container's own edits: append, pop, set.
    net.body.append(std::make_shared<Block>());
    const ms::Tensor appended = net(x);
    CHECK_FALSE(ms::allclose(appended, one_block, 1e-3, 1e-3));
    CHECK(ms::allclose(f(x), appended, 1e-6, 1e-6));
    CHECK(f.compile_count() == 4);
    net.body.pop();
    CHECK(ms::allclose(f(x), one_block, 1e-6, 1e-6));
    CHECK(f.compile_count() == 5);
    net.body.set(0, std::make_shared<Block>());
    const ms::Tensor replaced = net(x);
    CHECK(ms::allclose(f(x), replaced, 1e-6, 1e-6));
    CHECK(f.compile_count() == 6);
  }

  TEST_CASE("ms::jit after a CellDict edit: the graph is traced again") {
    struct Heads : ms::Cell<Heads> {
      ms::nn::CellDict heads;
      Heads() {
        heads.insert("a", std::make_shared<Dense>(4, 2));
        register_cells("heads", heads);
      }
      ms::Tensor construct(const ms::Tensor& x) {
        ms::Tensor y = ms::zeros({x.dim(0), 2});
        for (const auto& key : heads.keys()) y = y + heads[key](x);
        return y;
      }
    } net;
    const ms::Tensor x = input(3, 7);
    auto f = ms::jit([&](const ms::Tensor& a) { return net(a); });
    CHECK(ms::allclose(f(x), net(x), 1e-6, 1e-6));
    net.heads.insert("b", std::make_shared<Dense>(4, 2));
    CHECK(ms::allclose(f(x), net(x), 1e-6, 1e-6));
    CHECK(f.compile_count() == 2);
    net.heads.pop("a");
    CHECK(ms::allclose(f(x), net(x), 1e-6, 1e-6));
    CHECK(f.compile_count() == 3);
  }
  TEST_CASE("add_flags, add_flags_recursive, get_flags") {
    Net net;
    CHECK(net.get_flags().empty());
    ms::CellBase& same = net.add_flags({{"defer_inline", true}, {"level", std::int64_t{2}}});
    CHECK(&same == &net);
    CHECK(std::get<bool>(net.get_flags().at("defer_inline")));
    CHECK(std::get<std::int64_t>(net.get_flags().at("level")) == 2);
    net.add_flags({{"level", 3.5}, {"mode", std::string("fast")}});  // replaces, keeps the rest
    CHECK(net.get_flags().size() == 3);
    CHECK(std::get<double>(net.get_flags().at("level")) == 3.5);
    CHECK(std::get<std::string>(net.get_flags().at("mode")) == "fast");
    CHECK(net.head.get_flags().empty());  // add_flags is this cell only
    net.body.add_flags_recursive({{"recompute", true}});
    for (const auto& [name, c] : net.body.cells_and_names())
      CHECK_MESSAGE(std::get<bool>(c->get_flags().at("recompute")), name);
    CHECK(net.b0->fc.get_flags().count("recompute") == 1);
    CHECK(net.get_flags().count("recompute") == 0);
    CHECK(net.head.get_flags().empty());
    net.add_flags_recursive({{"recompute", false}});
    for (const auto& [name, c] : net.cells_and_names())
      CHECK_MESSAGE(!std::get<bool>(c->get_flags().at("recompute")), name);
  }

  TEST_CASE("extra state: in the state dict under <prefix>_extra_state, before the children") {
    Pair p;
    p.a.tag = "first";
    p.b.steps = 7;
    const Names keys = p.state_dict().keys();
    CHECK(keys == Names{"a._extra_state", "a.fc.weight", "a.fc.bias", "b._extra_state",
                        "b.fc.weight", "b.fc.bias"});
    CHECK(ms::extra_state_to_string(p.state_dict()["a._extra_state"]) == "first:0");
    CHECK(ms::extra_state_to_string(p.state_dict()["b._extra_state"]) == "none:7");
    Tagged c;  // the cell itself: `_extra_state`
    CHECK(c.state_dict().keys() == Names{"_extra_state", "fc.weight", "fc.bias"});
    CHECK(c.state_dict("m").keys().front() == "m._extra_state");
    ms::StateDict dst;
    c.state_dict(dst, "m", false);
    CHECK(dst.keys().front() == "m._extra_state");
    Net plain;  // no cell overrides get_extra_state: no such key
    for (const auto& k : plain.state_dict().keys())
      CHECK(k.find("_extra_state") == std::string::npos);
  }

  TEST_CASE("extra state: load_state_dict sets it; strict judges its key") {
    Pair src, dst;
    src.a.tag = "alpha";
    src.a.steps = 3;
    src.b.tag = "beta";
    src.b.steps = 11;
    ms::StateDict sd = src.state_dict();
    dst.load_state_dict(sd);
    CHECK(dst.a.tag == "alpha");
    CHECK(dst.a.steps == 3);
    CHECK(dst.b.tag == "beta");
    CHECK(dst.b.steps == 11);
    CHECK(ms::allclose(dst.a.fc.weight, src.a.fc.weight, 0, 0));
    // Missing: an error when strict (nothing changes), reported otherwise.
    ms::StateDict no_extra;
    for (const auto& [k, t] : sd)
      if (k != "b._extra_state") no_extra.emplace_back(k, t);
    Pair fresh;
    CHECK_THROWS_WITH_AS(fresh.load_state_dict(no_extra), doctest::Contains("b._extra_state"),
                         ms::ValueError);
    CHECK(fresh.a.tag == "none");
    CHECK(fresh.a.sets == 0);
    const ms::LoadResult r = fresh.load_state_dict(no_extra, false);
    CHECK(r.missing_keys == Names{"b._extra_state"});
    CHECK(fresh.a.tag == "alpha");
    CHECK(fresh.b.tag == "none");
    // A key for a cell without extra state is unexpected.
    Net plain;
    ms::StateDict with_extra = plain.state_dict();
    with_extra.emplace_back("head._extra_state", ms::extra_state_from_string("x"));
    CHECK_THROWS_AS(plain.load_state_dict(with_extra), ms::ValueError);
    CHECK(plain.load_state_dict(with_extra, false).unexpected_keys == Names{"head._extra_state"});
  }

  TEST_CASE("extra state: any tensor, of another shape than the current one") {
    History h, g;
    h.seen = {1.f, 2.f, 3.f};
    g.load_state_dict(h.state_dict());
    CHECK(g.seen == std::vector<float>{1.f, 2.f, 3.f});
    h.seen.clear();  // an empty state loads too
    g.load_state_dict(h.state_dict());
    CHECK(g.seen.empty());
    // Two cells with equal (empty) states: two entries, each loaded into its cell.
    struct Two : ms::Cell<Two> {
      History x, y;
      Two() { register_cells("x", x, "y", y); }
      ms::Tensor construct(const ms::Tensor& t) { return y(x(t)); }
    } two, other;
    CHECK(two.state_dict().keys() == Names{"x._extra_state", "y._extra_state"});
    other.x.seen = {4.f};
    other.y.seen = {5.f, 6.f};
    two.load_state_dict(other.state_dict());
    CHECK(two.x.seen == std::vector<float>{4.f});
    CHECK(two.y.seen == std::vector<float>{5.f, 6.f});
    other.x.seen.clear();
    other.y.seen.clear();
    two.load_state_dict(other.state_dict());
    CHECK(two.x.seen.empty());
    CHECK(two.y.seen.empty());
  }

  TEST_CASE("extra state: a failing set_extra_state changes nothing") {
    Pair src, dst;
    src.a.tag = "ok";
    src.a.fc.weight.set_data(ms::ones({2, 2}));
    ms::StateDict sd = src.state_dict();
    sd["b._extra_state"] = ms::extra_state_from_string("no colon");
    const ms::Tensor w0 = dst.a.fc.weight.clone();
    CHECK_THROWS_WITH_AS(dst.load_state_dict(sd), doctest::Contains("no colon"), ms::ValueError);
    CHECK(dst.a.tag == "none");  // a's state was set, then put back
    CHECK(dst.a.sets == 2);
    CHECK(ms::allclose(dst.a.fc.weight, w0, 0, 0));
    // A cell that overrides get_extra_state alone cannot load it.
    HalfDone hd;
    CHECK_THROWS_WITH_AS(hd.load_state_dict(hd.state_dict()),
                         doctest::Contains("does not override set_extra_state"), ms::ValueError);
  }

  TEST_CASE("extra_state_to_string: a uint8 1-D tensor, else TypeError or ShapeError") {
    CHECK(ms::extra_state_to_string(ms::extra_state_from_string("")).empty());
    CHECK(ms::extra_state_to_string(ms::extra_state_from_string(std::string("a\0b", 3))) ==
          std::string("a\0b", 3));
    CHECK_THROWS_WITH_AS(ms::extra_state_to_string(ms::zeros({3})),
                         doctest::Contains("expected a uint8 tensor, got Float32"), ms::TypeError);
    CHECK_THROWS_WITH_AS(ms::extra_state_to_string(ms::zeros({2, 2}, ms::uint8)),
                         doctest::Contains("expected a 1-D tensor"), ms::ShapeError);
  }

  TEST_CASE("ParameterTuple: registered under the parameters' own names") {
    struct Holder : ms::Cell<Holder> {
      ms::ParameterTuple p;
      Holder() {
        p = register_parameter_tuple(
            "p", {ms::Parameter(ms::ones({2}), "w1"), ms::Parameter(ms::zeros({3}), "w2")});
      }
      ms::Tensor construct(const ms::Tensor& x) { return x * ms::sum(p[0]); }
    };
    struct Outer : ms::Cell<Outer> {
      Holder h;
      Outer() { register_cells("h", h); }
      ms::Tensor construct(const ms::Tensor& x) { return h(x); }
    } net;
    CHECK(keys_of(net.parameters_dict()) == Names{"h.w1", "h.w2"});
    CHECK(net.state_dict().keys() == Names{"h.w1", "h.w2"});
    CHECK(net.h.p[0].name() == "h.w1");  // renamed with the path, as every parameter
    Names it;
    for (const ms::Parameter& q : net.h.get_parameter_tuple("p")) it.push_back(q.name());
    CHECK(it == Names{"h.w1", "h.w2"});
    CHECK(net.h.get_parameter_tuple("p")[1].same_as(net.h.p[1]));
    CHECK_THROWS_WITH_AS((void)net.h.get_parameter_tuple("q"), doctest::Contains("its tuples: 'p'"),
                         ms::KeyError);
    CHECK_THROWS_AS((void)net.h.p[2], ms::IndexError);
    // Optimizers take it as their parameter list.
    ms::optim::SGD opt(net.h.p, {.lr = 0.5});
    CHECK(opt.parameters().size() == 2);
    CHECK(opt.parameters()[0].same_as(net.h.p[0]));
  }

  TEST_CASE("ParameterTuple: dotted names are found by get_parameter and cannot collide") {
    struct Holder : ms::Cell<Holder> {
      ms::nn::Dense fc{2, 2};
      ms::ParameterTuple m;
      Holder() {
        register_cells("fc", fc);
        m = register_parameter_tuple("m", {ms::Parameter(ms::ones({2}), "ema.fc.weight")});
      }
      ms::Tensor construct(const ms::Tensor& x) { return fc(x); }
    };
    struct Outer : ms::Cell<Outer> {
      Holder h;
      Outer() { register_cells("h", h); }
      ms::Tensor construct(const ms::Tensor& x) { return h(x); }
    } net;
    CHECK(net.get_parameter("h.ema.fc.weight").same_as(net.h.m[0]));
    CHECK(net.h.get_parameter("ema.fc.weight").same_as(net.h.m[0]));
    CHECK(net.get_parameter("h.fc.weight").same_as(net.h.fc.weight));
    CHECK_THROWS_AS((void)net.get_parameter("h.ema.fc.bias"), ms::KeyError);
    // A dotted name that starts with a child's name: its path would be the child's.
    CHECK_THROWS_WITH_AS(
        net.h.register_parameter_tuple("t", {ms::Parameter(ms::zeros({2, 2}), "fc.weight")}),
        doctest::Contains("of the ParameterTuple 't' starts with the child cell 'fc'"),
        ms::ValueError);
    CHECK(net.h.parameters().size() == 3);
    // And a child registered later under the first part of a tuple's dotted name.
    ms::nn::Dense late{2, 2};
    CHECK_THROWS_WITH_AS(net.h.insert_child_to_cell("ema", late),
                         doctest::Contains("of the ParameterTuple 'm'"), ms::ValueError);
  }

  TEST_CASE("ParameterTuple: generated names, clashes, clone") {
    struct Empty : ms::Cell<Empty> {
      ms::Tensor construct(const ms::Tensor& x) { return x; }
    } c;
    // Generated names become Parameter$1, Parameter$2 (per cell), as MindSpore.
    ms::ParameterTuple t = c.register_parameter_tuple(
        "t", {ms::Parameter(ms::zeros({1})), ms::Parameter(ms::zeros({1}))});
    CHECK(keys_of(c.parameters_dict()) == Names{"Parameter$1", "Parameter$2"});
    CHECK(t[1].name() == "Parameter$2");
    c.register_parameter_tuple("u",
                               {ms::Parameter(ms::zeros({1})), ms::Parameter(ms::ones({1}), "x")});
    CHECK(keys_of(c.parameters_dict()) == Names{"Parameter$1", "Parameter$2", "Parameter$3", "x"});
    // The same name twice, in one tuple or against the cell: ValueError.
    CHECK_THROWS_WITH_AS(ms::ParameterTuple({ms::Parameter(ms::zeros({1}), "a"),
                                             ms::Parameter(ms::zeros({1}), "a")}),
                         doctest::Contains("already has"), ms::ValueError);
    CHECK_THROWS_WITH_AS(c.register_parameter_tuple("v", {ms::Parameter(ms::zeros({1}), "x")}),
                         doctest::Contains("name 'x' is already used by parameter"),
                         ms::ValueError);
    CHECK_THROWS_AS(c.register_parameter_tuple("t", {}), ms::ValueError);      // name taken
    CHECK_THROWS_AS(c.register_parameter_tuple("w", {t[0]}), ms::ValueError);  // registered
    CHECK(c.parameters().size() == 4);  // the failed calls registered nothing
    // clone: prefix.name, values copied ("same") or from an initializer.
    ms::Parameter w(ms::tensor({1.f, 2.f}), "fc.weight");
    ms::Parameter b(ms::tensor({3.f}), "fc.bias", false);
    const ms::ParameterTuple orig{w, b};
    const ms::ParameterTuple same = orig.clone("ema");
    CHECK(same[0].name() == "ema.fc.weight");
    CHECK(same[1].name() == "ema.fc.bias");
    CHECK(!same[1].requires_grad());
    CHECK(ms::allclose(same[0], w, 0, 0));
    CHECK(!same[0].same_as(w));
    w.set_data(ms::tensor({9.f, 9.f}));  // a copy, not a view
    CHECK(same[0].to_vector<float>() == std::vector<float>{1.f, 2.f});
    const ms::ParameterTuple m = orig.clone("moments", "zeros");
    CHECK(m[0].to_vector<float>() == std::vector<float>{0.f, 0.f});
    CHECK(m[0].dtype() == ms::float32);
    // Registered on another cell, the cloned names keep their dots.
    struct Opt : ms::Cell<Opt> {
      ms::Tensor construct(const ms::Tensor& x) { return x; }
    } o;
    o.register_parameter_tuple("moments", m);
    CHECK(o.state_dict().keys() == Names{"moments.fc.weight", "moments.fc.bias"});
    CHECK_THROWS_AS(orig.clone(""), ms::ValueError);
    CHECK_THROWS_AS(orig.clone("a b"), ms::ValueError);
  }

  TEST_CASE("set_jit_config: ms::jit(cell) compiles with the cell's config") {
    struct Chain : ms::Cell<Chain> {
      ms::Tensor construct(const ms::Tensor& a, const ms::Tensor& b) {
        return ms::tanh(a * b + 1.f) - a;
      }
    };
    const ms::Tensor x = ms::ones({4, 4}), y = ms::full({4, 4}, 0.5);
    Chain plain, debug;
    CHECK(plain.get_jit_config() == nullptr);
    debug.set_jit_config({.jit_level = ms::JitLevel::O0});
    REQUIRE(debug.get_jit_config() != nullptr);
    CHECK(debug.get_jit_config()->jit_level == ms::JitLevel::O0);
    auto f1 = ms::jit(plain);
    auto f0 = ms::jit(debug);
    CHECK(ms::allclose(f1(x, y), plain(x, y), 1e-6, 1e-6));
    CHECK(ms::allclose(f0(x, y), debug(x, y), 1e-6, 1e-6));
    CHECK(f1.dump().find("Fused[") != std::string::npos);
    CHECK(f0.dump().find("Fused") == std::string::npos);  // O0: no fusion
    CHECK(f0.dump().find("= Tanh(") != std::string::npos);
    // A config given to ms::jit wins over the cell's.
    auto f_explicit = ms::jit(debug, {.jit_level = ms::JitLevel::O1});
    (void)f_explicit(x, y);
    CHECK(f_explicit.dump().find("Fused[") != std::string::npos);
    // Through enable_dynamic too.
    auto fd = ms::jit(ms::enable_dynamic(debug, ms::TensorSpec({-1, 4}, ms::float32),
                                         ms::TensorSpec({-1, 4}, ms::float32)));
    (void)fd(x, y);
    CHECK(fd.dump().find("Fused") == std::string::npos);
  }
}
