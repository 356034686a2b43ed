// ms::StateDict: ordered, indexable by name, a KeyError that names close
// names, and the same type through safetensors / npz and load_state_dict.
#include <doctest/doctest.h>

#include <algorithm>
#include <ms/cell.hpp>
#include <ms/io/npy.hpp>
#include <ms/io/safetensors.hpp>
#include <string>
#include <vector>

namespace {

struct BlockWithBuffer : ms::Cell<BlockWithBuffer> {
  ms::nn::Dense fc1{4, 3}, fc2{3, 2};
  ms::Parameter scale{ms::ones({2}), "scale"};
  BlockWithBuffer() {
    register_parameter("scale", scale);
    register_cells("fc1", fc1, "fc2", fc2);
    register_buffer("steps", ms::zeros({1}));
  }
  ms::Tensor construct(const ms::Tensor& x) { return fc2(fc1(x)) * scale; }
};

}  // namespace

TEST_SUITE("nn") {
  TEST_CASE("state dict: registration order, lookup by name, size") {
    BlockWithBuffer net;
    ms::StateDict sd = net.state_dict();
    CHECK(sd.keys() == std::vector<std::string>{"scale", "steps", "fc1.weight", "fc1.bias",
                                                "fc2.weight", "fc2.bias"});
    CHECK(sd.size() == 6);
    std::vector<std::string> seen;
    for (const auto& [name, t] : sd) seen.push_back(name);
    CHECK(seen == sd.keys());
    // The entries are the cell's tensors themselves, by name and by position.
    CHECK(sd["fc1.weight"].shape() == ms::Shape({3, 4}));
    CHECK(sd.at("fc2.bias").storage() == net.fc2.bias.storage());
    CHECK(sd[0].first == "scale");
    CHECK(sd.contains("fc1.bias"));
    CHECK_FALSE(sd.contains("fc1"));
    CHECK_FALSE(sd.contains("fc3.bias"));
    const ms::StateDict& csd = sd;
    CHECK(csd["scale"].storage() == net.scale.storage());
    CHECK(csd.find("nope") == csd.end());
    // Writing through a name replaces that entry only; insert_or_assign appends new names.
    sd["scale"] = ms::full({2}, 3.0f);
    CHECK(ms::allclose(sd.at("scale"), ms::full({2}, 3.0f)));
    CHECK(ms::allclose(net.scale, ms::ones({2})));
    sd.insert_or_assign("scale", ms::full({2}, 4.0f));
    sd.insert_or_assign("extra", ms::zeros({1}));
    CHECK(sd.size() == 7);
    CHECK(sd.keys().back() == "extra");
    CHECK(ms::allclose(sd["scale"], ms::full({2}, 4.0f)));
  }

  TEST_CASE("state dict: a missing name is a KeyError naming it and the close names") {
    BlockWithBuffer net;
    const ms::StateDict sd = net.state_dict();
    CHECK_THROWS_WITH_AS(sd.at("fc1.weigth"),
                         doctest::Contains("StateDict: no entry 'fc1.weigth'; close names: "
                                           "'fc1.weight'"),
                         ms::KeyError);
    // A missing prefix finds the full names; the closest come first.
    CHECK_THROWS_WITH_AS(sd["bias"], doctest::Contains("close names: 'fc1.bias', 'fc2.bias'"),
                         ms::KeyError);
    // Nothing close: the first names are listed instead.
    CHECK_THROWS_WITH_AS(sd["encoder.layers.0.attention.query.weight"],
                         doctest::Contains("it holds 6 names: 'scale', 'steps', 'fc1.weight'"),
                         ms::KeyError);
    CHECK_THROWS_WITH_AS(ms::StateDict().at("w"), doctest::Contains("the state dict is empty"),
                         ms::KeyError);
  }

  TEST_CASE("state dict: through safetensors and npz, and back into a cell") {
    BlockWithBuffer a, b;
    for (auto& [name, t] : a.state_dict()) t.copy_(ms::full(t.shape(), 0.25, t.dtype()));
    const auto bytes = ms::io::to_safetensors_bytes(a.state_dict());
    const ms::io::SafetensorsFile f = ms::io::from_safetensors_bytes(bytes);
    // A safetensors file orders its entries by dtype and name (as the reference
    // library writes them); every name is there, and lookup does not care.
    auto sorted = [](std::vector<std::string> v) {
      std::sort(v.begin(), v.end());
      return v;
    };
    CHECK(sorted(f.tensors.keys()) == sorted(a.state_dict().keys()));
    CHECK(ms::allclose(f.tensors["fc2.weight"], a.fc2.weight, 0, 0));
    b.load_state_dict(f.tensors);
    CHECK(ms::allclose(b.fc1.weight, a.fc1.weight, 0, 0));
    const ms::io::NamedTensors z = ms::io::from_npz_bytes(ms::io::to_npz_bytes(a.state_dict()));
    CHECK(z.contains("steps"));
    CHECK(ms::allclose(z.at("fc1.bias"), a.fc1.bias, 0, 0));
    // A state dict edited by name loads only when it still fits.
    ms::StateDict edited = a.state_dict();
    edited["fc1.bias"] = ms::zeros({5});
    CHECK_THROWS_WITH_AS(b.load_state_dict(edited), doctest::Contains("'fc1.bias' has shape [3]"),
                         ms::ShapeError);
  }
}
