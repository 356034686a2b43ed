// ONNX external data: export_model writing initializers to a data file,
// GraphCell reading them back (each file opened once), python3's onnx reading
// ms's files, and every hostile location, offset and length GraphCell refuses.
#include <doctest/doctest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ms/cell.hpp"
#include "ms/io/file_system.hpp"
#include "ms/io/npy.hpp"
#include "ms/onnx/export.hpp"
#include "ms/onnx/graph_cell.hpp"
#include "ms/ops/random.hpp"
#include "onnx/onnx_test_models.hpp"
#include "temp_dir.hpp"

namespace {

using ::onnx::ModelProto;
using ::onnx::TensorProto;
using MLP = ms_onnx_test::Mlp<32>;
namespace fs = std::filesystem;

bool same_tensor(const ms::Tensor& a, const ms::Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         ms::cast(a, ms::float64).contiguous().to_vector<double>() ==
             ms::cast(b, ms::float64).contiguous().to_vector<double>();
}

ModelProto read_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ModelProto m;
  REQUIRE(m.ParseFromIstream(&in));
  return m;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

using ms_onnx_test::bytes_of;

// y = x + b, x float [2, 3]; b a float [3] initializer with the given external_data entries.
ModelProto ext_model(const std::vector<std::pair<std::string, std::string>>& entries) {
  ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("ext");
  for (auto* vi : {g->add_input(), g->add_output()}) {
    vi->set_name(g->output_size() == 0 || vi != &g->output(0) ? "x" : "y");
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(2);
    tt->mutable_shape()->add_dim()->set_dim_value(3);
  }
  auto* b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(TensorProto::FLOAT);
  b->add_dims(3);
  b->set_data_location(TensorProto::EXTERNAL);
  for (const auto& [k, v] : entries) {
    auto* e = b->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add");
  add->add_input("x");
  add->add_input("b");
  add->add_output("y");
  return m;
}

// Four header bytes, then b = {1, -2, 0.5}, then four more bytes: 20 bytes.
std::string data_bytes() {
  const float b[3] = {1.f, -2.f, 0.5f};
  std::string s = "HEAD";
  s.append(reinterpret_cast<const char*>(b), sizeof(b));
  return s + "TAIL";
}

// A model directory `<tmp>/model` holding `b.data`, and a file `<tmp>/outside.data`.
struct Fixture {
  ms::test::TempDir tmp{"ms_onnx_ext"};
  std::string dir = tmp.file("model");
  Fixture() {
    fs::create_directory(dir);
    write_bytes(dir + "/b.data", data_bytes());
    write_bytes(tmp.file("outside.data"), data_bytes());
  }
  // Writes `m` as model/m.onnx and loads it.
  void load(const ModelProto& m) const {
    write_bytes(dir + "/m.onnx", bytes_of(m));
    ms::GraphCell g(dir + "/m.onnx");
    CHECK(same_tensor(g(ms::zeros({2, 3})), ms::tensor({{1.f, -2.f, 0.5f}, {1.f, -2.f, 0.5f}})));
  }
  // The ValueError loading `m` from model/m.onnx raises; it names GraphCell and b.
  std::string error(const ModelProto& m) const {
    write_bytes(dir + "/m.onnx", bytes_of(m));
    std::string msg;
    try {
      ms::GraphCell g(dir + "/m.onnx");
    } catch (const ms::ValueError& e) {
      msg = e.what();
    }
    INFO(msg);
    CHECK(msg.rfind("GraphCell: initializer 'b'", 0) == 0);
    return msg;
  }
};

using ms_onnx_test::has;

// The POSIX file system, counting the files opened for reading by path.
struct CountingFs : ms::io::FileSystem {
  std::shared_ptr<ms::io::FileSystem> posix = ms::io::posix_file_system();
  std::mutex mu;
  std::map<std::string, int> opens;
  std::string name() const override { return "counting"; }
  std::unique_ptr<ms::io::WritableFile> create(const std::string& p,
                                               ms::io::CreateMode m) override {
    return posix->create(p, m);
  }
  std::unique_ptr<ms::io::ReadableFile> open(const std::string& p) override {
    std::lock_guard<std::mutex> lock(mu);
    ++opens[fs::path(p).filename().string()];
    return posix->open(p);
  }
  bool exists(const std::string& p) override { return posix->exists(p); }
  bool remove(const std::string& p) override { return posix->remove(p); }
  bool supports_atomic_rename() const override { return true; }
  void rename(const std::string& from, const std::string& to) override { posix->rename(from, to); }
  std::uint64_t file_size(const std::string& p) override { return posix->file_size(p); }
};

struct ScopedFs {
  explicit ScopedFs(std::shared_ptr<ms::io::FileSystem> f) {
    REQUIRE(ms::io::register_file_system(std::move(f)));
  }
  ~ScopedFs() { ms::io::restore_default_file_system(); }
};

}  // namespace

TEST_CASE("external data: export_model writes the large initializers to a data file") {
  ms::manual_seed(3);
  MLP net;
  ms::test::TempDir dir("ms_onnx_ext");
  const std::string path = dir.file("mlp.onnx");
  ms::onnx::export_model(net, ms::uniform({2, 784}), path, {.external_data = true});
  CHECK(dir.entries() == 2);  // the model and mlp.onnx.data, no temporary file left
  const auto data_size = fs::file_size(dir.file("mlp.onnx.data"));
  CHECK(data_size >= (784 * 32 + 32 * 10) * 4);
  CHECK(fs::file_size(path) < 4096);
  const ModelProto m = read_model(path);
  int external = 0;
  for (const TensorProto& t : m.graph().initializer()) {
    INFO(t.name());
    if (t.data_location() != TensorProto::EXTERNAL) {
      CHECK(t.raw_data().size() < 1024);  // below the threshold: inside the model
      continue;
    }
    ++external;
    std::map<std::string, std::string> kv;
    for (const auto& e : t.external_data()) kv[e.key()] = e.value();
    CHECK(kv.at("location") == "mlp.onnx.data");
    CHECK(std::stoull(kv.at("offset")) % 64 == 0);
    CHECK(std::stoull(kv.at("offset")) + std::stoull(kv.at("length")) <= data_size);
  }
  CHECK(external == 2);  // fc1.weight (784x32), fc2.weight (32x10); the biases stay inside
  ::onnx::checker::check_model(path);  // ONNX's checker, given the path, finds the data file
  ms::GraphCell g(path);
  for (const auto& [name, p] : net.parameters_and_names()) {
    INFO(name);
    CHECK(same_tensor(g.state_dict().at(name), p));
  }
  const ms::Tensor x = ms::uniform({2, 784});
  CHECK(same_tensor(g(x), net(x)));
}

TEST_CASE("external data: threshold 0 and a named data file; each file is opened once") {
  ms::manual_seed(4);
  MLP net;
  ms::test::TempDir dir("ms_onnx_ext");
  const std::string path = dir.file("mlp.onnx");
  ms::onnx::export_model(
      net, ms::uniform({2, 784}), path,
      {.external_data = true, .external_data_file = "w.bin", .external_data_threshold = 0});
  const ModelProto m = read_model(path);
  for (const TensorProto& t : m.graph().initializer())
    if (t.has_raw_data() || t.data_location() == TensorProto::EXTERNAL)
      CHECK(t.data_location() == TensorProto::EXTERNAL);
  auto counting = std::make_shared<CountingFs>();
  {
    ScopedFs scope(counting);
    ms::GraphCell g(path);
    const ms::Tensor x = ms::uniform({2, 784});
    CHECK(same_tensor(g(x), net(x)));
  }
  CHECK(counting->opens == std::map<std::string, int>{{"mlp.onnx", 1}, {"w.bin", 1}});
}

TEST_CASE("external data: nothing over the threshold writes no data file; bad options") {
  ms::nn::Dense small(4, 2);
  ms::test::TempDir dir("ms_onnx_ext");
  ms::onnx::export_model(small, ms::zeros({1, 4}), dir.file("s.onnx"), {.external_data = true});
  CHECK(dir.entries() == 1);
  CHECK_NOTHROW(ms::GraphCell(dir.file("s.onnx")));
  for (const std::string bad : {"sub/w.data", "..", "s.onnx"})
    CHECK_THROWS_AS(ms::onnx::export_model(small, ms::zeros({1, 4}), dir.file("s.onnx"),
                                           {.external_data = true, .external_data_file = bad}),
                    ms::ValueError);
  CHECK_THROWS_AS(ms::onnx::export_model(small, ms::zeros({1, 4}), dir.file("s.onnx"),
                                         {.external_data = true, .external_data_threshold = -1}),
                  ms::ValueError);
}

TEST_CASE("external data: python3's onnx loads and checks the model ms wrote") {
  const std::string py = ms_onnx_test::python_with_onnx();
  if (py.empty()) {
    MESSAGE("skipped: no python3 with onnx and numpy (apt-get install python3-onnx)");
    return;
  }
  ms::manual_seed(5);
  MLP net;
  ms::test::TempDir dir("ms_onnx_ext_py");
  const std::string path = dir.file("mlp.onnx");
  ms::onnx::export_model(net, ms::uniform({2, 784}), path, {.external_data = true});
  const std::string script =
      "import sys, onnx, numpy\n"
      "from onnx import numpy_helper\n"
      "onnx.checker.check_model(sys.argv[1])\n"
      "m = onnx.load(sys.argv[1], load_external_data=True)\n"
      "w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}\n"
      "numpy.save(sys.argv[2], w['fc1.weight'])\n";
  write_bytes(dir.file("read.py"), script);
  const std::string cmd = py + " " + dir.file("read.py") + " " + path + " " + dir.file("fc1.npy") +
                          " > " + dir.file("log.txt") + " 2>&1";
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, cmd);
  CHECK(same_tensor(ms::io::load_npy(dir.file("fc1.npy")), ms::Tensor(net.fc1.weight)));
}

