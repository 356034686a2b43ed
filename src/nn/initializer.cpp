// Initializers (see ms/nn/initializer.hpp). The random ones are thin layers
// over ms/core/random.hpp; Orthogonal runs Eigen's Householder QR here, in
// libms, so no public header pulls in Eigen/QR.
#include "ms/nn/initializer.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <sstream>
#include <variant>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/QR>
#pragma GCC diagnostic pop
#else
#include <Eigen/QR>
#endif

#include "ms/core/error.hpp"

namespace ms {
namespace init {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

/// Floating dtype the random initializers compute in for a result of `dtype`.
DType compute_dtype(DType dtype) { return dtype == float64 ? float64 : float32; }

void check_finite(std::string_view what, std::string_view arg, double v) {
  MS_CHECK(std::isfinite(v), ValueError, what, ": '", arg, "' must be finite, got ", v);
}

void check_rank_at_least_2(const Shape& shape, std::string_view what) {
  MS_CHECK(shape.rank() >= 2, ShapeError, what,
           ": 'fan_in' and 'fan_out' can not be computed for a tensor with fewer than 2 "
           "dimensions, got shape ",
           shape, " (rank ", shape.rank(), ")");
}

std::pair<std::int64_t, std::int64_t> fans(const Shape& shape, std::string_view what) {
  check_rank_at_least_2(shape, what);
  shape_numel(shape, what);  // negative sizes and overflow: every partial product below fits
  std::int64_t receptive = 1;
  for (std::int64_t i = 2; i < shape.rank(); ++i) receptive *= shape[static_cast<std::size_t>(i)];
  return {shape[1] * receptive, shape[0] * receptive};
}

std::string check_fan_mode(std::string_view mode, std::string_view what) {
  std::string m = lower(mode);
  MS_CHECK(m == "fan_in" || m == "fan_out", ValueError, what,
           ": 'mode' must be 'fan_in' or 'fan_out', got '", mode, "'");
  return m;
}

std::int64_t correct_fan(const Shape& shape, std::string_view mode, std::string_view what) {
  const std::string m = check_fan_mode(mode, what);
  const auto [fan_in, fan_out] = fans(shape, what);
  return m == "fan_in" ? fan_in : fan_out;
}

double gain_of(std::string_view nonlinearity, std::optional<double> param, std::string_view what) {
  static constexpr std::string_view kLinear[] = {
      "linear",           "conv1d",           "conv2d",          "conv3d",
      "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"};
  if (std::find(std::begin(kLinear), std::end(kLinear), nonlinearity) != std::end(kLinear) ||
      nonlinearity == "sigmoid")
    return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    const double slope = param.value_or(0.01);
    MS_CHECK(std::isfinite(slope), ValueError, what,
             ": 'negative_slope' must be a finite number for 'leaky_relu', got ", slope);
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  detail::raise<ValueError>(what,
                            ": 'nonlinearity' must be one of linear, conv1d, conv2d, conv3d, "
                            "conv_transpose1d, conv_transpose2d, conv_transpose3d, sigmoid, tanh, "
                            "relu, leaky_relu; got '",
                            nonlinearity, "'");
}

/// U(-bound, bound) in the compute dtype; zeros for a zero bound (gain 0).
Tensor uniform_symmetric(const Shape& shape, double bound, DType dtype, Generator& gen) {
  if (bound == 0.0) return zeros(shape, compute_dtype(dtype));
  return uniform(shape, -bound, bound, gen, compute_dtype(dtype));
}

void check_positive_fan(std::int64_t fan, std::string_view fan_name, const Shape& shape,
                        std::string_view what) {
  MS_CHECK(fan > 0, ValueError, what, ": ", fan_name, " of shape ", shape,
           " is 0, the scale would divide by zero");
}

}  // namespace

// ------------------------------------------------------------------ fan rules

std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const Shape& shape) {
  return fans(shape, "calculate_fan_in_and_fan_out");
}

std::int64_t calculate_correct_fan(const Shape& shape, std::string_view mode) {
  return correct_fan(shape, mode, "calculate_correct_fan");
}

