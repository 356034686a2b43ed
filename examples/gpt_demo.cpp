// gpt_demo — a character-level ms::nn::Gpt trained on a short text.
//
// Random windows of the text are the batches; one training step (forward,
// cross-entropy, gradients, AdamW update) is compiled once by ms::jit. After
// training, the model continues a prompt greedily, one character at a time.
//
//   gpt_demo [steps]
#include <cstdio>
#include <cstdlib>
#include <map>
#include <ms/cell.hpp>
#include <string>
#include <vector>

namespace {

const char* const kText =
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife. However little known the feelings or views of such a man may be "
    "on his first entering a neighbourhood, this truth is so well fixed in the minds of the "
    "surrounding families, that he is considered the rightful property of some one or other of "
    "their daughters. ";

struct Vocab {
  std::string chars;
  std::map<char, std::int64_t> index;
  explicit Vocab(const std::string& text) {
    for (char c : text)
      if (!index.count(c)) index.emplace(c, 0);
    for (auto& [c, i] : index) {
      i = static_cast<std::int64_t>(chars.size());
      chars += c;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 300;
  const std::string text = kText;
  const Vocab vocab(text);
  std::vector<std::int64_t> ids;
  for (char c : text) ids.push_back(vocab.index.at(c));
  const std::int64_t block = 32, batch = 16, n = static_cast<std::int64_t>(ids.size());

  ms::manual_seed(0);
  ms::nn::Gpt gpt({.vocab_size = static_cast<std::int64_t>(vocab.chars.size()),
                   .block_size = block,
                   .n_layer = 2,
                   .n_head = 4,
                   .n_embd = 64});
  gpt.set_train(true);
  ms::optim::AdamW opt(gpt.trainable_params(), {.lr = 3e-3});
  auto step = ms::jit([&](const ms::Tensor& x, const ms::Tensor& y) {
    auto loss_fn = [&](const ms::Tensor& a, const ms::Tensor& b) {
      return ms::nn::cross_entropy(gpt(a), b);
    };
    auto [loss, grads] =
        ms::value_and_grad(loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
    opt.apply(grads);
    return loss;
  });

  ms::Generator g(1);
  for (int s = 0; s <= steps; ++s) {
    const auto starts = ms::randint(0, n - block - 1, {batch}, g).to_vector<std::int64_t>();
    std::vector<std::int64_t> xs, ys;
    for (std::int64_t st : starts)
      for (std::int64_t t = 0; t < block; ++t) {
        xs.push_back(ids[static_cast<std::size_t>(st + t)]);
        ys.push_back(ids[static_cast<std::size_t>(st + t + 1)]);
      }
    const double loss = step(ms::from_vector(xs, ms::Shape{batch, block}),
                             ms::from_vector(ys, ms::Shape{batch, block}))
                            .item<double>();
    if (s % 50 == 0) std::printf("step %4d  loss %.3f\n", s, loss);
  }
  std::printf("compiled the training step %d time(s)\n", step.compile_count());

  gpt.set_train(false);
  std::vector<std::int64_t> ctx(ids.begin(), ids.begin() + 12);
  std::string out(text.begin(), text.begin() + 12);
  for (int i = 0; i < 80; ++i) {
    const std::size_t keep = std::min<std::size_t>(ctx.size(), block);
    const std::vector<std::int64_t> window(ctx.end() - static_cast<std::ptrdiff_t>(keep),
                                           ctx.end());
    const ms::Tensor logits =
        gpt(ms::from_vector(window, ms::Shape{1, static_cast<std::int64_t>(keep)}));
    const auto next = ms::argmax(logits.select(1, -1), -1).to_vector<std::int64_t>()[0];
    ctx.push_back(next);
    out += vocab.chars[static_cast<std::size_t>(next)];
  }
  std::printf("%s\n", out.c_str());
  return 0;
}