TEST_CASE("external data: offset and length, a length taken as the rest of the file") {
  Fixture f;
  f.load(ext_model({{"location", "b.data"}, {"offset", "4"}, {"length", "12"}}));
  write_bytes(f.dir + "/rest.data", data_bytes().substr(0, 16));
  f.load(ext_model({{"location", "rest.data"}, {"offset", "4"}, {"checksum", "unchecked"}}));
  fs::create_directory(f.dir + "/sub");
  write_bytes(f.dir + "/sub/b.data", data_bytes());
  f.load(ext_model({{"location", "sub/../sub/b.data"}, {"offset", "4"}, {"length", "12"}}));
  fs::create_symlink("b.data", f.dir + "/link.data");  // a symlink inside the directory
  f.load(ext_model({{"location", "link.data"}, {"offset", "4"}, {"length", "12"}}));
}

TEST_CASE("external data: a Constant node's tensor in a data file") {
  Fixture f;
  ModelProto m = ext_model({});
  auto* g = m.mutable_graph();
  TensorProto value = g->initializer(0);
  g->clear_initializer();
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"location", "b.data"}, {"offset", "4"}, {"length", "12"}}) {
    auto* e = value.add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  auto* c = g->add_node();
  c->set_op_type("Constant");
  c->set_name("const");
  c->add_output("b");
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::TENSOR);
  *a->mutable_t() = value;
  g->mutable_node()->SwapElements(0, 1);  // Constant first
  f.load(m);
  value.mutable_external_data(0)->set_value("../outside.data");
  *g->mutable_node(0)->mutable_attribute(0)->mutable_t() = value;
  write_bytes(f.dir + "/m.onnx", bytes_of(m));
  try {
    ms::GraphCell bad(f.dir + "/m.onnx");
    FAIL("no error");
  } catch (const ms::ValueError& e) {
    CHECK(has(e.what(), "node 'const' (Constant) attribute 'value'"));
    CHECK(has(e.what(), "leaves the model's directory"));
  }
}

