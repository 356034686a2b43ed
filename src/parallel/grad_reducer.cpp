// Gradient buckets and parameter broadcast: see ms/parallel/grad_reducer.hpp.
#include "ms/parallel/grad_reducer.hpp"

#include <chrono>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "mpi_context.hpp"
#include "ms/expr/expr.hpp"
#include "ms/ops/host.hpp"

namespace ms::parallel {
namespace {

std::string describe_param(const Parameter& p) {
  std::ostringstream os;
  os << "'" << p.name() << "' " << p.dtype() << p.shape();
  return os.str();
}

std::vector<std::string> split_lines(const char* s, std::size_t n) {
  std::vector<std::string> out;
  std::string cur;
  for (std::size_t i = 0; i < n; ++i) {
    if (s[i] == '\n') {
      out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += s[i];
    }
  }
  return out;
}

// Every rank's parameter list against rank `root`'s: ValueError naming the
// first rank and parameter that differ (the same message on every rank).
void check_same_parameters(const ParameterList& params, int root, std::string_view api) {
  std::string mine;
  for (const Parameter& p : params) mine += describe_param(p) + "\n";
  const int n = world_size();
  const MPI_Comm comm = detail::world_comm();
  std::vector<int> lengths(static_cast<std::size_t>(n));
  const int len = static_cast<int>(mine.size());
  MPI_Request req = MPI_REQUEST_NULL;
  detail::check_mpi(MPI_Iallgather(&len, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm, &req), api,
                    "MPI_Iallgather");
  detail::wait_all(std::span(&req, 1), api);
  std::vector<int> displs(static_cast<std::size_t>(n), 0);
  for (std::size_t r = 1; r < displs.size(); ++r) displs[r] = displs[r - 1] + lengths[r - 1];
  std::string all(static_cast<std::size_t>(displs.back() + lengths.back()), '\0');
  detail::check_mpi(MPI_Iallgatherv(mine.data(), len, MPI_CHAR, all.data(), lengths.data(),
                                    displs.data(), MPI_CHAR, comm, &req),
                    api, "MPI_Iallgatherv");
  detail::wait_all(std::span(&req, 1), api);
  auto list_of = [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    return split_lines(all.data() + displs[i], static_cast<std::size_t>(lengths[i]));
  };
  const std::vector<std::string> ref = list_of(root);
  for (int r = 0; r < n; ++r) {
    const std::vector<std::string> other = list_of(r);
    if (other == ref) continue;
    std::size_t k = 0;
    while (k < ref.size() && k < other.size() && ref[k] == other[k]) ++k;
    auto at = [k](const std::vector<std::string>& v) {
      return k < v.size() ? v[k] : std::string("no parameter");
    };
    ms::detail::raise<ValueError>(api, ": rank ", r, "'s model differs from rank ", root,
                                  "'s at parameter ", k, ": rank ", r, " has ", at(other),
                                  ", rank ", root, " has ", at(ref), " (", other.size(), " and ",
                                  ref.size(), " parameters); every rank must build the same model");
  }
}

}  // namespace

void broadcast_parameters(const ParameterList& params, int root) {
  constexpr std::string_view api = "broadcast_parameters";
  const int n = world_size();
  MS_CHECK(root >= 0 && root < n, IndexError, api, ": root ", root,
           " is not a rank of this run (world_size ", n, ")");
  for (std::size_t i = 0; i < params.size(); ++i)
    MS_CHECK(params[i].defined() && !params[i].is_symbolic(), ValueError, api, ": parameter ", i,
             " is undefined or symbolic");
  if (!mpi_active()) return;
  detail::check_usable(api);
  check_same_parameters(params, root, api);
  std::vector<Tensor> bufs;
  std::vector<MPI_Request> reqs;
  for (const Parameter& p : params) {
    if (p.numel() == 0) continue;
    Tensor buf = p.is_contiguous() ? Tensor(p) : p.clone();
    MS_CHECK(buf.nbytes() <= detail::kMaxCount, ValueError, api, ": parameter ", describe_param(p),
             " has more than 2^31 - 1 bytes (one MPI call)");
    reqs.push_back(MPI_REQUEST_NULL);
    detail::check_mpi(MPI_Ibcast(buf.raw_data(), static_cast<int>(buf.nbytes()), MPI_BYTE, root,
                                 detail::world_comm(), &reqs.back()),
                      api, "MPI_Ibcast");
    bufs.push_back(std::move(buf));
  }
  detail::wait_all(reqs, api);
  std::size_t k = 0;
  for (const Parameter& p : params) {
    if (p.numel() == 0) continue;
    if (p.is_contiguous())
      p.storage()->note_write();  // written in place by MPI: kept casts of it are stale
    else
      Parameter(p).set_data(bufs[k]);  // set_data notes its write
    ++k;
  }
}

namespace detail {

/// One bucket: a flat buffer holding the gradients of its parameters, padded
/// to a multiple of the world size, reduced as reduce-scatter then all-gather.
struct Bucket {
  std::vector<std::size_t> params;    // indices into the parameter list
  std::vector<std::int64_t> offsets;  // each parameter's first element in `data`
  DType dtype = float32;
  std::int64_t numel = 0;
  Tensor data;   // [padded numel]
  Tensor chunk;  // [padded numel / p]: this rank's reduced block
  std::size_t filled = 0;
  // 0 filling, 1 full, 2 reduce-scatter running, 3 reduced, 4 all-gather running, 5 done
  int phase = 0;
  MPI_Request req = MPI_REQUEST_NULL;
};

struct ReducerState {
  GradReducerOptions options;
  ParameterList params;
  std::vector<std::vector<std::size_t>> bucket_params;
  std::vector<Bucket> buckets;
  std::vector<std::size_t> bucket_of, index_in_bucket;
  std::vector<bool> marked;
  // One communicator per phase: each sees its collectives started in bucket
  // order on every rank, whatever order the phases of different buckets interleave in.
  MPI_Comm rs_comm = MPI_COMM_NULL, ag_comm = MPI_COMM_NULL;
  std::size_t next_rs = 0, next_ag = 0;
  std::size_t arrived = 0;  // gradients marked this step
  std::int64_t steps = 0, early_starts = 0;
  int p = 1, r = 0;

