// ms/nn/initializer.hpp — parameter initializers (MindSpore's common/initializer.py).
//
// Stage: nn. An initializer makes a tensor of a given shape and dtype; the
// random ones draw from an ms::Generator (the default one when none is given).
// `ms::initializer(init, shape, dtype)` accepts an initializer object, a name
// from MindSpore's alias table ("he_uniform", "zeros", "truncatednormal", ...,
// case-insensitive), a number (Constant) or a tensor (shape checked).
//
//   ms::Tensor w = ms::initializer(ms::init::HeUniform(std::sqrt(5.0)), {512, 784});
//   ms::Tensor b = ms::initializer("zeros", {512});
//   ms::Generator g(1);
//   ms::Tensor k = ms::init::XavierNormal()({64, 3, 3, 3}, ms::float32, g);
//
// Fan rules (as MindSpore's `_calculate_fan_in_and_fan_out`): for [out, in],
// fan_in = in and fan_out = out; for [out, in, k...], both are multiplied by
// the receptive field size prod(k...). Rank < 2 is an ms::ShapeError.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ms/core/dtype.hpp"
#include "ms/core/shape.hpp"
#include "ms/core/tensor.hpp"
#include "ms/ops/random.hpp"

namespace ms {
namespace init {

/// (fan_in, fan_out) of a weight shape of rank >= 2 (see the header comment).
/// Example: `ms::init::calculate_fan_in_and_fan_out({64, 3, 3, 3})` is (27, 576).
std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const Shape& shape);
/// fan_in or fan_out by `mode` ("fan_in" / "fan_out", case-insensitive).
std::int64_t calculate_correct_fan(const Shape& shape, std::string_view mode);
/// The recommended gain for a nonlinearity: 1 for linear, conv*, conv_transpose*
/// and sigmoid; 5/3 for tanh; sqrt(2) for relu; sqrt(2 / (1 + slope^2)) for
/// leaky_relu (slope = `param`, 0.01 when omitted). ValueError for other names.
/// Example: `ms::init::calculate_gain("leaky_relu", 0.2)`.
double calculate_gain(std::string_view nonlinearity, std::optional<double> param = std::nullopt);

/// Base of the initializers. Calling one makes a new tensor; the random ones
/// draw from `gen` (default generator when omitted) and compute in float32
/// (float64 for a float64 result), then convert to the requested dtype.
class Initializer {
 public:
  virtual ~Initializer() = default;
  /// The class name, as MindSpore's ("HeUniform").
  virtual std::string_view name() const = 0;
  /// A copy on the heap (ms::InitSpec stores initializers this way).
  virtual std::shared_ptr<const Initializer> clone() const = 0;

  /// A new tensor of `shape` and `dtype`. Example: `ms::init::Normal(0.02)({3, 4})`.
  Tensor operator()(const Shape& shape, DType dtype = float32) const;
  /// A new tensor of `shape` and `dtype` drawn from `gen` instead of the default
  /// generator (a seeded ms::Generator makes the values reproducible).
  Tensor operator()(const Shape& shape, DType dtype, Generator& gen) const;

 protected:
  /// Values of `shape`, contiguous, in `dtype` or in a floating compute dtype
  /// (converted by the caller). Shape sizes are already validated.
  virtual Tensor generate(const Shape& shape, DType dtype, Generator& gen) const = 0;
};

/// CRTP helper: `name()` and `clone()` for a final initializer class.
template <class Derived>
class InitializerImpl : public Initializer {
 public:
  /// A copy of the derived initializer on the heap.
  std::shared_ptr<const Initializer> clone() const override {
    return std::make_shared<Derived>(static_cast<const Derived&>(*this));
  }
  /// Derived::kName.
  std::string_view name() const override { return Derived::kName; }
};

/// All zeros (names "zero", "zeros").
class Zero final : public InitializerImpl<Zero> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "Zero";

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;
};

/// All ones (names "one", "ones").
class One final : public InitializerImpl<One> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "One";

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;
};

/// Every element `value` (what a number passed to ms::initializer becomes).
class Constant final : public InitializerImpl<Constant> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "Constant";
  /// Fills with `value` (converted to the requested dtype).
  explicit Constant(Scalar value) : value_(value) {}
  /// The fill value.
  const Scalar& value() const { return value_; }

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;

 private:
  Scalar value_;
};

/// N(mean, sigma^2); sigma >= 0 (name "normal").
class Normal final : public InitializerImpl<Normal> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "Normal";
  /// Standard deviation `sigma` (ValueError when negative) and mean `mean`.
  explicit Normal(double sigma = 0.01, double mean = 0.0);
  /// The standard deviation.
  double sigma() const { return sigma_; }
  /// The mean.
  double mean() const { return mean_; }

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;

 private:
  double sigma_, mean_;
};

/// U(-scale, scale); scale >= 0 (name "uniform").
class Uniform final : public InitializerImpl<Uniform> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "Uniform";
  /// Bound `scale` (ValueError when negative).
  explicit Uniform(double scale = 0.07);
  /// The bound.
  double scale() const { return scale_; }

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;

 private:
  double scale_;
};

