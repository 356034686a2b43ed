#include "ms/jit/dump.hpp"

#include <nlohmann/json.hpp>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>

#include "ms/jit/jit.hpp"
#include "ms/ops/op.hpp"

namespace ms {
namespace {
std::mutex g_dump_mu;
std::set<std::string, std::less<>>& marked() {
  static std::set<std::string, std::less<>> s;
  return s;
}
std::filesystem::path& dir() {
  static std::filesystem::path d = [] {
    const char* env = std::getenv("MS_DUMP_DIR");
    return std::filesystem::path(env && *env ? env : "ms_dump");
  }();
  return d;
}

// The configuration in use, and whether the environment was read (at first use).
struct ConfigState {
  std::optional<DumpConfig> config;
  bool env_read = false;
};
ConfigState& config_state() {
  static ConfigState s;
  return s;
}

// The iteration ranges of `text` ("all": none, meaning every iteration);
// nullopt when the text is not of the form "0|5-8|100-120".
std::optional<std::vector<std::pair<std::int64_t, std::int64_t>>> parse_iterations(
    std::string_view text) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  if (text == "all") return out;
  auto number = [](std::string_view t, std::int64_t& v) {
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return !t.empty() && ec == std::errc() && end == t.data() + t.size() && v >= 0;
  };
  while (true) {
    const std::size_t bar = text.find('|');
    const std::string_view part = text.substr(0, bar);
    const std::size_t dash = part.find('-');
    std::int64_t a = 0, b = 0;
    if (dash == std::string_view::npos) {
      if (!number(part, a)) return std::nullopt;
      b = a;
    } else if (!number(part.substr(0, dash), a) || !number(part.substr(dash + 1), b) || b < a) {
      return std::nullopt;
    }
    out.emplace_back(a, b);
    if (bar == std::string_view::npos) return out;
    text.remove_prefix(bar + 1);
  }
}

[[noreturn]] void bad_key(std::string_view source, std::string_view key, std::string_view expected,
                          const nlohmann::json& given) {
  std::string g = given.is_null() ? std::string("nothing (the key is missing)") : given.dump();
  if (g.size() > 80) g = g.substr(0, 77) + "...";
  ::ms::detail::raise<ValueError>("dump config ", source, ": key '", key, "': expected ", expected,
                                  ", given ", g);
}

// An integer in [0, hi] at `key` of `c`.
int int_in(const nlohmann::json& c, std::string_view source, const char* key, int hi) {
  const nlohmann::json v = c.contains(key) ? c.at(key) : nlohmann::json();
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > hi)
    bad_key(source, std::string("common_dump_settings.") + key,
            ::ms::detail::str_cat("an integer from 0 to ", hi), v);
  return v.get<int>();
}

// A non-empty string at `key` of `c`.
std::string text_at(const nlohmann::json& c, std::string_view source, const char* key) {
  const nlohmann::json v = c.contains(key) ? c.at(key) : nlohmann::json();
  if (!v.is_string() || v.get<std::string>().empty())
    bad_key(source, std::string("common_dump_settings.") + key, "a non-empty string", v);
  return v.get<std::string>();
}

std::vector<std::string> kernels_at(const nlohmann::json& c, std::string_view source, int mode) {
  const char* key = "common_dump_settings.kernels";
  const nlohmann::json v = c.contains("kernels") ? c.at("kernels") : nlohmann::json::array();
  if (!v.is_array()) bad_key(source, key, "a list of op names", v);
  std::vector<std::string> out;
  for (const nlohmann::json& k : v) {
    if (!k.is_string()) bad_key(source, key, "a list of op names", k);
    try {
      ops::op(k.get<std::string>());
    } catch (const ValueError&) {
      bad_key(source, key, "op-table names (as set_dump takes: \"matmul\")", k);
    }
    out.push_back(k.get<std::string>());
  }
  if (mode == 1 && out.empty()) bad_key(source, key, "at least one op name when dump_mode is 1", v);
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MS_CHECK(in.good(), ValueError, "set_dump_config: cannot read the dump config file '", path, "'");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// Parses `path_or_json` (a file, or JSON text starting with '{').
DumpConfig load_config(const std::string& path_or_json) {
  const std::size_t first = path_or_json.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && path_or_json[first] == '{')
    return parse_dump_config(path_or_json, "set_dump_config");
  return parse_dump_config(read_text(path_or_json), path_or_json);
}

// The configuration in use (reads the environment once); call with g_dump_mu held.
const std::optional<DumpConfig>& config_locked() {
  ConfigState& st = config_state();
  if (!st.env_read) {
    st.env_read = true;
    const char* env = std::getenv("MS_DUMP_CONFIG");
    if (env == nullptr || *env == 0) env = std::getenv("MINDSPORE_DUMP_CONFIG");
    if (env != nullptr && *env != 0) st.config = parse_dump_config(read_text(env), env);
  }
  return st.config;
}

// The marked cells' scopes entered on this thread (cell, name), outermost first.
thread_local std::vector<std::pair<const void*, std::string>> t_scopes;
thread_local std::string t_scope;  // their names joined by '-'
std::map<const void*, std::int64_t>& cell_calls() {
  static std::map<const void*, std::int64_t> m;
  return m;
}
}  // namespace

bool DumpConfig::iteration_selected(std::int64_t it) const {
  const auto ranges = parse_iterations(iteration);
  if (!ranges || ranges->empty()) return true;
  for (const auto& [a, b] : *ranges)
    if (it >= a && it <= b) return true;
  return false;
}

