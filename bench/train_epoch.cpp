// bench/train_epoch.cpp — seconds per epoch, test accuracy and peak memory of
// training the Fashion-MNIST MLP (and the CNN with --cnn) in ms and in LibTorch
// C++, in the same run, with 1 and 2 threads; prints a markdown table.
//
//   train_epoch                       # MLP, 1 epoch, 1 and 2 threads
//   train_epoch --cnn --epochs 1      # the CNN too
//   train_epoch --threads 1 --seed 3 --data-dir /usr/share/datasets/fashion-mnist
//   train_epoch --cnn-only --threads 1 --pairs 5   # 5 alternated pairs, median ratio
//   train_epoch --cnn-only --threads 2 --prefetch 0 # batches made between steps
//
// Each measurement runs in its own child process, so each one's peak resident
// memory (getrusage) is its own: the ms children are this program re-executed
// with `--child` (this binary does not link LibTorch), the LibTorch children are
// `train_epoch_torch` next to it (bench/train_epoch_torch.cpp; built with
// -Dtorch=enabled). Both read the data through ms::data (the same IDX reader,
// the same DataLoader: batch 64, the same shuffled order from the seed, images
// normalized with mean 0.2860 and std 0.3530) and start from the same weights
// (ms's initialization with the seed, copied into the LibTorch model); both
// train with lr 0.05 and momentum 0.9 (ms::optim::Momentum and
// torch::optim::SGD compute the same update). Seconds per epoch: the training
// loop only (every batch of the epoch, the last partial one included; no
// evaluation); ms's first epoch includes compiling the jitted step (twice: the
// last batch of 32 has another shape). Below the table, where ms's first
// epoch goes: the two steps that compiled, the other steps, the time spent
// in the loader's begin() and ++ (waiting for, or making, the next batch),
// and the rest; epoch / steps is the epoch's seconds over the other steps'
// seconds scaled to every step.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "openblas_core.hpp"
#include "train_models.hpp"

namespace {

using bench::epoch::ChildArgs;

// ---------------------------------------------------------------- the ms child

template <class Net>
int run_ms(const ChildArgs& a) {
  const long start_rss = bench::epoch::current_rss_kib();
  ms::set_num_threads(a.threads);
  ms::default_generator().manual_seed(a.seed);
  bench::epoch::Data data(a);
  bench::MsTrainer<Net> t(0.05, 0.9);
  auto forward = ms::jit([&](const ms::Tensor& x) { return t.net(x); });

  std::vector<double> seconds;
  double epoch_loss = 0;
  // Where the first epoch's time goes: the steps that compiled, the other
  // steps, waiting for the loader's next batch (begin() and ++), the rest.
  double compile_s = 0, step_s = 0, fetch_s = 0;
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  for (int e = 0; e < a.epochs; ++e) {
    double sum = 0;
    std::int64_t steps = 0;
    const auto t0 = Clock::now();
    auto it = data.train.begin();
    if (e == 0) fetch_s += since(t0);
    while (it != data.train.end()) {
      const int compiles = t.step.compile_count();
      const auto s0 = Clock::now();
      sum += t.step(it->x, it->y).template item<float>();
      const double dt = since(s0);
      if (e == 0) (t.step.compile_count() != compiles ? compile_s : step_s) += dt;
      ++steps;
      const auto f0 = Clock::now();
      ++it;
      if (e == 0) fetch_s += since(f0);
    }
    seconds.push_back(since(t0));
    epoch_loss = sum / static_cast<double>(steps);
  }
  std::int64_t right = 0, total = 0;
  for (auto& b : data.test) {
    const ms::Tensor pred = ms::argmax(forward(b.x), 1);
    right += ms::sum(ms::eq(pred, b.y.to(ms::int64))).item<std::int64_t>();
    total += b.x.dim(0);
  }
  bench::epoch::print_result("ms", a, seconds,
                             static_cast<double>(right) / static_cast<double>(total), epoch_loss,
                             start_rss, static_cast<long>(t.step.compile_count()));
  std::printf("RESULT compile_sec=%.4f step_sec=%.4f fetch_sec=%.4f\n", compile_s, step_s, fetch_s);
  std::fflush(stdout);
  return 0;
}

// ---------------------------------------------------------------- the driver

struct Result {
  std::map<std::string, std::string> kv;
  double load_before = 0, load_after = 0;
  bool ok = false;
  double num(const std::string& k) const {
    auto it = kv.find(k);
    return it == kv.end() ? 0.0 : std::atof(it->second.c_str());
  }
};

double load1() {
  double l = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = 0;
    std::fclose(f);
  }
  return l;
}

std::string self_path() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  buf[n] = 0;
  return buf;
}

