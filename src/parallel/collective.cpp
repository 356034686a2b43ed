// Collectives on tensors: see ms/parallel/collective.hpp.
#include "ms/parallel/collective.hpp"

#include <algorithm>
#include <complex>
#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#include "mpi_context.hpp"
#include "ms/expr/expr.hpp"
#include "ms/ops/host.hpp"
#include "ms/ops/layout.hpp"

namespace ms::parallel {
namespace detail {
namespace {

// Sum and max of the half types, computed in float32 and rounded once, as ms computes them.
template <class T, bool Max>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    b[i] = static_cast<T>(Max ? (x > y || y != y ? x : y) : x + y);
  }
}

struct HalfTypes {
  MPI_Datatype f16 = MPI_DATATYPE_NULL, bf16 = MPI_DATATYPE_NULL;
  MPI_Op f16_sum = MPI_OP_NULL, f16_max = MPI_OP_NULL, bf16_sum = MPI_OP_NULL,
         bf16_max = MPI_OP_NULL;
};

const HalfTypes& half_types() {
  static const HalfTypes h = [] {
    HalfTypes t;
    MPI_Type_contiguous(2, MPI_BYTE, &t.f16);
    MPI_Type_commit(&t.f16);
    MPI_Type_contiguous(2, MPI_BYTE, &t.bf16);
    MPI_Type_commit(&t.bf16);
    MPI_Op_create(&half_reduce<float16_t, false>, 1, &t.f16_sum);
    MPI_Op_create(&half_reduce<float16_t, true>, 1, &t.f16_max);
    MPI_Op_create(&half_reduce<bfloat16_t, false>, 1, &t.bf16_sum);
    MPI_Op_create(&half_reduce<bfloat16_t, true>, 1, &t.bf16_max);
    return t;
  }();
  return h;
}

const char* api_name(std::int64_t api) {
  switch (api) {
    case 1: return "all_reduce";
    case 2: return "broadcast";
    case 3: return "all_gather";
    case 4: return "reduce_scatter";
    default: return "another collective";
  }
}

const char* op_name(std::int64_t op) {
  switch (static_cast<ReduceOp>(op)) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

std::string describe(const CallHeader& h) {
  std::ostringstream os;
  os << static_cast<DType>(h.dtype) << "[";
  for (std::int64_t i = 0; i < h.ndim; ++i) {
    if (i > 0) os << ", ";
    if (i == 6) {
      os << "...";
      break;
    }
    os << h.dims[i];
  }
  os << "]";
  return os.str();
}

}  // namespace

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Bool: return MPI_C_BOOL;
    case DType::Int8: return MPI_INT8_T;
    case DType::Int16: return MPI_INT16_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::UInt16: return MPI_UINT16_T;
    case DType::UInt32: return MPI_UINT32_T;
    case DType::UInt64: return MPI_UINT64_T;
    case DType::Float16: return half_types().f16;
    case DType::BFloat16: return half_types().bf16;
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Complex64: return MPI_C_FLOAT_COMPLEX;
    case DType::Complex128: return MPI_C_DOUBLE_COMPLEX;
    case DType::Int4: return MPI_BYTE;
  }
  return MPI_BYTE;
}

void check_reducible(ReduceOp op, DType t, std::string_view api) {
  MS_CHECK(t != DType::Bool && t != DType::Int4, TypeError, api, ": cannot reduce ", t,
           " tensors (op ", op_name(static_cast<std::int64_t>(op)),
           "); cast to int32 (or unpack int4) first");
  MS_CHECK(op != ReduceOp::Max || !dtype_is_complex(t), TypeError, api, ": max of ", t,
           " tensors is undefined (complex numbers are not ordered)");
  MS_CHECK(op != ReduceOp::Mean || dtype_is_float(t) || dtype_is_complex(t), TypeError, api,
           ": mean of ", t, " tensors would round; use sum, or cast to a floating dtype first");
}

MPI_Op mpi_op(ReduceOp op, DType t, std::string_view api) {
  check_reducible(op, t, api);
  const bool max = op == ReduceOp::Max;
  if (t == DType::Float16) return max ? half_types().f16_max : half_types().f16_sum;
  if (t == DType::BFloat16) return max ? half_types().bf16_max : half_types().bf16_sum;
  return max ? MPI_MAX : MPI_SUM;
}

CallHeader header_of(int api, DType dtype, const Shape& shape, std::int64_t op, std::int64_t root) {
  CallHeader h;
  h.api = api;
  h.op = op;
  h.root = root;
  h.dtype = static_cast<std::int64_t>(dtype);
  h.ndim = shape.rank();
  h.numel = 1;
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a over the dims
  for (std::int64_t i = 0; i < shape.rank(); ++i) {
    const std::int64_t d = shape[static_cast<std::size_t>(i)];
    if (i < 6) h.dims[i] = d;
    h.numel *= d;
    hash = (hash ^ static_cast<std::uint64_t>(d)) * 1099511628211ull;
  }
  h.dims_hash = static_cast<std::int64_t>(hash);
  return h;
}