  ~ReducerState() {
    if (rs_comm != MPI_COMM_NULL && usable()) {
      MPI_Comm_free(&rs_comm);
      MPI_Comm_free(&ag_comm);
    }
  }

  static bool usable() {
    try {
      check_usable("DistributedGradReducer");
      return true;
    } catch (const Error&) {
      return false;
    }
  }

  void mark(std::size_t i, const Tensor& g) {
    constexpr std::string_view api = "DistributedGradReducer";
    check_usable(api);
    MS_CHECK(!marked[i], ValueError, api, ": the gradient of ", describe_param(params[i]),
             " arrived twice before the reduced gradients were taken");
    marked[i] = true;
    Bucket& b = buckets[bucket_of[i]];
    const Tensor src = g.dtype() == b.dtype ? g.contiguous() : g.to(b.dtype);
    const std::int64_t off = b.offsets[index_in_bucket[i]];
    if (src.numel() > 0)
      std::memcpy(b.data.raw_data() + off * b.data.itemsize(), src.raw_data(),
                  static_cast<std::size_t>(src.nbytes()));
    if (++b.filled == b.params.size()) b.phase = 1;
    ++arrived;
    const std::size_t started = next_rs;
    progress();
    if (arrived < params.size()) early_starts += static_cast<std::int64_t>(next_rs - started);
  }

  // Starts what can start (in bucket order) and collects what has finished.
  void progress() {
    constexpr std::string_view api = "DistributedGradReducer";
    while (next_rs < buckets.size() && buckets[next_rs].phase == 1) {
      Bucket& b = buckets[next_rs++];
      check_mpi(MPI_Ireduce_scatter_block(b.data.raw_data(), b.chunk.raw_data(),
                                          static_cast<int>(b.chunk.numel()), mpi_type(b.dtype),
                                          mpi_op(ReduceOp::Sum, b.dtype, api), rs_comm, &b.req),
                api, "MPI_Ireduce_scatter_block");
      b.phase = 2;
    }
    for (Bucket& b : buckets)
      if (b.phase == 2 && test_all(std::span(&b.req, 1), api)) {
        std::memcpy(b.data.raw_data() + r * b.chunk.nbytes(), b.chunk.raw_data(),
                    static_cast<std::size_t>(b.chunk.nbytes()));
        b.phase = 3;
      }
    while (next_ag < buckets.size() && buckets[next_ag].phase == 3) {
      Bucket& b = buckets[next_ag++];
      check_mpi(
          MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b.data.raw_data(),
                         static_cast<int>(b.chunk.numel()), mpi_type(b.dtype), ag_comm, &b.req),
          api, "MPI_Iallgather");
      b.phase = 4;
    }
    for (Bucket& b : buckets)
      if (b.phase == 4 && test_all(std::span(&b.req, 1), api)) b.phase = 5;
  }

  std::vector<Tensor> finish(std::vector<Tensor> grads) {
    constexpr std::string_view api = "DistributedGradReducer";
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto deadline = start + std::chrono::duration_cast<clock::duration>(
                                      std::chrono::duration<double>(timeout()));
    for (;;) {
      progress();
      bool done = true;
      for (const Bucket& b : buckets) done = done && b.phase == 5;
      if (done) break;
      if (clock::now() > deadline) raise_timeout(api);
      poll_pause(start);
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      const Bucket& b = buckets[bucket_of[i]];
      const std::int64_t off = b.offsets[index_in_bucket[i]], n = params[i].numel();
      Tensor g = empty(params[i].shape(), b.dtype);
      if (n > 0)
        std::memcpy(g.raw_data(), b.data.raw_data() + off * b.data.itemsize(),
                    static_cast<std::size_t>(g.nbytes()));
      if (options.mean && p > 1) g = Tensor(g / static_cast<double>(p)).to(b.dtype);
      grads[i] = g.dtype() == grads[i].dtype() ? g : g.to(grads[i].dtype());
    }
    for (Bucket& b : buckets) {
      b.filled = 0;
      b.phase = 0;
    }
    marked.assign(marked.size(), false);
    next_rs = next_ag = 0;
    arrived = 0;
    ++steps;
    return grads;
  }
};

}  // namespace detail