double calculate_gain(std::string_view nonlinearity, std::optional<double> param) {
  return gain_of(nonlinearity, param, "calculate_gain");
}

// ------------------------------------------------------------------ base

Tensor Initializer::operator()(const Shape& shape, DType dtype) const {
  return (*this)(shape, dtype, default_generator());
}

Tensor Initializer::operator()(const Shape& shape, DType dtype, Generator& gen) const {
  MS_CHECK(!detail::tracing_active(), ValueError, name(),
           ": initializers cannot run inside ms::jit (the values would be frozen into the graph); "
           "initialize parameters outside the jitted function");
  shape_numel(shape, name());
  const Tensor t = generate(shape, dtype, gen);
  return t.dtype() == dtype ? t : t.to(dtype);
}

// ------------------------------------------------------------------ constants

Tensor Zero::generate(const Shape& shape, DType dtype, Generator&) const {
  return zeros(shape, dtype);
}

Tensor One::generate(const Shape& shape, DType dtype, Generator&) const {
  return ones(shape, dtype);
}

Tensor Constant::generate(const Shape& shape, DType dtype, Generator&) const {
  return full(shape, value_, dtype);
}

// ------------------------------------------------------------------ plain distributions

Normal::Normal(double sigma, double mean) : sigma_(sigma), mean_(mean) {
  check_finite(kName, "sigma", sigma);
  check_finite(kName, "mean", mean);
  MS_CHECK(sigma >= 0.0, ValueError, "Normal: expected sigma >= 0, got sigma = ", sigma);
}

Tensor Normal::generate(const Shape& shape, DType dtype, Generator& gen) const {
  return normal(shape, mean_, sigma_, gen, compute_dtype(dtype));
}

Uniform::Uniform(double scale) : scale_(scale) {
  check_finite(kName, "scale", scale);
  MS_CHECK(scale >= 0.0, ValueError, "Uniform: expected scale >= 0, got scale = ", scale);
}

Tensor Uniform::generate(const Shape& shape, DType dtype, Generator& gen) const {
  return uniform_symmetric(shape, scale_, dtype, gen);
}

TruncatedNormal::TruncatedNormal(double sigma, double mean, double a, double b)
    : sigma_(sigma), mean_(mean), a_(a), b_(b) {
  check_finite(kName, "sigma", sigma);
  check_finite(kName, "mean", mean);
  MS_CHECK(sigma >= 0.0, ValueError, "TruncatedNormal: expected sigma >= 0, got sigma = ", sigma);
  MS_CHECK(!std::isnan(a) && !std::isnan(b) && a < b, ValueError,
           "TruncatedNormal: expected bounds a < b, got a = ", a, " and b = ", b);
}

Tensor TruncatedNormal::generate(const Shape& shape, DType dtype, Generator& gen) const {
  return truncated_normal(shape, mean_, sigma_, a_, b_, gen, compute_dtype(dtype));
}

// ------------------------------------------------------------------ He (Kaiming)

HeUniform::HeUniform(double negative_slope, std::string mode, std::string nonlinearity)
    : negative_slope_(negative_slope),
      mode_(check_fan_mode(mode, kName)),
      nonlinearity_(std::move(nonlinearity)) {
  gain_of(nonlinearity_, negative_slope_, kName);  // validates early
}

double HeUniform::bound(const Shape& shape) const {
  const std::int64_t fan = correct_fan(shape, mode_, kName);
  check_positive_fan(fan, mode_, shape, kName);
  const double sd = gain_of(nonlinearity_, negative_slope_, kName) / std::sqrt(double(fan));
  return std::sqrt(3.0) * sd;
}

Tensor HeUniform::generate(const Shape& shape, DType dtype, Generator& gen) const {
  return uniform_symmetric(shape, bound(shape), dtype, gen);
}

HeNormal::HeNormal(double negative_slope, std::string mode, std::string nonlinearity)
    : negative_slope_(negative_slope),
      mode_(check_fan_mode(mode, kName)),
      nonlinearity_(std::move(nonlinearity)) {
  gain_of(nonlinearity_, negative_slope_, kName);
}