void check_same_call(const CallHeader& h, std::string_view api) {
  const int p = world_size();
  std::vector<CallHeader> all(static_cast<std::size_t>(p));
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(&h, sizeof(CallHeader), MPI_BYTE, all.data(), sizeof(CallHeader),
                           MPI_BYTE, world_comm(), &req),
            api, "MPI_Iallgather");
  wait_all(std::span(&req, 1), api);
  const CallHeader& a = all[0];
  for (int r = 1; r < p; ++r) {
    const CallHeader& b = all[static_cast<std::size_t>(r)];
    MS_CHECK(b.api == a.api && b.op == a.op, ValueError, api, ": rank ", r, " called ",
             api_name(b.api), " (op ", op_name(b.op), ") while rank 0 called ", api_name(a.api),
             " (op ", op_name(a.op),
             "); every rank must call the same collectives in the same order");
    MS_CHECK(b.root == a.root, ValueError, api, ": rank ", r, " gave root ", b.root,
             " but rank 0 gave root ", a.root, "; every rank must pass the same root");
    MS_CHECK(b.dtype == a.dtype, TypeError, api, ": rank ", r, " passed ", describe(b),
             " but rank 0 passed ", describe(a), "; every rank must pass the same dtype");
    MS_CHECK(b.ndim == a.ndim && b.numel == a.numel && b.dims_hash == a.dims_hash, ShapeError, api,
             ": rank ", r, " passed ", describe(b), " but rank 0 passed ", describe(a),
             "; every rank must pass the same shape");
  }
}

}  // namespace detail

namespace {

enum Api : int { kAllReduce = 1, kBroadcast = 2, kAllGather = 3, kReduceScatter = 4 };

// A dense copy of `x` with its own storage, allocated outside any graph arena.
Tensor fresh_copy(const Tensor& x) {
  Tensor out = empty(x.shape(), x.dtype());
  if (x.numel() > 0) out.copy_(x);
  return out;
}

void check_count(std::int64_t n, std::string_view api) {
  MS_CHECK(n <= detail::kMaxCount, ValueError, api, ": ", n,
           " elements in one call; MPI counts are ints (at most 2^31 - 1): split the tensor");
}

// sum / p in sum's dtype (`sum` is a fresh contiguous tensor).
Tensor divide_by_ranks(const Tensor& sum, int p) {
  if (p == 1) return sum;
  // ms's elementwise ops take no complex operands: those are divided here.
  auto divide = [&](auto* v) {
    using Real = typename std::remove_pointer_t<decltype(v)>::value_type;
    for (std::int64_t i = 0; i < sum.numel(); ++i) v[i] /= static_cast<Real>(p);
    return sum;
  };
  if (sum.dtype() == DType::Complex64) return divide(sum.data<std::complex<float>>());
  if (sum.dtype() == DType::Complex128) return divide(sum.data<std::complex<double>>());
  return Tensor(sum / static_cast<double>(p)).to(sum.dtype());
}

Tensor all_reduce_now(const Tensor& x, ReduceOp op) {
  constexpr std::string_view api = "all_reduce";
  Tensor buf = fresh_copy(x);
  if (!mpi_active()) return buf;
  detail::check_usable(api);
  detail::check_same_call(
      detail::header_of(kAllReduce, x.dtype(), x.shape(), static_cast<std::int64_t>(op), 0), api);
  if (x.numel() == 0) return buf;
  check_count(x.numel(), api);
  MPI_Request req = MPI_REQUEST_NULL;
  detail::check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buf.raw_data(), static_cast<int>(x.numel()),
                                   detail::mpi_type(x.dtype()), detail::mpi_op(op, x.dtype(), api),
                                   detail::world_comm(), &req),
                    api, "MPI_Iallreduce");
  detail::wait_all(std::span(&req, 1), api);
  return op == ReduceOp::Mean ? divide_by_ranks(buf, world_size()) : buf;
}

Tensor broadcast_now(const Tensor& x, int root) {
  constexpr std::string_view api = "broadcast";
  Tensor buf = fresh_copy(x);
  if (!mpi_active()) return buf;
  detail::check_usable(api);
  detail::check_same_call(detail::header_of(kBroadcast, x.dtype(), x.shape(), 0, root), api);
  if (x.numel() == 0) return buf;
  check_count(buf.nbytes(), api);
  MPI_Request req = MPI_REQUEST_NULL;
  detail::check_mpi(MPI_Ibcast(buf.raw_data(), static_cast<int>(buf.nbytes()), MPI_BYTE, root,
                               detail::world_comm(), &req),
                    api, "MPI_Ibcast");
  detail::wait_all(std::span(&req, 1), api);
  return buf;
}

