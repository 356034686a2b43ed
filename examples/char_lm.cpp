// char_lm — a byte-level GPT language model on Debian's fortune cookies
// (`fortunes`, /usr/share/games/fortunes), and text sampled from it.
//
// Training: ms::nn::Gpt (vocabulary 256: a token is a byte) on random windows
// of the training split (ms::data::FortunesCorpus, ByteTextLoader), with one
// jitted step (forward, cross-entropy, gradients, clip_grad_norm, AdamW
// update, all in the graph), the rate warmed up and then cosine-decayed
// (WarmupCosineLR over --steps). Every --eval-every steps it prints the
// validation loss in bits per character (nats / ln 2) over the first
// --eval-batches batches of the validation split, saves the checkpoint
// (<out>/model.safetensors: the model, the optimizer, and the model's sizes in
// its metadata) and rewrites the curves (<out>/curves_steps.csv and .svg: the
// loss per step, its smoothed form and the validation points; <out>/curves.csv
// and .svg at the end). Training stops after --steps steps or --minutes
// minutes, whichever comes first (the cosine schedule spans --steps, so a
// run cut short by the time budget ends above the final rate).
//
// Generation (--generate "prompt"): loads <out>/model.safetensors, and
// continues the prompt by --tokens bytes at --temperature, drawing with
// --seed, through ms::nn::GptGenerator (a prefill graph and an increment graph
// over a key/value cache); it reports the bytes generated per second.
//
// --save-init PATH writes the freshly initialized model's parameters (ms's
// names, the sizes in the metadata as in the checkpoint) before the first
// step: bench/char_lm_torch starts its LibTorch twin from them.
//
//   char_lm            # 4 layers, d_model 192, 6 heads, context 128, <= 10 min
//   char_lm --steps 3 --layers 1 --d-model 32 --heads 2 --context 16 --out /tmp/lm
//   char_lm --out /tmp/lm --generate "Q: Why" --tokens 200 --temperature 0.8 --seed 3
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <ms/cell.hpp>
#include <ms/data/text.hpp>
#include <ms/io/safetensors.hpp>
#include <ms/kernels/parallel.hpp>
#include <ms/train/checkpoint.hpp>
#include <ms/train/fit.hpp>
#include <numbers>
#include <string>

