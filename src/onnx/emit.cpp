// The Emitter and NodeCtx of src/onnx/emit.hpp: names, constants, casts, operands.
#include "emit.hpp"

#include <algorithm>
#include <cstring>

#include "ms/core/error.hpp"

namespace ms::onnx::detail {

int onnx_dtype(DType t, std::string_view what) {
  using P = ::onnx::TensorProto;
  switch (t) {
    case DType::Bool: return P::BOOL;
    case DType::Int8: return P::INT8;
    case DType::Int16: return P::INT16;
    case DType::Int32: return P::INT32;
    case DType::Int64: return P::INT64;
    case DType::UInt8: return P::UINT8;
    case DType::UInt16: return P::UINT16;
    case DType::UInt32: return P::UINT32;
    case DType::UInt64: return P::UINT64;
    case DType::Float16: return P::FLOAT16;
    case DType::BFloat16: return P::BFLOAT16;
    case DType::Float32: return P::FLOAT;
    case DType::Float64: return P::DOUBLE;
    case DType::Complex64: return P::COMPLEX64;
    case DType::Complex128: return P::COMPLEX128;
    case DType::Int4: break;
  }
  ::ms::detail::raise<TypeError>("ms::onnx::export_model: ", what,
                                 " has dtype int4, which ONNX opsets 13-17 do not have");
}

void fill_tensor(::onnx::TensorProto& proto, const Tensor& t, const std::string& name) {
  proto.set_name(name);
  proto.set_data_type(onnx_dtype(t.dtype(), name));
  for (std::int64_t d : t.shape().dims()) proto.add_dims(d);
  const Tensor c = t.contiguous();
  proto.set_raw_data(reinterpret_cast<const char*>(c.raw_data()),
                     static_cast<std::size_t>(c.nbytes()));
}

std::string Emitter::fresh(std::string_view hint) {
  return std::string(hint) + "_" + std::to_string(counter_++);
}

::onnx::NodeProto& Emitter::add(std::string_view op, std::vector<std::string> in,
                                std::vector<std::string> out) {
  ::onnx::NodeProto& n = *graph.add_node();
  n.set_op_type(std::string(op));
  std::string name = "/";
  if (!scope.empty()) name.append(scope).append("/");
  name.append(op);
  n.set_name(fresh(name));
  for (auto& s : in) n.add_input(std::move(s));
  for (auto& s : out) n.add_output(std::move(s));
  return n;
}

std::string Emitter::add1(std::string_view op, std::vector<std::string> in) {
  std::string out = fresh(op);
  add(op, std::move(in), {out});
  return out;
}

std::string Emitter::ints(const std::vector<std::int64_t>& v) {
  std::string key = "i64[";
  for (std::int64_t x : v) key += std::to_string(x) + ",";
  auto [it, added] = consts_.try_emplace(key);
  if (!added) return it->second;
  it->second = fresh("const");
  Tensor t = zeros(Shape({static_cast<std::int64_t>(v.size())}), int64);
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(std::int64_t));
  fill_tensor(*graph.add_initializer(), t, it->second);
  return it->second;
}

std::string Emitter::scalar(const Scalar& v, DType t) {
  const std::string key = std::string(ir::short_dtype_name(t)) + ":" + v.to_string();
  auto [it, added] = consts_.try_emplace(key);
  if (!added) return it->second;
  it->second = fresh("const");
  fill_tensor(*graph.add_initializer(), tensor(v, t), it->second);
  return it->second;
}

std::string Emitter::cast(const std::string& x, DType from, DType to) {
  if (from == to) return x;
  std::string out = fresh("cast");
  add("Cast", {x}, {out}).add_attribute()->CopyFrom([&] {
    ::onnx::AttributeProto a;
    a.set_name("to");
    a.set_type(::onnx::AttributeProto::INT);
    a.set_i(onnx_dtype(to, "a cast"));
    return a;
  }());
  return out;
}

std::string Emitter::sym_dim(int k, bool scalar) {
  auto [it, added] = consts_.try_emplace("sym" + std::to_string(k) + (scalar ? ":0-d" : ":1-d"));
  if (!added) return it->second;  // computed once, before every use
  const auto& [input, axis] = sym_sources.at(static_cast<std::size_t>(k));
  const std::string shape = add1("Shape", {input});
  it->second = scalar ? add1("Gather", {shape, this->scalar(axis, DType::Int64)})
                      : add1("Gather", {shape, ints({axis})});
  return it->second;
}

std::string Emitter::target(const std::vector<std::int64_t>& dims) {
  if (std::all_of(dims.begin(), dims.end(), [](std::int64_t d) { return d >= -1; }))
    return ints(dims);
  std::vector<std::string> parts;
  for (std::int64_t d : dims)
    parts.push_back(d >= -1 ? ints({d}) : sym_dim(static_cast<int>(-2 - d), false));
  ::onnx::NodeProto& n = add("Concat", std::move(parts), {fresh("target")});
  ::onnx::AttributeProto& a = *n.add_attribute();
  a.set_name("axis");
  a.set_type(::onnx::AttributeProto::INT);
  a.set_i(0);
  return n.output(0);
}

const ops::TensorType& NodeCtx::in_type(std::size_t i) const {
  return e.g.value(node.inputs.at(i)).type;
}

const ops::TensorType& NodeCtx::out_type(std::size_t i) const {
  return e.g.value(node.outputs.at(i)).type;
}

bool NodeCtx::weak(std::size_t i) const { return e.g.value(node.inputs.at(i)).weak; }

std::string NodeCtx::in(std::size_t i, DType t) {
  if (weak(i)) return e.scalar(e.g.producer(node.inputs.at(i)).scalar, t);
  return e.cast(e.names[node.inputs.at(i).index()], in_type(i).dtype, t);
}

std::string NodeCtx::in(std::size_t i) {
  if (weak(i)) return in(i, in_type(i).dtype);
  return e.names[node.inputs.at(i).index()];
}

DType NodeCtx::common_dtype() const {
  std::optional<DType> t;
  for (std::size_t i = 0; i < arity(); ++i) {
    if (weak(i)) continue;
    t = t ? promote_types(*t, in_type(i).dtype) : in_type(i).dtype;
  }
  if (t) {
    for (std::size_t i = 0; i < arity(); ++i)
      if (weak(i)) t = promote_with_scalar(*t, e.g.producer(node.inputs.at(i)).scalar.kind());
    return *t;
  }
  return in_type(0).dtype;
}

}  // namespace ms::onnx::detail