double HeNormal::stddev(const Shape& shape) const {
  const std::int64_t fan = correct_fan(shape, mode_, kName);
  check_positive_fan(fan, mode_, shape, kName);
  return gain_of(nonlinearity_, negative_slope_, kName) / std::sqrt(double(fan));
}

Tensor HeNormal::generate(const Shape& shape, DType dtype, Generator& gen) const {
  return normal(shape, 0.0, stddev(shape), gen, compute_dtype(dtype));
}

// ------------------------------------------------------------------ Xavier (Glorot)

XavierUniform::XavierUniform(double gain) : gain_(gain) {
  check_finite(kName, "gain", gain);
  MS_CHECK(gain >= 0.0, ValueError, "XavierUniform: expected gain >= 0, got gain = ", gain);
}

Tensor XavierUniform::generate(const Shape& shape, DType dtype, Generator& gen) const {
  const auto [fan_in, fan_out] = fans(shape, kName);
  check_positive_fan(fan_in + fan_out, "fan_in + fan_out", shape, kName);
  const double bound = gain_ * std::sqrt(6.0 / double(fan_in + fan_out));
  return uniform_symmetric(shape, bound, dtype, gen);
}

XavierNormal::XavierNormal(double gain) : gain_(gain) {
  check_finite(kName, "gain", gain);
  MS_CHECK(gain >= 0.0, ValueError, "XavierNormal: expected gain >= 0, got gain = ", gain);
}

Tensor XavierNormal::generate(const Shape& shape, DType dtype, Generator& gen) const {
  const auto [fan_in, fan_out] = fans(shape, kName);
  check_positive_fan(fan_in + fan_out, "fan_in + fan_out", shape, kName);
  const double sd = gain_ * std::sqrt(2.0 / double(fan_in + fan_out));
  return normal(shape, 0.0, sd, gen, compute_dtype(dtype));
}

// ------------------------------------------------------------------ VarianceScaling

VarianceScaling::VarianceScaling(double scale, std::string mode, std::string distribution)
    : scale_(scale), mode_(std::move(mode)), distribution_(std::move(distribution)) {
  MS_CHECK(std::isfinite(scale) && scale > 0.0, ValueError,
           "VarianceScaling: the argument 'scale' must be greater than 0, got ", scale);
  MS_CHECK(mode_ == "fan_in" || mode_ == "fan_out" || mode_ == "fan_avg", ValueError,
           "VarianceScaling: the argument 'mode' must be 'fan_in', 'fan_out' or 'fan_avg', got '",
           mode_, "'");
  MS_CHECK(distribution_ == "uniform" || distribution_ == "truncated_normal" ||
               distribution_ == "untruncated_normal",
           ValueError,
           "VarianceScaling: the argument 'distribution' must be 'uniform', 'truncated_normal' "
           "or 'untruncated_normal', got '",
           distribution_, "'");
}

Tensor VarianceScaling::generate(const Shape& shape, DType dtype, Generator& gen) const {
  const auto [fan_in, fan_out] = fans(shape, kName);
  double n = 0.0;
  if (mode_ == "fan_in")
    n = double(fan_in);
  else if (mode_ == "fan_out")
    n = double(fan_out);
  else
    n = (double(fan_in) + double(fan_out)) / 2.0;
  const double s = scale_ / std::max(1.0, n);
  const DType ct = compute_dtype(dtype);
  if (distribution_ == "truncated_normal") {
    // The std of a standard normal truncated to [-2, 2]: dividing by it keeps
    // the variance of the result at s.
    constexpr double kTruncStd = 0.87962566103423978;
    const double stddev = std::sqrt(s) / kTruncStd;
    return truncated_normal(shape, 0.0, stddev, -2.0 * stddev, 2.0 * stddev, gen, ct);
  }
  if (distribution_ == "untruncated_normal") return normal(shape, 0.0, std::sqrt(s), gen, ct);
  return uniform_symmetric(shape, std::sqrt(3.0 * s), dtype, gen);
}

// ------------------------------------------------------------------ structured

