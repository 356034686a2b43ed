// bench/char_lm_torch.cpp — the LibTorch twin of examples/char_lm.cpp, for
// bench/char_lm_twin.sh: the same GPT (bench/gpt_torch.hpp) from the same
// initial weights, trained on the same batches with the same optimizer, or
// generating greedily from a char_lm checkpoint.
//
// train: loads the initial weights that `char_lm --save-init PATH` wrote
// (the model's sizes come from the file's metadata; the context is its
// block_size) and trains for --steps steps on the batches of ms's
// ByteTextLoader over ms's FortunesCorpus, made as char_lm makes them (the
// training split, windows at stride 1, batches of --batch with drop_last,
// shuffled by --seed; the data side is not timed), with char_lm's defaults:
// torch::optim::AdamW (betas 0.9, 0.999, eps 1e-8, decoupled weight decay
// --weight-decay on every parameter), the rate of ms::optim::WarmupCosineLR
// (linear warm-up from 0 over min(--warmup, --steps - 1) steps, then cosine
// down to --lr / 10 at --steps) and clip_grad_norm at --clip with ms's rule
// (every gradient times clip / (norm + 1e-6) when the norm exceeds clip).
// It prints the loss of each of the first --log-first steps (8 digits, to
// compare with char_lm's curves_steps.csv), the mean train loss of every
// --print-every steps, the final validation bits per character over the
// first --eval-batches full batches of the validation split (char_lm's
// validation batches) and the steps per second of the training steps.
//
// generate: loads a char_lm checkpoint (<out>/model.safetensors) and
// continues --prompt by --tokens bytes greedily through the eager KV-cache
// forward (GptTorch::generate_greedy, GptGenerator's rule when the cache is
// full), printing the text as `char_lm --generate --greedy` does and the
// tokens per second on stderr.
//
//   char_lm --steps 300 --minutes 0 --save-init init.safetensors --out lm
//   char_lm_torch train --init init.safetensors --steps 300 --threads 1
//   char_lm_torch generate --checkpoint lm/model.safetensors --prompt "Q: " --tokens 256
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "gpt_torch.hpp"
#include "ms/data/text.hpp"
#include "ms/kernels/parallel.hpp"
#include "ms/nn/optim.hpp"
#include "openblas_core.hpp"

namespace {

// --name value pairs; ms::ValueError for a name not in `known` or one without a value.
using Args = std::map<std::string, std::string>;

Args parse_args(int argc, char** argv, const Args& known) {
  Args a = known;
  for (int i = 2; i < argc; i += 2) {
    const std::string key = argv[i];
    MS_CHECK(key.rfind("--", 0) == 0 && known.count(key.substr(2)) == 1, ms::ValueError,
             "char_lm_torch ", argv[1], ": unknown argument '", key, "'");
    MS_CHECK(i + 1 < argc, ms::ValueError, "char_lm_torch ", argv[1], ": ", key, " needs a value");
    a[key.substr(2)] = argv[i + 1];
  }
  return a;
}

std::int64_t int_arg(const Args& a, const std::string& k) {
  return bench::parse_number<std::int64_t>(a.at(k), "char_lm_torch --" + k);
}
double real_arg(const Args& a, const std::string& k) {
  return bench::parse_number<double>(a.at(k), "char_lm_torch --" + k);
}

void set_threads(const Args& a) {
  const auto n = static_cast<int>(int_arg(a, "threads"));
  if (n <= 0) return;
  ms::set_num_threads(n);
  at::set_num_threads(n);
}

bench::GptTorch load_model(const std::string& path) {
  const ms::io::SafetensorsFile f = ms::io::load_safetensors(path);
  bench::GptTorch gpt(bench::gpt_config(f.metadata, path));
  gpt.load(f, path);
  return gpt;
}

// The rate of ms::optim::WarmupCosineLR(opt, warmup, total, min_lr) after n steps.
double lr_at(double base, std::int64_t warmup, std::int64_t total, double min_lr, std::int64_t n) {
  if (n < warmup) return base * static_cast<double>(n) / static_cast<double>(warmup);
  return ms::optim::cosine_lr(base, min_lr, n - warmup, total - warmup);
}

// char_lm's validation: the mean loss (nats) of the first `batches` full batches.
double validation_loss(const bench::GptTorch& gpt, ms::data::ByteTextLoader& loader,
                       std::int64_t batch, std::int64_t batches) {
  torch::NoGradGuard g;
  double total = 0;
  std::int64_t n = 0;
  for (auto& [x, y] : loader) {
    if (n == batches) break;
    if (x.dim(0) != batch) continue;
    total += bench::gpt_loss(gpt, x, y).item<double>();
    ++n;
  }
  return n > 0 ? total / static_cast<double>(n) : std::nan("");
}

// The training side of `train`: the model, its optimizer and the timing.
struct Trainer {
  Trainer(const Args& a, bench::GptTorch model)
      : gpt(std::move(model)),
        opt(gpt.parameters(), torch::optim::AdamWOptions(real_arg(a, "lr"))
                                  .betas({0.9, 0.999})
                                  .eps(1e-8)
                                  .weight_decay(real_arg(a, "weight-decay"))),
        base(real_arg(a, "lr")),
        clip(real_arg(a, "clip")),
        steps(int_arg(a, "steps")),
        warmup(std::min(int_arg(a, "warmup"), steps - 1)) {}