// `slot` is [p * n, ...] with this rank's block already holding its own x.
Tensor all_gather_into(DType dtype, const Shape& shape, Tensor slot) {
  constexpr std::string_view api = "all_gather";
  if (!mpi_active()) return slot;
  detail::check_usable(api);
  detail::check_same_call(detail::header_of(kAllGather, dtype, shape, 0, 0), api);
  if (slot.numel() == 0) return slot;
  const std::int64_t block = slot.nbytes() / world_size();
  check_count(block, api);
  MPI_Request req = MPI_REQUEST_NULL;
  detail::check_mpi(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, slot.raw_data(),
                                   static_cast<int>(block), MPI_BYTE, detail::world_comm(), &req),
                    api, "MPI_Iallgather");
  detail::wait_all(std::span(&req, 1), api);
  return slot;
}

// The reduction of x's blocks; rank r's block of the result in block r of a copy of x.
Tensor reduce_scatter_now(const Tensor& x, ReduceOp op) {
  constexpr std::string_view api = "reduce_scatter";
  Tensor buf = fresh_copy(x);
  if (!mpi_active()) return buf;
  detail::check_usable(api);
  detail::check_same_call(
      detail::header_of(kReduceScatter, x.dtype(), x.shape(), static_cast<std::int64_t>(op), 0),
      api);
  if (x.numel() == 0) return buf;
  const int p = world_size(), r = rank();
  const std::int64_t count = x.numel() / p;
  check_count(count, api);
  Tensor mine = empty({count}, x.dtype());
  MPI_Request req = MPI_REQUEST_NULL;
  detail::check_mpi(
      MPI_Ireduce_scatter_block(buf.raw_data(), mine.raw_data(), static_cast<int>(count),
                                detail::mpi_type(x.dtype()), detail::mpi_op(op, x.dtype(), api),
                                detail::world_comm(), &req),
      api, "MPI_Ireduce_scatter_block");
  detail::wait_all(std::span(&req, 1), api);
  if (op == ReduceOp::Mean) mine = divide_by_ranks(mine, p);
  std::memcpy(buf.raw_data() + r * count * x.itemsize(), mine.raw_data(),
              static_cast<std::size_t>(count * x.itemsize()));
  return buf;
}

void check_input(const Tensor& x, std::string_view api) {
  MS_CHECK(x.defined(), ValueError, api, ": the tensor is undefined");
}

}  // namespace

Tensor all_reduce(const Tensor& x, ReduceOp op) {
  check_input(x, "all_reduce");
  detail::check_reducible(op, x.dtype(), "all_reduce");
  init();
  return ops::host_call(
      [op](std::vector<Tensor> v) {
        v[0] = all_reduce_now(v[0], op);
        return v;
      },
      {x}, "all_reduce")[0];
}

Tensor broadcast(const Tensor& x, int root) {
  check_input(x, "broadcast");
  MS_CHECK(x.dtype() != DType::Int4, TypeError, "broadcast: Int4 tensors are packed; cast first");
  const int p = world_size();
  MS_CHECK(root >= 0 && root < p, IndexError, "broadcast: root ", root,
           " is not a rank of this run (world_size ", p, ")");
  return ops::host_call(
      [root](std::vector<Tensor> v) {
        v[0] = broadcast_now(v[0], root);
        return v;
      },
      {x}, "broadcast")[0];
}

Tensor all_gather(const Tensor& x) {
  constexpr std::string_view api = "all_gather";
  check_input(x, api);
  MS_CHECK(x.dtype() != DType::Int4, TypeError, api, ": Int4 tensors are packed; cast first");
  const int p = world_size();
  const Tensor rows = x.rank() == 0 ? x.reshape({1}) : x;
  // The result's shape with this rank's block in place (p copies of x, also
  // under ms::jit, where the callback keeps the shape of its input), then
  // filled in by the other ranks.
  const Tensor slot = concat(std::vector<Tensor>(static_cast<std::size_t>(p), rows), 0);
  return ops::host_call(
      [dtype = x.dtype(), shape = x.shape()](std::vector<Tensor> v) {
        v[0] = all_gather_into(dtype, shape, fresh_copy(v[0]));
        return v;
      },
      {slot}, "all_gather")[0];
}

Tensor reduce_scatter(const Tensor& x, ReduceOp op) {
  constexpr std::string_view api = "reduce_scatter";
  check_input(x, api);
  detail::check_reducible(op, x.dtype(), api);
  const int p = world_size(), r = rank();
  MS_CHECK(x.rank() >= 1 && x.dim(0) % p == 0, ShapeError, api, ": x has shape ", x.shape(),
           "; its axis 0 must split into ", p, " equal blocks (one per rank)");
  const Tensor full = ops::host_call(
      [op](std::vector<Tensor> v) {
        v[0] = reduce_scatter_now(v[0], op);
        return v;
      },
      {x}, std::string(api))[0];
  const std::int64_t n = x.dim(0) / p;
  Tensor mine = full.slice(0, r * n, (r + 1) * n);
  return full.is_symbolic() ? mine : mine.clone();
}

}  // namespace ms::parallel