/// N(mean, sigma^2) truncated to [a, b] (absolute bounds); sigma >= 0, a < b
/// (name "truncatednormal").
class TruncatedNormal final : public InitializerImpl<TruncatedNormal> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "TruncatedNormal";
  /// N(`mean`, `sigma`^2) kept within [`a`, `b`]; ValueError when sigma < 0 or a >= b.
  explicit TruncatedNormal(double sigma = 0.01, double mean = 0.0, double a = -2.0, double b = 2.0);
  /// The standard deviation before truncation.
  double sigma() const { return sigma_; }

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;

 private:
  double sigma_, mean_, a_, b_;
};

/// Kaiming uniform: U(-bound, bound), bound = gain * sqrt(3 / fan) with
/// gain = calculate_gain(nonlinearity, negative_slope) and fan by `mode`
/// (names "heuniform", "he_uniform"). Dense's default is HeUniform(sqrt(5)).
class HeUniform final : public InitializerImpl<HeUniform> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "HeUniform";
  /// `mode` "fan_in" or "fan_out", `nonlinearity` as ms::init::calculate_gain takes it
  /// (`negative_slope` is leaky_relu's); ValueError for an unknown mode or nonlinearity.
  explicit HeUniform(double negative_slope = 0.0, std::string mode = "fan_in",
                     std::string nonlinearity = "leaky_relu");
  /// The bound used for `shape`.
  double bound(const Shape& shape) const;

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;

 private:
  double negative_slope_;
  std::string mode_, nonlinearity_;
};

/// Kaiming normal: N(0, std^2), std = gain / sqrt(fan) (names "henormal", "he_normal").
class HeNormal final : public InitializerImpl<HeNormal> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "HeNormal";
  /// Arguments as HeUniform's; ValueError for an unknown mode or nonlinearity.
  explicit HeNormal(double negative_slope = 0.0, std::string mode = "fan_in",
                    std::string nonlinearity = "leaky_relu");
  /// The standard deviation used for `shape`.
  double stddev(const Shape& shape) const;

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;

 private:
  double negative_slope_;
  std::string mode_, nonlinearity_;
};

/// Glorot uniform: U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)); gain >= 0
/// (names "xavieruniform", "xavier_uniform").
class XavierUniform final : public InitializerImpl<XavierUniform> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "XavierUniform";
  /// Scale `gain` (ValueError when negative).
  explicit XavierUniform(double gain = 1.0);

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;

 private:
  double gain_;
};

/// Glorot normal: N(0, s^2), s = gain * sqrt(2 / (fan_in + fan_out)); gain >= 0
/// (names "xaviernormal", "xavier_normal").
class XavierNormal final : public InitializerImpl<XavierNormal> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "XavierNormal";
  /// Scale `gain` (ValueError when negative).
  explicit XavierNormal(double gain = 1.0);

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;

 private:
  double gain_;
};

/// Variance scaling (name "variancescaling"): with n = fan_in, fan_out or their
/// mean by `mode` (at least 1), "truncated_normal" draws N(0, s^2) truncated to
/// +-2 s with s = sqrt(scale / n) / 0.8796... (so the variance is scale / n),
/// "untruncated_normal" N(0, scale / n), "uniform" U(+-sqrt(3 scale / n)).
/// scale > 0; mode in fan_in / fan_out / fan_avg.
class VarianceScaling final : public InitializerImpl<VarianceScaling> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "VarianceScaling";
  /// `scale` > 0, `mode` fan_in / fan_out / fan_avg, `distribution` truncated_normal /
  /// untruncated_normal / uniform; ValueError otherwise.
  explicit VarianceScaling(double scale = 1.0, std::string mode = "fan_in",
                           std::string distribution = "truncated_normal");

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;

 private:
  double scale_;
  std::string mode_, distribution_;
};

/// A (semi-)orthogonal matrix times `gain` (name "orthogonal"): rank >= 2, the
/// trailing dims flattened into columns; from the QR decomposition of a
/// standard normal matrix, columns signed by diag(R) (uniform over the group).
class Orthogonal final : public InitializerImpl<Orthogonal> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "Orthogonal";
  /// Scale `gain` of the orthogonal matrix.
  explicit Orthogonal(double gain = 1.0);

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;

 private:
  double gain_;
};

/// The identity matrix (ones on the main diagonal of a rank-2 shape; name "identity").
class Identity final : public InitializerImpl<Identity> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "Identity";

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;
};

/// Dirac delta for convolution weights [out, in, k...] of rank 3, 4 or 5: in each
/// of `groups` groups, output channel i passes input channel i through the
/// kernel centre (name "dirac"). groups >= 1 dividing out.
class Dirac final : public InitializerImpl<Dirac> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "Dirac";
  /// `groups` >= 1 (ValueError otherwise; it must divide the output channels).
  explicit Dirac(std::int64_t groups = 1);

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;

 private:
  std::int64_t groups_;
};