DistributedGradReducer::DistributedGradReducer(const ParameterList& params,
                                               GradReducerOptions options)
    : state_(std::make_shared<detail::ReducerState>()) {
  constexpr std::string_view api = "DistributedGradReducer";
  MS_CHECK(options.bucket_bytes > 0, ValueError, api, ": bucket_bytes must be > 0, got ",
           options.bucket_bytes);
  for (std::size_t i = 0; i < params.size(); ++i) {
    MS_CHECK(params[i].defined() && !params[i].is_symbolic(), ValueError, api, ": parameter ", i,
             " is undefined or symbolic");
    MS_CHECK(dtype_is_float(params[i].dtype()), TypeError, api, ": parameter ", i, " ",
             describe_param(params[i]),
             " is not floating; gradients exist only for floating tensors");
  }
  detail::ReducerState& s = *state_;
  s.options = options;
  s.params = params;
  s.p = world_size();
  s.r = rank();
  if (options.broadcast)
    broadcast_parameters(params, 0);
  else if (mpi_active())
    check_same_parameters(params, 0, api);
  // Buckets from the last parameter backwards: the order backward computes gradients.
  s.bucket_of.assign(params.size(), 0);
  s.index_in_bucket.assign(params.size(), 0);
  s.marked.assign(params.size(), false);
  std::int64_t bytes = 0;
  for (std::size_t k = params.size(); k-- > 0;) {
    const Parameter& prm = params[k];
    const std::int64_t nb = prm.nbytes();
    if (s.buckets.empty() || s.buckets.back().dtype != prm.dtype() ||
        (bytes + nb > options.bucket_bytes && !s.buckets.back().params.empty())) {
      s.buckets.emplace_back();
      s.buckets.back().dtype = prm.dtype();
      bytes = 0;
    }
    detail::Bucket& b = s.buckets.back();
    s.bucket_of[k] = s.buckets.size() - 1;
    s.index_in_bucket[k] = b.params.size();
    b.params.push_back(k);
    b.offsets.push_back(b.numel);
    b.numel += prm.numel();
    bytes += nb;
  }
  for (detail::Bucket& b : s.buckets) {
    const std::int64_t chunk = (b.numel + s.p - 1) / s.p;
    MS_CHECK(chunk <= detail::kMaxCount, ValueError, api, ": a bucket of ", b.numel,
             " elements is too large for one MPI call; lower bucket_bytes");
    b.data = zeros({chunk * s.p}, b.dtype);  // the padding stays 0
    b.chunk = zeros({chunk}, b.dtype);
    s.bucket_params.push_back(b.params);
  }
  if (mpi_active()) {
    s.rs_comm = detail::dup_comm(api);
    s.ag_comm = detail::dup_comm(api);
  }
}

std::vector<Tensor> DistributedGradReducer::operator()(const std::vector<Tensor>& grads) const {
  constexpr std::string_view api = "DistributedGradReducer";
  const detail::ReducerState& s = *state_;
  MS_CHECK(grads.size() == s.params.size(), ValueError, api, ": got ", grads.size(),
           " gradients for ", s.params.size(), " parameters");
  for (std::size_t i = 0; i < grads.size(); ++i) {
    MS_CHECK(grads[i].defined(), ValueError, api, ": the gradient of ", describe_param(s.params[i]),
             " is undefined");
    MS_CHECK(grads[i].shape() == s.params[i].shape(), ShapeError, api, ": the gradient of ",
             describe_param(s.params[i]), " has shape ", grads[i].shape());
    MS_CHECK(dtype_is_float(grads[i].dtype()), TypeError, api, ": the gradient of ",
             describe_param(s.params[i]), " has dtype ", grads[i].dtype());
  }
  if (!mpi_active() || s.params.empty()) return grads;
  const std::shared_ptr<detail::ReducerState> st = state_;
  std::vector<Tensor> marked(grads.size());
  // Last parameter first: eagerly, the buckets then fill (and start) in order.
  for (std::size_t i = grads.size(); i-- > 0;)
    marked[i] = ops::host_call(
        [st, i](std::vector<Tensor> v) {
          st->mark(i, v[0]);
          return v;
        },
        {grads[i]},
        "grad_reducer bucket " + std::to_string(s.bucket_of[i]) + " <- " + s.params[i].name())[0];
  return ops::host_call([st](std::vector<Tensor> v) { return st->finish(std::move(v)); },
                        std::move(marked), "grad_reducer wait");
}

const std::vector<std::vector<std::size_t>>& DistributedGradReducer::buckets() const {
  return state_->bucket_params;
}

const GradReducerOptions& DistributedGradReducer::options() const { return state_->options; }

std::int64_t DistributedGradReducer::steps() const { return state_->steps; }

std::int64_t DistributedGradReducer::early_starts() const { return state_->early_starts; }

}  // namespace ms::parallel
