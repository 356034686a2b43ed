// Cell containers: SequentialCell and CellList (insert, extend, pop, set,
// negative indices) and CellDict (ordered by insertion, keyed registration),
// their children's names after every change, and every bad input.
#include <doctest/doctest.h>

#include <memory>
#include <ms/cell.hpp>
#include <string>
#include <vector>

#include "nn/nn_test_util.hpp"

namespace {

using ms::AnyCell;
using ms::nn::Dense;
using ms::nn::ReLU;

std::shared_ptr<Dense> dense(std::int64_t in, std::int64_t out) {
  return std::make_shared<Dense>(in, out);
}

using ms_test::randn;

std::vector<std::string> child_names(const ms::CellBase& c) {
  std::vector<std::string> out;
  for (const auto& [n, ch] : c.name_cells()) out.push_back(n);
  return out;
}

std::vector<ms::CellBase*> child_cells(const ms::CellBase& c) {
  std::vector<ms::CellBase*> out;
  for (const auto& [n, ch] : c.name_cells()) out.push_back(ch);
  return out;
}

std::vector<std::string> param_names(const ms::CellBase& c) {
  std::vector<std::string> out;
  for (const auto& [n, p] : c.parameters_and_names()) out.push_back(n);
  return out;
}

using Names = std::vector<std::string>;

// A model holding a CellDict as a member: names nest as `heads.<key>.weight`.
struct TwoHeads : ms::Cell<TwoHeads> {
  ms::nn::CellDict heads{{"cls", dense(4, 3)}, {"box", dense(4, 2)}};
  TwoHeads() { register_cells("heads", heads); }
  ms::Tensor construct(const ms::Tensor& x) { return heads["cls"](x); }
};

}  // namespace