/// A rank-2 N(0, sigma^2) matrix with ceil(sparsity * rows) zeros, at random
/// rows, in every column. sparsity in [0, 1], sigma >= 0 (name "sparse", but the
/// name alone cannot give the required sparsity).
class Sparse final : public InitializerImpl<Sparse> {
 public:
  /// The class name, as name() returns it and MindSpore spells it.
  static constexpr std::string_view kName = "Sparse";
  /// The fraction `sparsity` in [0, 1] of zeros per column, `sigma` >= 0
  /// (ValueError otherwise).
  explicit Sparse(double sparsity, double sigma = 0.01);

 protected:
  Tensor generate(const Shape& shape, DType dtype, Generator& gen) const override;

 private:
  double sparsity_, sigma_;
};

// The built-in initializers' clone() and name() are compiled once, in libms.
extern template class InitializerImpl<Zero>;
extern template class InitializerImpl<One>;
extern template class InitializerImpl<Constant>;
extern template class InitializerImpl<Normal>;
extern template class InitializerImpl<Uniform>;
extern template class InitializerImpl<TruncatedNormal>;
extern template class InitializerImpl<HeUniform>;
extern template class InitializerImpl<HeNormal>;
extern template class InitializerImpl<XavierUniform>;
extern template class InitializerImpl<XavierNormal>;
extern template class InitializerImpl<VarianceScaling>;
extern template class InitializerImpl<Orthogonal>;
extern template class InitializerImpl<Identity>;
extern template class InitializerImpl<Dirac>;
extern template class InitializerImpl<Sparse>;

/// The initializer registered under `name` in MindSpore's alias table
/// (case-insensitive), made with its default arguments. ValueError when unknown.
/// Example: `ms::init::from_name("he_uniform")`.
std::shared_ptr<const Initializer> from_name(std::string_view name);

}  // namespace init

/// Anything ms::initializer accepts: an initializer object, a name, a number or
/// a tensor. Implicit on purpose, so that option structs can hold any of them:
/// `InitSpec w = "he_uniform";  InitSpec b = 0.0;  InitSpec k = init::Orthogonal(2.0);`
class InitSpec {
 public:
  /// An initializer object (copied): `InitSpec s = ms::init::Normal(0.02);`.
  InitSpec(const init::Initializer& init);  // NOLINT
  /// A shared initializer object (ValueError when null).
  InitSpec(std::shared_ptr<const init::Initializer> init);  // NOLINT
  /// A name from MindSpore's alias table, looked up by resolve(): `"he_uniform"`.
  InitSpec(const char* name);  // NOLINT
  /// A name, as the `const char*` form.
  InitSpec(std::string name);  // NOLINT
  /// A name, as the `const char*` form.
  InitSpec(std::string_view name);  // NOLINT
  /// A number: every element that value (ms::init::Constant).
  template <class T>
  requires std::is_arithmetic_v<T> InitSpec(T number) : InitSpec(Scalar(number)) {}  // NOLINT
  /// A number given as a Scalar, as the arithmetic form.
  InitSpec(Scalar number);  // NOLINT
  /// A tensor used as the value itself (its shape must match the parameter's).
  InitSpec(Tensor tensor);  // NOLINT
  /// @{
  /// Copies share the spec (it never changes); a moved-from spec keeps its
  /// value, so that it stays usable.
  InitSpec(const InitSpec&);
  InitSpec(InitSpec&&) noexcept;
  InitSpec& operator=(const InitSpec&);
  InitSpec& operator=(InitSpec&&) noexcept;
  ~InitSpec();
  /// @}

  /// True when the spec holds a tensor rather than an initializer.
  bool is_tensor() const;
  /// "HeUniform", "'zeros'", "Constant(0.5)" or "Tensor[2, 3]", for messages and printing.
  std::string to_string() const;
  /// The initializer object this spec stands for (a name is looked up, a number
  /// becomes Constant). ValueError for an unknown name, for a tensor.
  std::shared_ptr<const init::Initializer> resolve() const;
  /// The tensor of a tensor spec (ValueError otherwise).
  const Tensor& tensor() const;

 private:
  // What the spec holds (src/nn/initializer.cpp); never changed after
  // construction, so copies share it.
  struct Rep;
  std::shared_ptr<const Rep> rep_;
};

/// A new tensor of `shape` and `dtype` made by `init` (MindSpore's `initializer`).
/// Every dim of `shape` must be positive (ValueError). A tensor `init` must have
/// exactly `shape` (ShapeError); it is returned itself when it already has
/// `dtype`, else converted. Random initializers draw from `gen`.
/// Example: `ms::initializer("xavier_uniform", {10, 20}, ms::float32)`.
Tensor initializer(const InitSpec& init, const Shape& shape, DType dtype = float32);
/// The same, with random initializers drawing from `gen` (a seeded
/// ms::Generator makes the values reproducible).
Tensor initializer(const InitSpec& init, const Shape& shape, DType dtype, Generator& gen);
/// A tensor initializer without a shape: the tensor itself.
Tensor initializer(const Tensor& init);

}  // namespace ms