Orthogonal::Orthogonal(double gain) : gain_(gain) { check_finite(kName, "gain", gain); }

Tensor Orthogonal::generate(const Shape& shape, DType dtype, Generator& gen) const {
  MS_CHECK(shape.rank() >= 2, ShapeError,
           "Orthogonal: the initialized tensor must have rank >= 2, got shape ", shape, " (rank ",
           shape.rank(), ")");
  const std::int64_t numel = shape_numel(shape, kName);
  if (numel == 0) return zeros(shape, compute_dtype(dtype));
  const std::int64_t rows = shape[0], cols = numel / rows;
  using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Tensor g = normal(Shape{rows, cols}, 0.0, 1.0, gen, float64);
  const Eigen::Map<const RowMat> a(g.data<double>(), rows, cols);
  // QR of the tall orientation (m >= n); the thin Q has orthonormal columns.
  const Eigen::MatrixXd m = rows < cols ? Eigen::MatrixXd(a.transpose()) : Eigen::MatrixXd(a);
  const Eigen::HouseholderQR<Eigen::MatrixXd> qr(m);
  Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(m.rows(), m.cols());
  // Signing the columns by diag(R) makes Q uniformly (Haar) distributed.
  for (Eigen::Index c = 0; c < m.cols(); ++c)
    if (qr.matrixQR()(c, c) < 0) q.col(c) *= -1.0;
  q *= gain_;
  Tensor out = empty(Shape{rows, cols}, float64);
  Eigen::Map<RowMat> o(out.data<double>(), rows, cols);
  if (rows < cols)
    o = q.transpose();
  else
    o = q;
  return out.reshape(shape);
}

Tensor Identity::generate(const Shape& shape, DType dtype, Generator&) const {
  MS_CHECK(shape.rank() == 2, ShapeError,
           "Identity: the initialized tensor must have rank 2, got shape ", shape, " (rank ",
           shape.rank(), ")");
  if (shape[0] == 0 || shape[1] == 0) return zeros(shape, dtype);
  return eye(shape[0], shape[1], dtype);
}

Dirac::Dirac(std::int64_t groups) : groups_(groups) {
  MS_CHECK(groups >= 1, ValueError, "Dirac: expected groups >= 1, got groups = ", groups);
}

Tensor Dirac::generate(const Shape& shape, DType dtype, Generator&) const {
  const std::int64_t rank = shape.rank();
  MS_CHECK(rank >= 3 && rank <= 5, ShapeError,
           "Dirac: only tensors of rank 3, 4 or 5 can be initialized, got shape ", shape, " (rank ",
           rank, ")");
  MS_CHECK(shape[0] % groups_ == 0, ValueError, "Dirac: the first dim ", shape[0], " of shape ",
           shape, " must be divisible by groups = ", groups_);
  Tensor out = zeros(shape, dtype);
  if (out.numel() == 0) return out;
  const DimVector strides = shape_contiguous_strides(shape, kName);
  std::int64_t centre = 0;  // offset of the kernel centre
  for (std::int64_t k = 2; k < rank; ++k)
    centre += (shape[static_cast<std::size_t>(k)] / 2) * strides[static_cast<std::size_t>(k)];
  const std::int64_t per_group = shape[0] / groups_;
  const std::int64_t diag = std::min(per_group, shape[1]);
  dtype_dispatch(
      dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* o = out.data<T>();
        for (std::int64_t g = 0; g < groups_; ++g)
          for (std::int64_t d = 0; d < diag; ++d)
            o[(g * per_group + d) * strides[0] + d * strides[1] + centre] = scalar_cast<T>(1);
      },
      kName);
  return out;
}

Sparse::Sparse(double sparsity, double sigma) : sparsity_(sparsity), sigma_(sigma) {
  MS_CHECK(sparsity >= 0.0 && sparsity <= 1.0, ValueError,
           "Sparse: expected sparsity in [0, 1], got sparsity = ", sparsity);
  check_finite(kName, "sigma", sigma);
  MS_CHECK(sigma >= 0.0, ValueError, "Sparse: expected sigma >= 0, got sigma = ", sigma);
}