/// Runs `cmd` (a child), echoes its stderr as it goes, returns its RESULT line.
Result run_child(const std::string& cmd) {
  Result r;
  r.load_before = load1();
  std::fprintf(stderr, "running: %s (load %.2f)\n", cmd.c_str(), r.load_before);
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char line[4096];
  while (std::fgets(line, sizeof line, p) != nullptr) {
    if (std::strncmp(line, "RESULT ", 7) != 0) {
      std::fputs(line, stderr);
      continue;
    }
    char* save = nullptr;
    for (char* tok = strtok_r(line + 7, " \n", &save); tok != nullptr;
         tok = strtok_r(nullptr, " \n", &save)) {
      if (char* eq = std::strchr(tok, '=')) {
        *eq = 0;
        r.kv[tok] = eq + 1;
      }
    }
    r.ok = true;
  }
  const int status = pclose(p);
  r.ok = r.ok && status == 0;
  r.load_after = load1();
  return r;
}

int usage() {
  std::fprintf(stderr,
               "usage: train_epoch [--cnn] [--cnn-only] [--epochs N] [--threads 1,2] [--seed S] "
               "[--pairs N] [--prefetch P] [--data-dir DIR]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bench::use_best_openblas(argv);
  if (argc > 1 && std::strcmp(argv[1], "--child") == 0) {
    ChildArgs a;
    if (!bench::epoch::parse_child_args(argc, argv, 2, a)) return usage();
    try {
      return a.model == "mlp" ? run_ms<bench::MsMLP>(a) : run_ms<bench::MsCNN>(a);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ms child: %s\n", e.what());
      return 1;
    }
  }

  std::vector<std::string> models{"mlp"};
  std::vector<int> threads{1, 2};
  int epochs = 1;
  int pairs = 1;  // alternated (ms, LibTorch) runs per cell: this VM's speed drifts by minutes
  std::uint64_t seed = 1;
  std::string data_dir(ms::data::FashionMNIST::kDefaultDir);
  std::string prefetch = "2";
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const bool has_value = i + 1 < argc;
    if (k == "--cnn") {
      models = {"mlp", "cnn"};
    } else if (k == "--cnn-only") {
      models = {"cnn"};
    } else if (k == "--epochs" && has_value) {
      epochs = std::atoi(argv[++i]);
    } else if (k == "--pairs" && has_value) {
      pairs = std::atoi(argv[++i]);
    } else if (k == "--seed" && has_value) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (k == "--data-dir" && has_value) {
      data_dir = argv[++i];
    } else if (k == "--prefetch" && has_value) {
      prefetch = argv[++i];
    } else if (k == "--threads" && has_value) {
      threads.clear();
      for (const char* s = argv[++i]; *s != 0;) {
        threads.push_back(std::atoi(s));
        const char* c = std::strchr(s, ',');
        s = c ? c + 1 : s + std::strlen(s);
      }
    } else {
      return usage();
    }
  }
  if (epochs < 1 || pairs < 1 || threads.empty()) return usage();

  const std::string self = self_path();
  const std::string dir = self.substr(0, self.rfind('/') + 1);
  const std::string twin = dir + "train_epoch_torch";
  const bool have_torch = access(twin.c_str(), X_OK) == 0;
  if (!have_torch)
    std::fprintf(stderr, "no %s (configure with -Dtorch=enabled): ms only\n", twin.c_str());

  struct Row {
    std::string model;
    int nt;
    Result ms, torch;                   // the first pair (accuracy, RSS, compiles)
    std::vector<double> ms_s, torch_s;  // s/epoch of every pair that ran
    std::vector<double> ratios;         // LibTorch / ms per pair
    double load_lo = 1e9, load_hi = 0;
  };
  std::vector<Row> rows;
  for (const std::string& m : models)
    for (int nt : threads) {
      const std::string args = " --model " + m + " --threads " + std::to_string(nt) + " --epochs " +
                               std::to_string(epochs) + " --seed " + std::to_string(seed) +
                               " --prefetch " + std::to_string(std::atoll(prefetch.c_str())) +
                               " --data-dir '" + data_dir + "'";
      Row r{m, nt, {}, {}, {}, {}, {}};
      for (int k = 0; k < pairs; ++k) {
        // OMP_WAIT_POLICY unset in both: each library's default spinning.
        const Result ms = run_child("'" + self + "' --child" + args);
        const Result torch = have_torch ? run_child("'" + twin + "'" + args) : Result{};
        if (k == 0) r.ms = ms, r.torch = torch;
        r.ms.ok = r.ms.ok && ms.ok;
        if (have_torch) r.torch.ok = r.torch.ok && torch.ok;
        for (const Result* x : {&ms, &torch})
          if (x->ok) {
            r.load_lo = std::min({r.load_lo, x->load_before, x->load_after});
            r.load_hi = std::max({r.load_hi, x->load_before, x->load_after});
          }
        if (ms.ok) r.ms_s.push_back(ms.num("sec_per_epoch"));
        if (torch.ok) r.torch_s.push_back(torch.num("sec_per_epoch"));
        if (ms.ok && torch.ok && ms.num("sec_per_epoch") > 0)
          r.ratios.push_back(torch.num("sec_per_epoch") / ms.num("sec_per_epoch"));
      }
      rows.push_back(r);
    }

  std::printf(
      "Fashion-MNIST, batch 64, SGD lr 0.05 momentum 0.9, %d epoch(s), seed %llu; one child "
      "process per run, %d alternated (ms, LibTorch) pair(s) per row: s/epoch are medians, the "
      "speed-up is the median of the pairs' LibTorch s/epoch / ms s/epoch (> 1: ms faster; their "
      "range in brackets). RSS: peak (getrusage) and, in brackets, at the start of main "
      "(libraries loaded, no data), first pair.\n\n",
      epochs, static_cast<unsigned long long>(seed), pairs);
  std::printf(
      "| model | threads | ms s/epoch | LibTorch s/epoch | speed-up | ms test acc | LibTorch test "
      "acc | ms peak RSS | LibTorch peak RSS | load (1 min) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const std::size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
  };
  auto cell_s = [&](const Result& r, const std::vector<double>& s) {
    char b[64];
    std::snprintf(b, sizeof b, r.ok ? "%.2f" : "failed", median(s));
    return std::string(b);
  };
  auto cell_acc = [](const Result& r) {
    char b[64];
    std::snprintf(b, sizeof b, r.ok ? "%.2f%%" : "—", 100.0 * r.num("acc"));
    return std::string(b);
  };
  auto cell_rss = [](const Result& r) {
    char b[64];
    std::snprintf(b, sizeof b, r.ok ? "%.0f MB (%.0f)" : "—", r.num("peak_rss_kib") / 1024.0,
                  r.num("start_rss_kib") / 1024.0);
    return std::string(b);
  };
  for (const Row& r : rows) {
    std::string ratio = "—";
    if (r.ms.ok && r.torch.ok && !r.ratios.empty()) {
      char b[96];
      const auto [lo, hi] = std::minmax_element(r.ratios.begin(), r.ratios.end());
      if (r.ratios.size() > 1)
        std::snprintf(b, sizeof b, "**%.2fx** (%.2f-%.2f)", median(r.ratios), *lo, *hi);
      else
        std::snprintf(b, sizeof b, "**%.2fx**", r.ratios[0]);
      ratio = b;
    }
    char load[64];
    std::snprintf(load, sizeof load, "%.1f-%.1f", r.load_lo, r.load_hi);
    std::printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.model.c_str(), r.nt,
                cell_s(r.ms, r.ms_s).c_str(), cell_s(r.torch, r.torch_s).c_str(), ratio.c_str(),
                cell_acc(r.ms).c_str(), cell_acc(r.torch).c_str(), cell_rss(r.ms).c_str(),
                cell_rss(r.torch).c_str(), load);
  }
  if (epochs > 1) {
    std::printf("\nFirst epoch alone (s; ms's includes compiling the step):");
    for (const Row& r : rows)
      std::printf(" %s/%dt ms %.2f LibTorch %.2f;", r.model.c_str(), r.nt,
                  r.ms.num("first_epoch_sec"), r.torch.num("first_epoch_sec"));
    std::printf("\n");
  }
  std::printf(
      "\nWhere ms's epoch goes (first pair, first epoch): the steps that compiled, the other "
      "steps, waiting for the loader's next batch; epoch / steps = epoch s / the other steps' s "
      "scaled to all steps.\n\n");
  for (const Row& r : rows) {
    if (!r.ms.ok || r.ms.kv.count("step_sec") == 0) continue;
    const double epoch = r.ms.num("first_epoch_sec"), comp = r.ms.num("compile_sec"),
                 step = r.ms.num("step_sec"), fetch = r.ms.num("fetch_sec");
    std::printf(
        "- %s, %d thread(s): epoch %.2f s = compiling steps %.2f + other steps %.2f + waiting "
        "for batches %.2f + the rest %.2f; epoch / steps %.2f\n",
        r.model.c_str(), r.nt, epoch, comp, step, fetch, epoch - comp - step - fetch,
        step > 0 ? epoch / (step * (1 + 2.0 / 936)) : 0.0);
  }
  std::printf("\nms step graphs compiled per run:");
  for (const Row& r : rows)
    std::printf(" %s/%dt %s;", r.model.c_str(), r.nt,
                r.ms.kv.count("compiles") ? r.ms.kv.at("compiles").c_str() : "?");
  std::printf("\n");
  bool all_ok = true;
  for (const Row& r : rows) all_ok = all_ok && r.ms.ok && (!have_torch || r.torch.ok);
  return all_ok ? 0 : 1;
}
