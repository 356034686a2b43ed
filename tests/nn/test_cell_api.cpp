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

ms::Tensor input() {
  ms::Generator g(7);
  return ms::normal({3, 4}, 0.0, 1.0, g);
}

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
    const ms::Tensor x = input();
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
    const ms::Tensor x = input();
    auto f = ms::jit([&](const ms::Tensor& a) { return net(a); });
    CHECK(ms::allclose(f(x), net(x), 1e-6, 1e-6));
    net.heads.insert("b", std::make_shared<Dense>(4, 2));
    CHECK(ms::allclose(f(x), net(x), 1e-6, 1e-6));
    CHECK(f.compile_count() == 2);
    net.heads.pop("a");
    CHECK(ms::allclose(f(x), net(x), 1e-6, 1e-6));
    CHECK(f.compile_count() == 3);
  }
}