Tensor Sparse::generate(const Shape& shape, DType dtype, Generator& gen) const {
  MS_CHECK(shape.rank() == 2, ShapeError,
           "Sparse: the initialized tensor must have rank 2, got shape ", shape, " (rank ",
           shape.rank(), ")");
  const std::int64_t rows = shape[0], cols = shape[1];
  const auto zero_num =
      std::min(rows, static_cast<std::int64_t>(std::ceil(sparsity_ * static_cast<double>(rows))));
  Tensor data = normal(shape, 0.0, sigma_, gen, compute_dtype(dtype));
  if (zero_num == 0 || cols == 0) return data;
  dtype_dispatch(data.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      T* o = data.data<T>();
      for (std::int64_t c = 0; c < cols; ++c) {  // a fresh permutation per column, as MindSpore
        const Tensor perm = randperm(rows, gen);
        const std::int64_t* r = perm.data<std::int64_t>();
        for (std::int64_t k = 0; k < zero_num; ++k) o[r[k] * cols + c] = T(0);
      }
    }
  });
  return data;
}

// ------------------------------------------------------------------ alias table

std::shared_ptr<const Initializer> from_name(std::string_view name) {
  using Factory = std::function<std::shared_ptr<const Initializer>()>;
  static const std::map<std::string, Factory, std::less<>> table = [] {
    std::map<std::string, Factory, std::less<>> t;
    // MindSpore's _register: the lower-cased class name plus the listed aliases.
    const auto add = [&t]<class I>(std::initializer_list<const char*> names,
                                   std::type_identity<I>) {
      for (const char* n : names) t[n] = [] { return std::make_shared<const I>(); };
    };
    add({"zero", "zeros"}, std::type_identity<Zero>{});
    add({"one", "ones"}, std::type_identity<One>{});
    add({"xaviernormal", "xavier_normal"}, std::type_identity<XavierNormal>{});
    add({"xavieruniform", "xavier_uniform"}, std::type_identity<XavierUniform>{});
    add({"heuniform", "he_uniform"}, std::type_identity<HeUniform>{});
    add({"henormal", "he_normal"}, std::type_identity<HeNormal>{});
    add({"identity"}, std::type_identity<Identity>{});
    add({"dirac"}, std::type_identity<Dirac>{});
    add({"orthogonal"}, std::type_identity<Orthogonal>{});
    add({"variancescaling"}, std::type_identity<VarianceScaling>{});
    add({"uniform"}, std::type_identity<Uniform>{});
    add({"normal"}, std::type_identity<Normal>{});
    add({"truncatednormal"}, std::type_identity<TruncatedNormal>{});
    return t;
  }();
  const std::string key = lower(name);
  MS_CHECK(key != "sparse", TypeError,
           "initializer: 'sparse' needs the argument 'sparsity'; use ms::init::Sparse(sparsity, "
           "sigma)");
  const auto it = table.find(key);
  if (it == table.end()) {
    std::ostringstream known;
    for (const auto& [n, f] : table) known << (known.tellp() > 0 ? ", " : "") << n;
    detail::raise<ValueError>("initializer: the class corresponding to '", name,
                              "' was not found; known names: ", known.str(),
                              " (a number gives Constant)");
  }
  return it->second();
}

// The definitions the header declares with `extern template`.
template class InitializerImpl<Zero>;
template class InitializerImpl<One>;
template class InitializerImpl<Constant>;
template class InitializerImpl<Normal>;
template class InitializerImpl<Uniform>;
template class InitializerImpl<TruncatedNormal>;
template class InitializerImpl<HeUniform>;
template class InitializerImpl<HeNormal>;
template class InitializerImpl<XavierUniform>;
template class InitializerImpl<XavierNormal>;
template class InitializerImpl<VarianceScaling>;
template class InitializerImpl<Orthogonal>;
template class InitializerImpl<Identity>;
template class InitializerImpl<Dirac>;
template class InitializerImpl<Sparse>;

}  // namespace init

// ------------------------------------------------------------------ InitSpec, initializer