TEST_CASE("external data: loaded from bytes, a directory is needed") {
  Fixture f;
  const std::string bytes =
      bytes_of(ext_model({{"location", "b.data"}, {"offset", "4"}, {"length", "12"}}));
  try {
    ms::GraphCell g(bytes, "<bytes>");
    FAIL("no error");
  } catch (const ms::ValueError& e) {
    CHECK(has(e.what(), "GraphCell: initializer 'b'"));
    CHECK(has(e.what(), "needs a path"));
  }
  ms::GraphCell g(bytes, "<bytes>", {.external_data_dir = f.dir});
  CHECK(same_tensor(g.state_dict().at("b"), ms::tensor({1.f, -2.f, 0.5f})));
}

TEST_CASE("external data errors: an absolute location") {
  Fixture f;
  const std::string e = f.error(ext_model({{"location", f.dir + "/b.data"}, {"offset", "4"}}));
  CHECK(has(e, "is absolute"));
}

TEST_CASE("external data errors: a location that leaves the directory with '..'") {
  Fixture f;
  CHECK(has(f.error(ext_model({{"location", "../outside.data"}, {"offset", "4"}})),
            "leaves the model's directory"));
  CHECK(has(f.error(ext_model({{"location", "sub/../../outside.data"}, {"offset", "4"}})),
            "leaves the model's directory"));
}