  // One step on batch (x, y) as char_lm's, after `done` steps; returns the loss.
  double step(const ms::Tensor& x, const ms::Tensor& y, std::int64_t done) {
    const auto t0 = std::chrono::steady_clock::now();
    static_cast<torch::optim::AdamWOptions&>(opt.param_groups()[0].options())
        .lr(lr_at(base, warmup, steps, base / 10, done));
    opt.zero_grad();
    torch::Tensor loss = bench::gpt_loss(gpt, x, y);
    loss.backward();
    bench::clip_grad_norm(gpt.parameters(), clip);
    opt.step();
    const double v = loss.item<double>();
    if (done > 0)  // as char_lm: the first step (allocator warm-up here) is left out
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return v;
  }

  bench::GptTorch gpt;
  torch::optim::AdamW opt;
  double base, clip;
  std::int64_t steps, warmup;
  double seconds = 0;  // in step() after the first: forward, backward, clipping, update
};

int train(const Args& a) {
  set_threads(a);
  Trainer t(a, load_model(a.at("init")));
  const std::int64_t context = t.gpt.config.block_size, batch = int_arg(a, "batch");
  const std::int64_t log_first = int_arg(a, "log-first"), every = int_arg(a, "print-every");
  MS_CHECK(t.steps > 0 && batch > 0 && every > 0, ms::ValueError,
           "char_lm_torch train: --steps, --batch and --print-every must be > 0");
  const ms::data::FortunesCorpus corpus(a.at("data-dir"));
  ms::data::ByteTextLoader train_batches(
      ms::data::ByteTextDataset(corpus.stream(ms::data::TextSplit::kTrain), context, 1,
                                "training stream"),
      {.batch_size = batch, .drop_last = true, .seed = std::stoull(a.at("seed"))});
  ms::data::ByteTextLoader val_batches(
      ms::data::ByteTextDataset(corpus.stream(ms::data::TextSplit::kValidation), context, context,
                                "validation stream"),
      {.batch_size = batch, .shuffle = false});
  std::printf(
      "LibTorch %d threads; model from %s: %lld layers, d_model %lld, %lld heads, "
      "context %lld\n",
      at::get_num_threads(), a.at("init").c_str(), static_cast<long long>(t.gpt.config.n_layer),
      static_cast<long long>(t.gpt.config.n_embd), static_cast<long long>(t.gpt.config.n_head),
      static_cast<long long>(context));
  std::int64_t done = 0;
  double group = 0;
  while (done < t.steps) {
    for (auto& [x, y] : train_batches) {
      const double loss = t.step(x, y, done);
      ++done;
      group += loss;
      if (done <= log_first)
        std::printf("step %lld loss %.8f\n", static_cast<long long>(done), loss);
      if (done % every == 0 || done == t.steps) {
        const std::int64_t n = done % every == 0 ? every : done % every;
        std::printf("step %6lld  train loss %.4f (mean of the last %lld steps)\n",
                    static_cast<long long>(done), group / static_cast<double>(n),
                    static_cast<long long>(n));
        group = 0;
      }
      if (done == t.steps) break;
    }
  }
  const double v = validation_loss(t.gpt, val_batches, batch, int_arg(a, "eval-batches"));
  std::printf("final validation: %.4f bits per character\n", v / std::numbers::ln2);
  std::printf("training: %lld steps; steps 2-%lld, the step alone: %.3f steps/s\n",
              static_cast<long long>(done), static_cast<long long>(done),
              static_cast<double>(done - 1) / t.seconds);
  return 0;
}

int generate(const Args& a) {
  set_threads(a);
  const bench::GptTorch gpt = load_model(a.at("checkpoint"));
  const std::string text = a.at("prompt");
  std::vector<std::int64_t> prompt(text.begin(), text.end());
  for (auto& c : prompt) c = static_cast<unsigned char>(c);
  if (prompt.empty()) prompt.push_back(ms::data::FortunesCorpus::kSeparator);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::int64_t> out = gpt.generate_greedy(prompt, int_arg(a, "tokens"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string shown = text;
  for (std::int64_t t : out)  // as char_lm prints it
    shown += t == ms::data::FortunesCorpus::kSeparator ? std::string("\n%\n")
                                                       : std::string(1, static_cast<char>(t));
  std::printf("%s\n", shown.c_str());
  std::fprintf(stderr, "generated %lld bytes in %.2f s (%.1f tokens/s) with %d LibTorch threads\n",
               static_cast<long long>(out.size()), s, static_cast<double>(out.size()) / s,
               at::get_num_threads());
  return 0;
}

const Args kTrainArgs = {{"init", ""},
                         {"steps", "5000"},
                         {"batch", "32"},
                         {"lr", "1e-3"},
                         {"warmup", "100"},
                         {"clip", "1.0"},
                         {"weight-decay", "0.1"},
                         {"eval-batches", "16"},
                         {"seed", "1"},
                         {"threads", "0"},
                         {"print-every", "100"},
                         {"log-first", "5"},
                         {"data-dir", std::string(ms::data::kFortunesDir)}};
const Args kGenerateArgs = {
    {"checkpoint", ""}, {"prompt", ""}, {"tokens", "256"}, {"threads", "0"}};

}  // namespace

int main(int argc, char** argv) {
  bench::use_best_openblas(argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "train" && mode != "generate") {
    std::fprintf(stderr,
                 "usage: char_lm_torch train --init PATH [--steps N --threads T ...]\n"
                 "       char_lm_torch generate --checkpoint PATH --prompt TEXT [--tokens N]\n");
    return 2;
  }
  try {
    const Args a = parse_args(argc, argv, mode == "train" ? kTrainArgs : kGenerateArgs);
    MS_CHECK(!a.at(mode == "train" ? "init" : "checkpoint").empty(), ms::ValueError,
             "char_lm_torch ", mode, ": --", mode == "train" ? "init" : "checkpoint",
             " PATH is required");
    return mode == "train" ? train(a) : generate(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "char_lm_torch: %s\n", e.what());
    return 1;
  }
}