TEST_SUITE("nn") {
  TEST_CASE("CellList: insert, extend, pop, set keep the children named 0, 1, ... in order") {
    auto a = dense(2, 3), b = dense(3, 4), c = dense(4, 5);
    auto r = std::make_shared<ReLU>();
    ms::nn::CellList list{a, c};
    list.insert(1, b);  // a b c
    CHECK(child_names(list) == Names{"0", "1", "2"});
    CHECK(child_cells(list) == std::vector<ms::CellBase*>{a.get(), b.get(), c.get()});
    CHECK(param_names(list) ==
          Names{"0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"});
    CHECK(c->weight.name() == "2.weight");  // renamed from "1.weight" by the insert

    list.insert(0, r);  // r a b c
    CHECK(list.size() == 4);
    CHECK(child_cells(list) == std::vector<ms::CellBase*>{r.get(), a.get(), b.get(), c.get()});
    CHECK(param_names(list).front() == "1.weight");
    CHECK(a->weight.name() == "1.weight");

    list.insert(-1, dense(1, 1));  // before the last: r a b d c
    CHECK(list[3].as<Dense>()->in_channels == 1);
    CHECK(list[-1].ptr() == c);
    list.insert(5, dense(5, 5));  // index == size appends: r a b d c e
    CHECK(list[-1].as<Dense>()->in_channels == 5);
    CHECK(child_names(list) == Names{"0", "1", "2", "3", "4", "5"});

    // pop: default the last; from the middle renames what follows.
    AnyCell e = list.pop();
    CHECK(e.as<Dense>()->in_channels == 5);
    AnyCell d = list.pop(3);
    CHECK(d.as<Dense>()->in_channels == 1);
    CHECK(child_cells(list) == std::vector<ms::CellBase*>{r.get(), a.get(), b.get(), c.get()});
    CHECK(child_names(list) == Names{"0", "1", "2", "3"});
    CHECK(c->weight.name() == "3.weight");
    list.erase(-4);  // r
    CHECK(child_cells(list) == std::vector<ms::CellBase*>{a.get(), b.get(), c.get()});
    CHECK(param_names(list) ==
          Names{"0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"});

    // set: the new cell takes the name, the old one is no longer a child.
    auto b2 = dense(3, 4);
    list.set(-2, b2);
    CHECK(child_cells(list) == std::vector<ms::CellBase*>{a.get(), b2.get(), c.get()});
    CHECK(b2->weight.name() == "1.weight");
    CHECK(list.parameters().size() == 6);

    list.extend({r, dense(5, 6)});
    CHECK(child_names(list) == Names{"0", "1", "2", "3", "4"});
    CHECK(param_names(list).back() == "4.bias");

    std::vector<ms::CellBase*> seen;
    for (const AnyCell& x : list) seen.push_back(x.ptr().get());
    CHECK(seen == child_cells(list));
    CHECK(list.to_string().find("(4): Dense(") != std::string::npos);
  }

  TEST_CASE("SequentialCell: insert and pop change the forward, negative indices") {
    auto fc1 = dense(4, 5), fc2 = dense(5, 2);
    ms::nn::SequentialCell seq{fc1, fc2};
    const ms::Tensor x = randn({3, 4}, 5);
    CHECK(ms::allclose(seq(x), (*fc2)((*fc1)(x)), 0, 0));

    seq.insert(1, std::make_shared<ReLU>());
    CHECK(seq.size() == 3);
    CHECK(child_names(seq) == Names{"0", "1", "2"});
    CHECK(param_names(seq) == Names{"0.weight", "0.bias", "2.weight", "2.bias"});
    CHECK(ms::allclose(seq(x), (*fc2)(ms::relu((*fc1)(x))), 0, 0));
    CHECK(seq[-1].ptr() == fc2);
    CHECK(seq[-3].ptr() == fc1);

    AnyCell relu = seq.pop(-2);
    CHECK(relu.as<ReLU>() != nullptr);
    CHECK(param_names(seq) == Names{"0.weight", "0.bias", "1.weight", "1.bias"});
    CHECK(ms::allclose(seq(x), (*fc2)((*fc1)(x)), 0, 0));

    auto fc2b = dense(5, 2);
    seq.set(1, fc2b);
    CHECK(ms::allclose(seq(x), (*fc2b)((*fc1)(x)), 0, 0));
    CHECK(child_cells(seq) == std::vector<ms::CellBase*>{fc1.get(), fc2b.get()});

    seq.extend({std::make_shared<ms::nn::Tanh>()});
    CHECK(ms::allclose(seq(x), ms::tanh((*fc2b)((*fc1)(x))), 0, 0));
    seq.append(std::make_shared<ReLU>());
    CHECK(child_names(seq) == Names{"0", "1", "2", "3"});
  }

  TEST_CASE("containers nest: names as MindSpore's, forward through the inner cells") {
    // A SequentialCell inside a SequentialCell runs; a CellList holds a
    // CellList and a SequentialCell. (Holding a CellList in an AnyCell did not
    // compile: Cell::operator() was not constrained to what construct takes.)
    auto inner = std::make_shared<ms::nn::SequentialCell>(
        std::initializer_list<AnyCell>{dense(4, 8), std::make_shared<ReLU>(), dense(8, 4)});
    ms::nn::SequentialCell outer{inner, dense(4, 2)};
    const ms::Tensor x = randn({3, 4}, 5);
    const ms::Tensor want = (*outer[1].as<Dense>())((*inner)(x));
    CHECK(ms::allclose(outer(x), want, 0, 0));
    CHECK(param_names(outer) ==
          Names{"0.0.weight", "0.0.bias", "0.2.weight", "0.2.bias", "1.weight", "1.bias"});

    auto sub = std::make_shared<ms::nn::CellList>(std::initializer_list<AnyCell>{dense(2, 2)});
    ms::nn::CellList list{sub, inner};
    CHECK(param_names(list) ==
          Names{"0.0.weight", "0.0.bias", "1.0.weight", "1.0.bias", "1.2.weight", "1.2.bias"});
    CHECK(list[0].as<ms::nn::CellList>() == sub.get());
    CHECK(list[1](x).shape() == ms::Shape{3, 4});
    // A CellList is not callable: through an AnyCell that is a TypeError naming it.
    CHECK_THROWS_WITH_AS(list[0](x), doctest::Contains("CellList is not callable with one tensor"),
                         ms::TypeError);
  }

  TEST_CASE("CellList and SequentialCell: bad indices and cells") {
    ms::nn::CellList list{dense(2, 2), dense(2, 2), dense(2, 2)};
    CHECK_THROWS_WITH_AS(list[3],
                         doctest::Contains("CellList[]: index 3 is out of range for size 3 "
                                           "(expected -3 <= index <= 2)"),
                         ms::IndexError);
    CHECK_THROWS_WITH_AS(list[-4], doctest::Contains("CellList[]: index -4"), ms::IndexError);
    CHECK_THROWS_WITH_AS(list.insert(4, dense(2, 2)),
                         doctest::Contains("CellList.insert: index 4 is out of range for size 3 "
                                           "(expected -3 <= index <= 3)"),
                         ms::IndexError);
    CHECK_THROWS_WITH_AS(list.insert(-4, dense(2, 2)),
                         doctest::Contains("CellList.insert: index -4"), ms::IndexError);
    CHECK_THROWS_WITH_AS(list.pop(3), doctest::Contains("CellList.pop: index 3"), ms::IndexError);
    CHECK_THROWS_WITH_AS(list.erase(-4), doctest::Contains("CellList.pop: index -4"),
                         ms::IndexError);
    CHECK_THROWS_WITH_AS(list.set(3, dense(2, 2)), doctest::Contains("CellList.set: index 3"),
                         ms::IndexError);
    CHECK_THROWS_WITH_AS(list.insert(0, AnyCell{}),
                         doctest::Contains("CellList.insert: cell is an empty ms::AnyCell"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(list.append(AnyCell{}),
                         doctest::Contains("CellList.append: cell is an empty"), ms::ValueError);
    CHECK_THROWS_WITH_AS(list.set(0, AnyCell{}),
                         doctest::Contains("CellList.set: cell is an empty"), ms::ValueError);
    // extend is all-or-nothing: the good cell before the empty one is not added.
    CHECK_THROWS_WITH_AS(list.extend({dense(2, 2), AnyCell{}}),
                         doctest::Contains("CellList.extend: cell is an empty"), ms::ValueError);
    CHECK(list.size() == 3);
    CHECK(child_names(list) == Names{"0", "1", "2"});

    ms::nn::CellList empty;
    CHECK_THROWS_WITH_AS(empty.pop(),
                         doctest::Contains("CellList.pop: index -1 is out of range: "
                                           "the CellList is empty"),
                         ms::IndexError);
    CHECK_THROWS_WITH_AS(empty[0], doctest::Contains("CellList[]: index 0"), ms::IndexError);
    empty.insert(0, dense(1, 1));  // inserting at 0 (== size) works on an empty list
    CHECK(child_names(empty) == Names{"0"});

    // A SequentialCell cannot hold itself, directly or through a child.
    auto seq = std::make_shared<ms::nn::SequentialCell>();
    CHECK_THROWS_WITH_AS(seq->append(seq),
                         doctest::Contains("SequentialCell.append: cell (SequentialCell) is this "
                                           "SequentialCell itself: cells must form a tree"),
                         ms::ValueError);
    auto outer = std::make_shared<ms::nn::SequentialCell>();
    seq->append(outer);
    CHECK_THROWS_WITH_AS(outer->insert(0, seq),
                         doctest::Contains("SequentialCell.insert: cell (SequentialCell through "
                                           "its child '0') is this SequentialCell itself"),
                         ms::ValueError);
    CHECK(outer->size() == 0);
    CHECK_THROWS_WITH_AS((*seq)[1], doctest::Contains("SequentialCell[]: index 1"), ms::IndexError);
  }

  TEST_CASE("CellDict: insertion order, replace in place, update, pop, clear, iteration") {
    auto fc1 = dense(4, 8), fc2 = dense(8, 3);
    auto act = std::make_shared<ReLU>();
    ms::nn::CellDict dict{{"fc1", fc1}, {"act", act}, {"fc2", fc2}};
    CHECK(dict.size() == 3);
    CHECK(dict.keys() == Names{"fc1", "act", "fc2"});
    CHECK(child_names(dict) == Names{"fc1", "act", "fc2"});
    CHECK(param_names(dict) == Names{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
    CHECK(fc2->weight.name() == "fc2.weight");
    CHECK(dict.contains("act"));
    CHECK_FALSE(dict.contains("fc3"));
    CHECK(dict["fc1"].ptr() == fc1);
    CHECK(dict.at("fc2").ptr() == fc2);
    const auto values = dict.values();
    REQUIRE(values.size() == 3);
    CHECK(values[1].ptr() == act);
    CHECK(dict.items()[2].first == "fc2");

    Names order;
    for (const auto& [key, cell] : dict) {
      order.push_back(key);
      CHECK(cell.ptr() == dict[key].ptr());
    }
    CHECK(order == Names{"fc1", "act", "fc2"});

    // Forward through cells looked up by key.
    const ms::Tensor x = randn({2, 4}, 11);
    const ms::Tensor y = dict["fc2"](dict["act"](dict["fc1"](x)));
    CHECK(y.shape() == ms::Shape({2, 3}));
    CHECK(ms::allclose(y, (*fc2)(ms::relu((*fc1)(x))), 0, 0));

    // insert: an existing key is replaced in place, keeping its position and name.
    auto act2 = std::make_shared<ms::nn::Tanh>();
    dict.insert("act", act2);
    CHECK(dict.keys() == Names{"fc1", "act", "fc2"});
    CHECK(child_cells(dict) == std::vector<ms::CellBase*>{fc1.get(), act2.get(), fc2.get()});
    CHECK(
        ms::allclose(dict["fc2"](dict["act"](dict["fc1"](x))), (*fc2)(ms::tanh((*fc1)(x))), 0, 0));
    auto fc1b = dense(4, 8);
    dict.insert("fc1", fc1b);
    CHECK(child_cells(dict) == std::vector<ms::CellBase*>{fc1b.get(), act2.get(), fc2.get()});
    CHECK(fc1b->weight.name() == "fc1.weight");
    CHECK(param_names(dict) == Names{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});

    // insert of a new key, and update: existing keys replaced in place, new ones appended.
    dict.insert("out", std::make_shared<ms::nn::Softmax>());
    auto fc2b = dense(8, 3);
    dict.update({{"norm", std::make_shared<ms::nn::LayerNorm>(std::vector<std::int64_t>{3})},
                 {"fc2", fc2b}});
    CHECK(dict.keys() == Names{"fc1", "act", "fc2", "out", "norm"});
    CHECK(child_names(dict) == dict.keys());
    CHECK(dict["fc2"].ptr() == fc2b);
    CHECK(param_names(dict) ==
          Names{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "norm.gamma", "norm.beta"});

    // pop returns the cell and unregisters it.
    AnyCell popped = dict.pop("fc2");
    CHECK(popped.ptr() == fc2b);
    CHECK(dict.keys() == Names{"fc1", "act", "out", "norm"});
    CHECK(child_names(dict) == dict.keys());
    CHECK(param_names(dict) == Names{"fc1.weight", "fc1.bias", "norm.gamma", "norm.beta"});
    CHECK_FALSE(dict.contains("fc2"));
    CHECK(dict.to_string().find("(fc2)") == std::string::npos);
    CHECK(dict.to_string().find("(norm): LayerNorm(") != std::string::npos);

    // update from another CellDict's items keeps that order.
    ms::nn::CellDict other{{"z", dense(1, 1)}, {"a", dense(1, 1)}};
    ms::nn::CellDict copy;
    copy.update(other.items());
    CHECK(copy.keys() == Names{"z", "a"});
    CHECK(copy["z"].ptr() == other["z"].ptr());

    dict.clear();
    CHECK(dict.size() == 0);
    CHECK(dict.empty());
    CHECK(dict.name_cells().empty());
    CHECK(dict.parameters().empty());
    dict.insert("fc1", fc1);  // usable again after clear
    CHECK(child_names(dict) == Names{"fc1"});
  }

  TEST_CASE("CellDict: hierarchical names, printed tree and a state_dict round trip") {
    TwoHeads a;
    CHECK(param_names(a) ==
          Names{"heads.cls.weight", "heads.cls.bias", "heads.box.weight", "heads.box.bias"});
    const std::string tree = a.to_string();
    CHECK(tree.find("(heads): CellDict(") != std::string::npos);
    CHECK(tree.find("(cls): Dense(input_channels=4, output_channels=3") != std::string::npos);
    CHECK(tree.find("(box): Dense(input_channels=4, output_channels=2") != std::string::npos);

    ms::StateDict sd;
    for (const auto& [k, t] : a.state_dict()) sd.emplace_back(k, t.clone());
    Names keys;
    for (const auto& [k, t] : sd) keys.push_back(k);
    CHECK(keys ==
          Names{"heads.cls.weight", "heads.cls.bias", "heads.box.weight", "heads.box.bias"});

    TwoHeads b;  // other random weights
    const ms::Tensor x = randn({5, 4}, 3);
    CHECK_FALSE(ms::allclose(a(x), b(x), 0, 0));
    const auto res = b.load_state_dict(sd);
    CHECK(res.missing_keys.empty());
    CHECK(res.unexpected_keys.empty());
    CHECK(ms::allclose(a(x), b(x), 0, 0));
    CHECK(ms::allclose(a.heads["box"](x), b.heads["box"](x), 0, 0));
    CHECK(ms::allclose(b.heads["box"].as<Dense>()->weight, sd[2].second, 0, 0));

    // The dict on its own: keys without the outer prefix; a popped key is missing.
    ms::nn::CellDict d{{"cls", dense(4, 3)}, {"box", dense(4, 2)}};
    d.load_state_dict(a.heads.state_dict());
    CHECK(ms::allclose(d["cls"](x), a(x), 0, 0));
    d.pop("box");
    CHECK_THROWS_WITH_AS(d.load_state_dict(a.heads.state_dict()),
                         doctest::Contains("unexpected keys for CellDict: 'box.weight'"),
                         ms::ValueError);
  }

  TEST_CASE("CellDict: bad keys, missing keys and bad cells") {
    ms::nn::CellDict dict{{"fc", dense(2, 2)}};
    CHECK_THROWS_WITH_AS(dict.insert("a.b", dense(2, 2)),
                         doctest::Contains("CellDict.insert: key 'a.b' is invalid: a CellDict key "
                                           "must be a non-empty string without '.'"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(dict.insert("", dense(2, 2)),
                         doctest::Contains("CellDict.insert: key '' is invalid"), ms::ValueError);
    CHECK_THROWS_WITH_AS((ms::nn::CellDict{{"x.y", dense(2, 2)}}),
                         doctest::Contains("CellDict.update: key 'x.y' is invalid"),
                         ms::ValueError);
    // update is all-or-nothing: "ok" is not added when a later key is bad.
    CHECK_THROWS_WITH_AS(dict.update({{"ok", dense(2, 2)}, {".", dense(2, 2)}}),
                         doctest::Contains("CellDict.update: key '.' is invalid"), ms::ValueError);
    CHECK(dict.keys() == Names{"fc"});
    CHECK(child_names(dict) == Names{"fc"});

    CHECK_THROWS_WITH_AS(
        dict["nope"], doctest::Contains("CellDict[]: no key 'nope' in the CellDict (keys: 'fc')"),
        ms::IndexError);
    CHECK_THROWS_WITH_AS(dict.at("nope"), doctest::Contains("CellDict.at: no key 'nope'"),
                         ms::IndexError);
    CHECK_THROWS_WITH_AS(dict.pop("nope"), doctest::Contains("CellDict.pop: no key 'nope'"),
                         ms::IndexError);
    CHECK(dict.size() == 1);
    ms::nn::CellDict empty;
    CHECK_THROWS_WITH_AS(empty.at("a"), doctest::Contains("(keys: none)"), ms::IndexError);

    CHECK_THROWS_WITH_AS(dict.insert("e", AnyCell{}),
                         doctest::Contains("CellDict.insert: the cell for key 'e' is an empty "
                                           "ms::AnyCell"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(dict.insert("fc", AnyCell{}),
                         doctest::Contains("CellDict.insert: the cell for key 'fc' is an empty"),
                         ms::ValueError);
    CHECK(dict["fc"].ptr() != nullptr);  // the failed replace kept the old cell
    CHECK_THROWS_WITH_AS(
        dict.insert("seq", std::make_shared<ms::nn::SequentialCell>()),
        doctest::Contains("CellDict.insert: the cell for key 'seq' is a SequentialCell"),
        ms::TypeError);
    CHECK(dict.keys() == Names{"fc"});
  }
}