TEST_CASE("external data errors: a symlink that resolves outside the directory") {
  Fixture f;
  fs::create_symlink(f.tmp.file("outside.data"), f.dir + "/escape.data");
  const std::string e = f.error(ext_model({{"location", "escape.data"}, {"offset", "4"}}));
  CHECK(has(e, "outside the model's directory"));
  fs::create_directory_symlink(f.tmp.path, f.dir + "/up");
  CHECK(has(f.error(ext_model({{"location", "up/outside.data"}, {"offset", "4"}})),
            "outside the model's directory"));
}

TEST_CASE("external data errors: a missing file") {
  Fixture f;
  const std::string e = f.error(ext_model({{"location", "nope.data"}}));
  CHECK(has(e, "'nope.data'"));
  CHECK(has(e, "cannot be resolved"));
}

TEST_CASE("external data errors: an offset past the end of the file") {
  Fixture f;
  CHECK(has(f.error(ext_model({{"location", "b.data"}, {"offset", "21"}})),
            "offset 21 is past the end of 'b.data' (20 bytes)"));
}

TEST_CASE("external data errors: offset + length past the end, and overflowing") {
  Fixture f;
  CHECK(has(f.error(ext_model({{"location", "b.data"}, {"offset", "12"}, {"length", "12"}})),
            "offset 12 + length 12 is past the end"));
  // 2^64 - 1: the sum would wrap around.
  CHECK(has(f.error(ext_model(
                {{"location", "b.data"}, {"offset", "4"}, {"length", "18446744073709551615"}})),
            "past the end"));
  CHECK(has(f.error(ext_model({{"location", "b.data"}, {"offset", "18446744073709551616"}})),
            "below 2^64"));
  CHECK(has(f.error(ext_model({{"location", "b.data"}, {"offset", "-4"}})), "below 2^64"));
}

TEST_CASE("external data errors: a length that does not match the dims") {
  Fixture f;
  CHECK(has(f.error(ext_model({{"location", "b.data"}, {"offset", "4"}, {"length", "8"}})),
            "has 8 bytes of external data in 'b.data', its dims and type need 12"));
  CHECK(has(f.error(ext_model({{"location", "b.data"}, {"offset", "4"}})),
            "has 16 bytes of external data"));  // the rest of the file
}

TEST_CASE("external data errors: an unknown or repeated key, no location") {
  Fixture f;
  CHECK(has(f.error(ext_model({{"location", "b.data"}, {"sha256", "x"}})),
            "external_data key 'sha256'"));
  CHECK(has(f.error(ext_model({{"location", "b.data"}, {"offset", "4"}, {"offset", "4"}})),
            "'offset' twice"));
  CHECK(has(f.error(ext_model({{"offset", "4"}})), "names none"));
}

TEST_CASE("external data errors: external_data entries without EXTERNAL, or data inside too") {
  Fixture f;
  ModelProto m = ext_model({{"location", "b.data"}, {"offset", "4"}});
  m.mutable_graph()->mutable_initializer(0)->set_data_location(TensorProto::DEFAULT);
  CHECK(has(f.error(m), "data_location is not EXTERNAL"));
  m = ext_model({{"location", "b.data"}, {"offset", "4"}});
  for (float v : {1.f, 2.f, 3.f}) m.mutable_graph()->mutable_initializer(0)->add_float_data(v);
  CHECK(has(f.error(m), "in an external file and inside the model"));
}