namespace {

struct Flags {
  std::int64_t steps = 5000, layers = 4, d_model = 192, heads = 6, context = 128, batch = 32;
  std::int64_t warmup = 100, eval_every = 100, eval_batches = 16, seed = 1, tokens = 200;
  double minutes = 10.0, lr = 1e-3, clip = 1.0, dropout = 0.0, weight_decay = 0.1;
  double temperature = 0.8;
  int threads = 0;
  std::string out = "char_lm", data_dir = std::string(ms::data::kFortunesDir), generate, save_init;
  bool generate_set = false, greedy = false;
};

void add_flags(CLI::App& app, Flags& f) {
  auto positive = CLI::PositiveNumber;
  app.add_option("--steps", f.steps, "training steps (the cosine schedule's length)")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--minutes", f.minutes, "time budget of the training in minutes (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--layers", f.layers, "transformer blocks")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--d-model", f.d_model, "embedding size")->check(positive)->capture_default_str();
  app.add_option("--heads", f.heads, "attention heads (divide --d-model)")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--context", f.context, "bytes per window (the model's block size)")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--batch", f.batch, "windows per step")->check(positive)->capture_default_str();
  app.add_option("--lr", f.lr, "peak AdamW learning rate")->check(positive)->capture_default_str();
  app.add_option("--warmup", f.warmup, "warm-up steps")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--clip", f.clip, "gradient norm clip")->check(positive)->capture_default_str();
  app.add_option("--weight-decay", f.weight_decay, "AdamW's decoupled weight decay")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--dropout", f.dropout, "dropout in the blocks")
      ->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  app.add_option("--eval-every", f.eval_every, "validate, save and print every this many steps")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--eval-batches", f.eval_batches, "validation batches per evaluation")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--seed", f.seed, "seed of the initialization, the batches and the sampling")
      ->capture_default_str();
  app.add_option("--threads", f.threads, "compute threads (0: all cores)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  app.add_option("--data-dir", f.data_dir, "directory of fortune files (Debian: fortunes)")
      ->capture_default_str();
  app.add_option("--out", f.out, "directory of the checkpoint and the curves")
      ->capture_default_str();
  app.add_option("--generate", f.generate, "load the checkpoint and continue this prompt");
  app.add_option("--tokens", f.tokens, "bytes to generate")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--temperature", f.temperature, "sampling temperature (> 0)")
      ->capture_default_str();
  app.add_flag("--greedy", f.greedy, "take the most likely byte instead of sampling");
  app.add_option("--save-init", f.save_init,
                 "write the initial parameters (safetensors, ms's names) before the first step");
}

std::string checkpoint_path(const Flags& f) { return f.out + "/model.safetensors"; }

// The mean cross-entropy (nats) of the first `batches` full batches of `loader`.
template <class Loss>
double validation_loss(Loss& loss, ms::data::ByteTextLoader& loader, std::int64_t batch,
                       std::int64_t batches) {
  double total = 0;
  std::int64_t n = 0;
  for (auto& [x, y] : loader) {
    if (n == batches) break;
    if (x.dim(0) != batch) continue;  // one graph: full batches only
    total += loss(x, y).template item<double>();
    ++n;
  }
  return n > 0 ? total / static_cast<double>(n) : std::nan("");
}

// The model's sizes, as the checkpoint's (and --save-init's) metadata.
std::map<std::string, std::string> sizes(const ms::nn::GptConfig& c) {
  return {{"vocab_size", std::to_string(c.vocab_size)},
          {"block_size", std::to_string(c.block_size)},
          {"n_layer", std::to_string(c.n_layer)},
          {"n_head", std::to_string(c.n_head)},
          {"n_embd", std::to_string(c.n_embd)}};
}

void save(const Flags& f, const ms::nn::Gpt& gpt, const ms::optim::Optimizer& opt,
          std::int64_t step) {
  ms::save_checkpoint(checkpoint_path(f), gpt, &opt,
                      {.global_step = step, .extra = sizes(gpt.config)});
}

std::int64_t count_parameters(const ms::nn::Gpt& gpt) {
  std::int64_t n = 0;
  for (const auto& p : gpt.trainable_params()) n += p.numel();
  return n;
}

// One training run: the data, the model, the optimizer and its schedule, the
// compiled step and validation loss, the curves.
struct Run {
  explicit Run(const Flags& flags)
      : f(flags),
        corpus(f.data_dir),
        train_batches(
            ms::data::ByteTextDataset(corpus.stream(ms::data::TextSplit::kTrain), f.context, 1,
                                      "training stream"),
            {.batch_size = f.batch, .drop_last = true, .seed = static_cast<std::uint64_t>(f.seed)}),
        val_batches(ms::data::ByteTextDataset(corpus.stream(ms::data::TextSplit::kValidation),
                                              f.context, f.context, "validation stream"),
                    {.batch_size = f.batch, .shuffle = false}),
        gpt({.vocab_size = 256,
             .block_size = f.context,
             .n_layer = f.layers,
             .n_head = f.heads,
             .n_embd = f.d_model,
             .dropout = f.dropout}),
        opt(gpt.trainable_params(), {.lr = f.lr, .weight_decay = f.weight_decay}),
        sched(opt, std::min(f.warmup, f.steps - 1), f.steps, f.lr / 10),
        curves(f.out + "/curves", {.ema_decay = 0.98, .loss_metric = "val_loss"}) {}

  // Forward and cross-entropy in nats.
  ms::Tensor loss(const ms::Tensor& x, const ms::Tensor& y) {
    return ms::nn::cross_entropy(gpt(x), y);
  }
  double minutes() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 60.0;
  }
  void print_header() const {
    std::printf("fortunes: %zu training bytes, %zu validation bytes (%s)\n",
                train_batches.dataset().stream().size(), val_batches.dataset().stream().size(),
                f.data_dir.c_str());
    std::printf("model: %lld layers, d_model %lld, %lld heads, context %lld: %lld parameters\n",
                static_cast<long long>(f.layers), static_cast<long long>(f.d_model),
                static_cast<long long>(f.heads), static_cast<long long>(f.context),
                static_cast<long long>(count_parameters(gpt)));
  }
  // Validates, prints, saves; the validation loss becomes the step's metric.
  template <class EvalLoss>
  void evaluate(EvalLoss& eval_loss) {
    const double start = minutes();
    gpt.set_train(false);
    const double v = validation_loss(eval_loss, val_batches, f.batch, f.eval_batches);
    gpt.set_train(true);
    st.step_metrics["val_loss"] = v;
    st.step_metrics["val_bpc"] = v / std::numbers::ln2;
    st.metrics = st.step_metrics;
    std::printf(
        "step %6lld  train loss %.4f (smoothed %.4f)  validation %.4f bits/char  %.1f min\n",
        static_cast<long long>(st.global_step), st.loss, curves.loss_ema(), v / std::numbers::ln2,
        minutes());
    std::fflush(stdout);
    save(f, gpt, opt, st.global_step);
    eval_minutes += minutes() - start;
  }

  const Flags& f;
  ms::data::FortunesCorpus corpus;
  ms::data::ByteTextLoader train_batches, val_batches;
  ms::nn::Gpt gpt;
  ms::optim::AdamW opt;
  ms::optim::WarmupCosineLR sched;
  ms::train::CurveWriter curves;
  ms::train::TrainState st;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double eval_minutes = 0;  // spent in evaluate(): validation, printing, checkpoints
};

// Trains as the header says; returns the exit code.
int train(const Flags& f) {
  std::filesystem::create_directories(f.out);
  ms::manual_seed(static_cast<std::uint64_t>(f.seed));  // the initialization
  Run r(f);
  r.print_header();
  if (!f.save_init.empty())  // the initial weights, e.g. for bench/char_lm_torch
    ms::io::save_safetensors(f.save_init, r.gpt.state_dict(), sizes(r.gpt.config));
  auto step = ms::jit([&](const ms::Tensor& x, const ms::Tensor& y) {
    auto loss_fn = [&](const ms::Tensor& a, const ms::Tensor& b) { return r.loss(a, b); };
    auto [loss, grads] = ms::value_and_grad(
        loss_fn, {.position = std::nullopt, .weights = r.opt.parameters()})(x, y);
    r.opt.apply(ms::nn::clip_grad_norm(grads, f.clip).grads);
    return loss;
  });
  auto eval_loss = ms::jit([&](const ms::Tensor& x, const ms::Tensor& y) { return r.loss(x, y); });
  r.st.epochs = 1;
  r.st.steps_per_epoch = r.train_batches.size();
  r.t0 = std::chrono::steady_clock::now();
  r.gpt.set_train(true);
  double sum = 0, step_seconds = 0;
  bool done = false;
  while (!done) {
    for (auto& [x, y] : r.train_batches) {
      const auto s0 = std::chrono::steady_clock::now();
      r.st.loss = step(x, y).item<double>();
      r.sched.step();
      if (r.st.global_step > 0)  // the first step traces and compiles: not a step's time
        step_seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
      sum += r.st.loss;
      r.st.step = ++r.st.global_step;
      done = r.st.global_step >= f.steps || (f.minutes > 0 && r.minutes() >= f.minutes);
      r.st.step_metrics.clear();
      if (done || r.st.global_step % f.eval_every == 0) r.evaluate(eval_loss);
      r.curves.on_step_end(r.st);
      if (done) break;
    }
  }
  r.st.epoch_loss = sum / static_cast<double>(r.st.global_step);
  r.st.epoch_seconds = r.minutes() * 60.0;
  const double train_s = (r.minutes() - r.eval_minutes) * 60.0;
  std::printf(
      "training: %lld steps in %.2f s without validation; steps 2-%lld, the step "
      "alone: %.3f steps/s\n",
      static_cast<long long>(r.st.global_step), train_s, static_cast<long long>(r.st.global_step),
      static_cast<double>(r.st.global_step - 1) / step_seconds);
  r.curves.on_epoch_end(r.st);
  r.curves.on_train_end(r.st);
  std::printf("compiled graphs: train step %d, validation loss %d\n", step.compile_count(),
              eval_loss.compile_count());
  std::printf("final validation: %.4f bits per character\n", r.st.metrics["val_bpc"]);
  std::printf("checkpoint: %s\ncurves: %s/curves_steps.csv, %s/curves_steps.svg\n",
              checkpoint_path(f).c_str(), f.out.c_str(), f.out.c_str());
  return 0;
}

// A size from the checkpoint's metadata.
std::int64_t meta(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  MS_CHECK(it != m.end(), ms::ValueError, "char_lm --generate: the checkpoint has no '", key,
           "' entry (expected one written by char_lm)");
  return std::stoll(it->second);
}

// Loads the checkpoint and prints the prompt and its continuation.
int generate(const Flags& f) {
  const std::string path = checkpoint_path(f);
  const auto m = ms::io::load_safetensors(path).metadata;
  ms::nn::Gpt gpt({.vocab_size = meta(m, "vocab_size"),
                   .block_size = meta(m, "block_size"),
                   .n_layer = meta(m, "n_layer"),
                   .n_head = meta(m, "n_head"),
                   .n_embd = meta(m, "n_embd")});
  ms::load_checkpoint(path, gpt, nullptr, /*strict=*/true);
  std::vector<std::int64_t> prompt;
  for (unsigned char c : f.generate) prompt.push_back(c);
  if (prompt.empty()) prompt.push_back(ms::data::FortunesCorpus::kSeparator);
  ms::nn::GptGenerator gen(gpt);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::int64_t> out =
      gen.generate(prompt, {.tokens = f.tokens,
                            .temperature = f.temperature,
                            .greedy = f.greedy,
                            .seed = static_cast<std::uint64_t>(f.seed)});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string text = f.generate;
  for (std::int64_t t : out)  // the separator between fortunes shown as fortune files write it
    text += t == ms::data::FortunesCorpus::kSeparator ? std::string("\n%\n")
                                                      : std::string(1, static_cast<char>(t));
  std::cout << text << "\n";
  std::fprintf(stderr,
               "generated %lld bytes in %.2f s (%.1f tokens/s); compiled graphs: prefill %d, "
               "increment %d\n",
               static_cast<long long>(out.size()), s, static_cast<double>(out.size()) / s,
               gen.prefill_compile_count(), gen.increment_compile_count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a byte-level GPT on Debian's fortunes with ms, or sample text from it"};
  Flags f;
  add_flags(app, f);
  CLI11_PARSE(app, argc, argv);
  f.generate_set = app.count("--generate") > 0;
  try {
    if (f.threads > 0) ms::set_num_threads(f.threads);
    return f.generate_set ? generate(f) : train(f);
  } catch (const ms::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