struct InitSpec::Rep {
  std::variant<std::shared_ptr<const init::Initializer>, std::string, Scalar, Tensor> v;
};

InitSpec::InitSpec(const init::Initializer& init)
    : rep_(std::make_shared<const Rep>(Rep{init.clone()})) {}
InitSpec::InitSpec(std::shared_ptr<const init::Initializer> init) {
  MS_CHECK(init != nullptr, ValueError, "InitSpec: the initializer pointer is null");
  rep_ = std::make_shared<const Rep>(Rep{std::move(init)});
}
InitSpec::InitSpec(const char* name) : InitSpec(std::string(name)) {}
InitSpec::InitSpec(std::string name) : rep_(std::make_shared<const Rep>(Rep{std::move(name)})) {}
InitSpec::InitSpec(std::string_view name) : InitSpec(std::string(name)) {}
InitSpec::InitSpec(Scalar number) : rep_(std::make_shared<const Rep>(Rep{number})) {}
InitSpec::InitSpec(Tensor tensor) : rep_(std::make_shared<const Rep>(Rep{std::move(tensor)})) {}

InitSpec::InitSpec(const InitSpec&) = default;
InitSpec::InitSpec(InitSpec&& o) noexcept : rep_(o.rep_) {}
InitSpec& InitSpec::operator=(const InitSpec&) = default;
InitSpec& InitSpec::operator=(InitSpec&& o) noexcept {
  rep_ = o.rep_;
  return *this;
}
InitSpec::~InitSpec() = default;

bool InitSpec::is_tensor() const { return std::holds_alternative<Tensor>(rep_->v); }

std::string InitSpec::to_string() const {
  struct {
    std::string operator()(const std::shared_ptr<const init::Initializer>& i) const {
      return std::string(i->name());
    }
    std::string operator()(const std::string& s) const { return "'" + s + "'"; }
    std::string operator()(const Scalar& s) const { return "Constant(" + s.to_string() + ")"; }
    std::string operator()(const Tensor& t) const {
      return detail::str_cat("Tensor", t.shape(), " ", t.dtype());
    }
  } visitor;
  return std::visit(visitor, rep_->v);
}

std::shared_ptr<const init::Initializer> InitSpec::resolve() const {
  const auto& v = rep_->v;
  if (const auto* p = std::get_if<std::shared_ptr<const init::Initializer>>(&v)) return *p;
  if (const auto* s = std::get_if<std::string>(&v)) return init::from_name(*s);
  if (const auto* c = std::get_if<Scalar>(&v)) return std::make_shared<const init::Constant>(*c);
  detail::raise<ValueError>(
      "InitSpec::resolve: a tensor spec has no initializer object; use "
      "ms::initializer(spec, shape)");
}

const Tensor& InitSpec::tensor() const {
  const auto* t = std::get_if<Tensor>(&rep_->v);
  MS_CHECK(t != nullptr, ValueError, "InitSpec::tensor: the spec is ", to_string(),
           ", not a tensor");
  return *t;
}

Tensor initializer(const InitSpec& init, const Shape& shape, DType dtype) {
  return initializer(init, shape, dtype, default_generator());
}

Tensor initializer(const InitSpec& init, const Shape& shape, DType dtype, Generator& gen) {
  if (init.is_tensor()) {
    const Tensor& t = init.tensor();
    MS_CHECK(t.defined(), ValueError, "initializer: 'init' is an undefined tensor");
    MS_CHECK(t.shape() == shape, ShapeError, "initializer: the shape of the 'init' tensor ",
             t.shape(), " differs from the argument 'shape' ", shape);
    return t.dtype() == dtype ? t : t.to(dtype);
  }
  MS_CHECK(std::all_of(shape.begin(), shape.end(), [](std::int64_t d) { return d > 0; }),
           ValueError,
           "initializer: the argument 'shape' is invalid, every dim must be a positive integer, "
           "got ",
           shape);
  return (*init.resolve())(shape, dtype, gen);
}

Tensor initializer(const Tensor& init) {
  MS_CHECK(init.defined(), ValueError, "initializer: 'init' is an undefined tensor");
  return init;
}

}  // namespace ms