DumpConfig parse_dump_config(std::string_view json, std::string_view source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    ::ms::detail::raise<ValueError>("dump config ", source, ": not valid JSON: ", e.what());
  }
  if (!j.is_object() || !j.contains("common_dump_settings") ||
      !j.at("common_dump_settings").is_object())
    bad_key(source, "common_dump_settings", "an object",
            j.is_object() && j.contains("common_dump_settings") ? j.at("common_dump_settings")
                                                                : nlohmann::json());
  const nlohmann::json& c = j.at("common_dump_settings");
  DumpConfig cfg;
  cfg.dump_mode = int_in(c, source, "dump_mode", 2);
  cfg.path = text_at(c, source, "path");
  cfg.net_name = text_at(c, source, "net_name");
  cfg.iteration = text_at(c, source, "iteration");
  if (!parse_iterations(cfg.iteration))
    bad_key(source, "common_dump_settings.iteration", "\"all\" or ranges such as \"0|5-8|100-120\"",
            c.at("iteration"));
  cfg.input_output = static_cast<DumpInputOutput>(int_in(c, source, "input_output", 2));
  cfg.kernels = kernels_at(c, source, cfg.dump_mode);
  if (c.contains("saved_data") && c.at("saved_data") != "tensor")
    bad_key(source, "common_dump_settings.saved_data", "\"tensor\" (ms writes tensors only)",
            c.at("saved_data"));
  return cfg;
}

void set_dump_config(const std::string& path_or_json) {
  std::optional<DumpConfig> cfg;
  if (!path_or_json.empty()) cfg = load_config(path_or_json);
  {
    std::lock_guard<std::mutex> lock(g_dump_mu);
    config_state().env_read = true;
    config_state().config = std::move(cfg);
  }
  compiler::bump_hook_version();  // graphs compiled before recompile
}

std::optional<DumpConfig> dump_config() {
  std::lock_guard<std::mutex> lock(g_dump_mu);
  return config_locked();
}

void set_dump(std::string_view target, bool enabled) {
  ops::op(target);  // ValueError for an unknown op
  {
    std::lock_guard<std::mutex> lock(g_dump_mu);
    if (enabled)
      marked().emplace(target);
    else if (auto it = marked().find(target); it != marked().end())
      marked().erase(it);
  }
  compiler::bump_hook_version();  // graphs compiled before recompile
}

bool dump_enabled(std::string_view target) {
  std::lock_guard<std::mutex> lock(g_dump_mu);
  const std::optional<DumpConfig>& cfg = config_locked();
  if (!cfg || cfg->dump_mode == 2) return marked().find(target) != marked().end();
  if (cfg->dump_mode == 0) return true;
  for (const std::string& k : cfg->kernels)
    if (k == target) return true;
  return false;
}

void set_dump_dir(const std::filesystem::path& d) {
  std::lock_guard<std::mutex> lock(g_dump_mu);
  dir() = d;
}

std::filesystem::path dump_dir() {
  std::lock_guard<std::mutex> lock(g_dump_mu);
  if (const std::optional<DumpConfig>& cfg = config_locked()) return cfg->path / cfg->net_name;
  return dir();
}

namespace compiler::detail {

DumpSelection dump_selection(std::int64_t it) {
  std::lock_guard<std::mutex> lock(g_dump_mu);
  const std::optional<DumpConfig>& cfg = config_locked();
  if (!cfg) return {true, true};
  if (!cfg->iteration_selected(it)) return {};
  return {cfg->input_output != DumpInputOutput::Output,
          cfg->input_output != DumpInputOutput::Input};
}

bool cell_dumps_active() {
  std::lock_guard<std::mutex> lock(g_dump_mu);
  const std::optional<DumpConfig>& cfg = config_locked();
  return !cfg || cfg->dump_mode == 2;
}

const std::string& current_dump_scope() { return t_scope; }

std::int64_t enter_dump_scope(const void* cell, const std::string& name, bool eager) {
  t_scopes.emplace_back(cell, name);
  t_scope += (t_scope.empty() ? "" : "-") + name;
  std::lock_guard<std::mutex> lock(g_dump_mu);
  return eager ? cell_calls()[cell]++ : cell_calls()[cell];
}

void leave_dump_scope() {
  t_scopes.pop_back();
  t_scope.clear();
  for (const auto& [c, n] : t_scopes) t_scope += (t_scope.empty() ? "" : "-") + n;
}

bool in_dump_scope(const void* cell) {
  for (const auto& [c, n] : t_scopes)
    if (c == cell) return true;
  return false;
}

void forget_dump_cell(const void* cell) {
  std::lock_guard<std::mutex> lock(g_dump_mu);
  cell_calls().erase(cell);
}

namespace {
DumpWriter& writer() {
  static DumpWriter w;
  return w;
}
}  // namespace

DumpWriter set_dump_writer(DumpWriter w) {
  std::lock_guard<std::mutex> lock(g_dump_mu);
  std::swap(writer(), w);
  return w;
}

void dump_tensor(const Tensor& t, const std::string& name) {
  const std::filesystem::path d = dump_dir();
  const std::string path = (d / (name + ".npy")).string();
  DumpWriter write;
  {
    std::lock_guard<std::mutex> lock(g_dump_mu);
    write = writer();
  }
  MS_CHECK(static_cast<bool>(write), ValueError, "set_dump: cannot write ", path,
           ": no dump writer is installed (ms's io stage, which installs it, is not linked)");
  DType dt = t.dtype();
  if (dt == DType::Float16 || dt == DType::BFloat16) dt = DType::Float32;
  if (dt == DType::Int4) dt = DType::Int8;
  const Tensor c = t.to(dt);  // dense, in a type NumPy knows
  try {
    write(d.string(), path, c);
  } catch (const std::exception& e) {
    ::ms::detail::raise<ValueError>("set_dump: cannot write ", path, ": ", e.what());
  }
}

}  // namespace compiler::detail
}  // namespace ms
