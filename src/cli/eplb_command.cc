#include "cli/eplb_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_replace.h"
#include "policy/eplb.h"
#include "policy/eplb_incremental.h"

namespace myriad::cli {

EplbCommand::EplbCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("eplb", "Place replicated MoE experts on GPUs (DeepSeek's EPLB)");
  cmd_->add_option("--loads", loads_path_,
                   "Expert loads: CSV (one row per layer, optional header line) or JSON "
                   "(array of arrays)")
      ->required();
  cmd_->add_option("--replicas", replicas_,
                   "Physical experts per layer (a multiple of --gpus; at most 64 per logical expert, and "
                   "layers x experts x (replicas - experts + 1) at most 2^28)")
      ->required();
  cmd_->add_option("--gpus", gpus_, "GPUs of the unit (a multiple of --nodes)")->required();
  cmd_->add_option("--groups", groups_,
                   "Expert groups (hierarchical policy when a multiple of --nodes)")
      ->capture_default_str();
  cmd_->add_option("--nodes", nodes_, "Nodes of the unit")->capture_default_str();
  cmd_->add_option("--format", format_, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  cmd_->add_option("--ties", ties_,
                   "Order of equal loads: stable (torch.sort stable=True) or std-sort (torch's "
                   "std::sort-based CPU sort)")
      ->check(CLI::IsMember({"stable", "std-sort"}))
      ->capture_default_str();
  cmd_->add_option("--from-loads", from_loads_path_,
                   "Loads the running placement was computed from (same shape as --loads): print "
                   "the incremental re-placement from it instead of a fresh one");
  cmd_->add_option("--tolerance", tolerance_,
                   "With --from-loads: how far above the fresh placement's max/mean a layer may stay")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

namespace {

struct Loads {
  std::vector<double> values;  // [layers x experts]
  int layers = 0;
  int experts = 0;
};

absl::Status Bad(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

std::pair<size_t, size_t> LineColumn(std::string_view text, size_t pos) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n')
      ++line, col = 1;
    else
      ++col;
  }
  return {line, col};
}

// Calls `visit(pos, c)` for each character of JSON `text` outside strings (an opening quote
// included, the string's contents not) until it returns false.
template <typename Visit>
void ScanOutsideStrings(std::string_view text, Visit visit) {
  bool in_string = false, escaped = false;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (!visit(pos, c)) return;
  }
}

// nlohmann::json keeps no source positions, so once the text is known to be valid JSON this
// finds where row `row` (or its element `elem`) of the top-level array starts.
size_t JsonValueOffset(std::string_view text, size_t row, std::optional<size_t> elem) {
  size_t depth = 0, row_i = 0, elem_i = 0, found = 0;
  bool want_value = false;
  ScanOutsideStrings(text, [&](size_t pos, char c) {
    if (want_value && !std::isspace(static_cast<unsigned char>(c))) {
      want_value = false;
      if (row_i == row && ((depth == 1 && !elem) || (depth == 2 && elem && elem_i == *elem))) {
        found = pos;
        return false;
      }
    }
    switch (c) {
      case '[':
        ++depth;
        if (depth == 2) elem_i = 0;
        want_value = depth <= 2;
        break;
      case '{':
        ++depth;
        break;
      case ']':
      case '}':
        --depth;
        break;
      case ',':
        if (depth == 1) ++row_i, want_value = true;
        if (depth == 2) ++elem_i, want_value = true;
        break;
      default:
        break;
    }
    return true;
  });
  return found;
}

// Loads nest two deep (rows of numbers). Deeper text is refused before it is parsed or
// printed: both recurse once per level, and 100,000 levels overflow the stack.
constexpr int kMaxJsonDepth = 2;

std::optional<size_t> FirstTooDeep(std::string_view text) {
  std::optional<size_t> at;
  int depth = 0;
  ScanOutsideStrings(text, [&](size_t pos, char c) {
    if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        at = pos;
        return false;
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
    return true;
  });
  return at;
}

absl::StatusOr<Loads> ParseJsonLoads(const std::string& path, const std::string& text) {
  if (const auto deep = FirstTooDeep(text)) {
    const auto [line, col] = LineColumn(text, *deep);
    return Bad(fmt::format("{}:{}:{}: nested deeper than {} levels (expected an array of rows of numbers)", path,
                           line, col, kMaxJsonDepth));
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    const auto [line, col] = LineColumn(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    return Bad(fmt::format("{}:{}:{}: invalid JSON: {}", path, line, col, what));
  }
  auto where = [&](size_t row, std::optional<size_t> elem) {
    const auto [line, col] = LineColumn(text, JsonValueOffset(text, row, elem));
    return fmt::format("{}:{}:{}", path, line, col);
  };
  if (!j.is_array() || j.empty()) {
    return Bad(fmt::format("{}: expected a non-empty array of rows, one per layer", path));
  }
  Loads loads;
  for (size_t r = 0; r < j.size(); ++r) {
    const auto& row = j[r];
    if (!row.is_array() || row.empty()) {
      return Bad(fmt::format("{}: layer {}: expected a non-empty array of loads", where(r, {}), r));
    }
    if (r == 0) loads.experts = static_cast<int>(row.size());
    if (row.size() != static_cast<size_t>(loads.experts)) {
      return Bad(fmt::format("{}: layer {} has {} loads, expected {} (as layer 0)", where(r, {}), r,
                             row.size(), loads.experts));
    }
    for (size_t e = 0; e < row.size(); ++e) {
      if (!row[e].is_number()) {
        return Bad(fmt::format("{}: layer {}, expert {}: expected a number, got {}", where(r, e), r,
                               e, row[e].dump()));
      }
      const double v = row[e].get<double>();
      if (!(v >= 0) || !std::isfinite(v)) {
        return Bad(fmt::format("{}: layer {}, expert {}: load {} is negative or not finite",
                               where(r, e), r, e, v));
      }
      loads.values.push_back(v);
    }
  }
  loads.layers = static_cast<int>(j.size());
  return loads;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

absl::StatusOr<Loads> ParseCsvLoads(const std::string& path, const std::string& text) {
  Loads loads;
  size_t first_data_line = 0;
  bool seen_line = false;
  size_t line_no = 0;
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (Trim(line).empty()) continue;
    if (!seen_line) {
      seen_line = true;
      const char c = Trim(line).front();
      if (!std::isdigit(static_cast<unsigned char>(c)) && c != '-' && c != '+' && c != '.') {
        continue;  // a header line
      }
    }
    size_t fields = 0;
    size_t start = 0;
    for (;;) {
      const size_t comma = line.find(',', start);
      const std::string_view raw = line.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      const std::string_view field = Trim(raw);
      const size_t col =
          start + static_cast<size_t>(field.empty() ? 0 : field.data() - raw.data()) + 1;
      ++fields;
      const auto at = fmt::format("{}:{}:{}: field {}", path, line_no, col, fields);
      if (field.empty()) return Bad(fmt::format("{}: empty field", at));
      std::string_view digits = field;
      if (digits.front() == '+') digits.remove_prefix(1);
      double v = 0;
      const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (ec != std::errc() || ptr != digits.data() + digits.size() || !std::isfinite(v)) {
        return Bad(fmt::format("{}: '{}' is not a finite number", at, field));
      }
      if (v < 0) return Bad(fmt::format("{}: negative load {}", at, field));
      loads.values.push_back(v);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (loads.layers == 0) {
      loads.experts = static_cast<int>(fields);
      first_data_line = line_no;
    } else if (fields != static_cast<size_t>(loads.experts)) {
      return Bad(fmt::format("{}:{}: {} loads, expected {} (as on line {})", path, line_no, fields,
                             loads.experts, first_data_line));
    }
    ++loads.layers;
  }
  if (loads.layers == 0)
    return Bad(fmt::format("{}: no loads (expected one CSV row per layer)", path));
  return loads;
}

absl::StatusOr<Loads> ReadLoads(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Bad(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return Bad(fmt::format("cannot read {}", path));
  const std::string text = buf.str();
  const auto first = text.find_first_not_of(" \t\r\n");
  const bool json = (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) ||
                    (first != std::string::npos && text[first] == '[');
  return json ? ParseJsonLoads(path, text) : ParseCsvLoads(path, text);
}

std::string Join(std::span<const int32_t> v) {
  return fmt::format("{}", fmt::join(v.begin(), v.end(), " "));
}

// Slots fetched when moving from the placement for --from-loads.
struct Moves {
  int64_t incremental = 0, fresh = 0;
  double fresh_imbalance = 0;  // mean over layers
};

void PrintTable(const policy::EplbPlacement& p, const policy::EplbImbalance& imb, int groups,
                int nodes, const std::optional<Moves>& moves) {
  const int per_gpu = p.experts_per_gpu();
  std::printf(
      "EPLB: %d layers, %d logical experts -> %d replicas on %d GPUs (%d per GPU), "
      "%d groups, %d nodes: %s policy\n",
      p.layers, p.logical_experts, p.physical_experts, p.num_gpus, per_gpu, groups, nodes,
      moves ? "incremental" : p.hierarchical ? "hierarchical" : "global");
  std::printf(
      "imbalance (max/mean GPU load): mean over layers %.4f -> %.4f, worst layer %.4f -> "
      "%.4f\n",
      imb.mean_before, imb.mean_after, imb.max_before, imb.max_after);
  if (moves) {
    std::printf("from --from-loads' placement: %lld slots fetched (a fresh placement: %lld, mean imbalance %.4f)\n",
                static_cast<long long>(moves->incremental), static_cast<long long>(moves->fresh),
                moves->fresh_imbalance);
  }
  const auto psz = static_cast<size_t>(p.physical_experts);
  const auto gpus = static_cast<size_t>(p.num_gpus);
  for (size_t l = 0; l < static_cast<size_t>(p.layers); ++l) {
    std::printf("\nlayer %zu: imbalance %.4f -> %.4f\n", l, imb.per_layer_before[l],
                imb.per_layer_after[l]);
    std::printf("  phy2log: %s\n",
                Join(std::span<const int32_t>(p.phy2log).subspan(l * psz, psz)).c_str());
    std::printf("  %5s %14s %14s  %s\n", "GPU", "load before", "load after", "experts");
    for (size_t g = 0; g < gpus; ++g) {
      const auto experts = std::span<const int32_t>(p.phy2log).subspan(
          l * psz + g * static_cast<size_t>(per_gpu), static_cast<size_t>(per_gpu));
      std::printf("  %5zu %14.2f %14.2f  %s\n", g, imb.gpu_load_before[l * gpus + g],
                  imb.gpu_load_after[l * gpus + g], Join(experts).c_str());
    }
  }
}

nlohmann::ordered_json ToJson(const policy::EplbPlacement& p, const policy::EplbImbalance& imb,
                              int groups, int nodes, const std::string& ties, const std::optional<Moves>& moves) {
  using nlohmann::ordered_json;
  const auto psz = static_cast<size_t>(p.physical_experts);
  const auto lsz = static_cast<size_t>(p.logical_experts);
  const auto gpus = static_cast<size_t>(p.num_gpus);
  const auto per_gpu = static_cast<size_t>(p.experts_per_gpu());
  const auto maxr = static_cast<size_t>(p.max_replicas);
  ordered_json j;
  j["config"] = {{"layers", p.layers},
                 {"logical_experts", p.logical_experts},
                 {"replicas", p.physical_experts},
                 {"groups", groups},
                 {"nodes", nodes},
                 {"gpus", p.num_gpus},
                 {"experts_per_gpu", per_gpu},
                 {"policy", moves ? "incremental" : p.hierarchical ? "hierarchical" : "global"},
                 {"ties", ties}};
  j["imbalance"] = {{"mean_before", imb.mean_before},
                    {"mean_after", imb.mean_after},
                    {"max_before", imb.max_before},
                    {"max_after", imb.max_after}};
  if (moves) {
    j["moves"] = {{"fetched_slots", moves->incremental},
                  {"fresh_fetched_slots", moves->fresh},
                  {"fresh_mean_imbalance", moves->fresh_imbalance}};
  }
  ordered_json layers = ordered_json::array();
  for (size_t l = 0; l < static_cast<size_t>(p.layers); ++l) {
    ordered_json layer;
    layer["layer"] = l;
    layer["imbalance_before"] = imb.per_layer_before[l];
    layer["imbalance_after"] = imb.per_layer_after[l];
    layer["phy2log"] =
        std::vector<int32_t>(p.phy2log.begin() + static_cast<ptrdiff_t>(l * psz),
                             p.phy2log.begin() + static_cast<ptrdiff_t>((l + 1) * psz));
    layer["logcnt"] =
        std::vector<int32_t>(p.logcnt.begin() + static_cast<ptrdiff_t>(l * lsz),
                             p.logcnt.begin() + static_cast<ptrdiff_t>((l + 1) * lsz));
    ordered_json log2phy = ordered_json::array();
    for (size_t e = 0; e < lsz; ++e) {
      const auto first = p.log2phy.begin() + static_cast<ptrdiff_t>((l * lsz + e) * maxr);
      log2phy.push_back(std::vector<int32_t>(first, first + static_cast<ptrdiff_t>(maxr)));
    }
    layer["log2phy"] = std::move(log2phy);
    ordered_json per_gpu_json = ordered_json::array();
    for (size_t g = 0; g < gpus; ++g) {
      const auto first = p.phy2log.begin() + static_cast<ptrdiff_t>(l * psz + g * per_gpu);
      per_gpu_json.push_back(
          {{"gpu", g},
           {"experts", std::vector<int32_t>(first, first + static_cast<ptrdiff_t>(per_gpu))},
           {"load_before", imb.gpu_load_before[l * gpus + g]},
           {"load_after", imb.gpu_load_after[l * gpus + g]}});
    }
    layer["gpus"] = std::move(per_gpu_json);
    layers.push_back(std::move(layer));
  }
  j["layers"] = std::move(layers);
  return j;
}

}  // namespace

namespace {

// Bounds --replicas by what it is replicating, before the placement's tables are allocated:
// log2phy holds layers x experts x (the most copies of one expert) entries.
absl::Status CheckReplicas(const Loads& loads, int replicas) {
  constexpr int64_t kMaxPerExpert = 64;
  constexpr int64_t kMaxTableEntries = int64_t{1} << 28;
  if (replicas > kMaxPerExpert * loads.experts) {
    return Bad(fmt::format("--replicas {} is more than {} per logical expert ({} experts: at most {})", replicas,
                           kMaxPerExpert, loads.experts, kMaxPerExpert * loads.experts));
  }
  const int64_t entries = int64_t{loads.layers} * loads.experts * std::max<int64_t>(1, replicas - loads.experts + 1);
  if (entries > kMaxTableEntries) {
    return Bad(fmt::format("--replicas {}: {} layers x {} experts x up to {} copies is {} table entries, more than "
                           "the maximum of {}",
                           replicas, loads.layers, loads.experts, replicas - loads.experts + 1, entries,
                           kMaxTableEntries));
  }
  return absl::OkStatus();
}

}  // namespace

int EplbCommand::Run() {
  if (!std::isfinite(tolerance_)) {
    std::fprintf(stderr, "myriad eplb: --tolerance: expected a finite number, got %g\n", tolerance_);
    return 2;
  }
  auto loads = ReadLoads(loads_path_);
  if (loads.ok()) {
    if (absl::Status st = CheckReplicas(*loads, replicas_); !st.ok()) loads = st;
  }
  if (!loads.ok()) {
    std::fprintf(stderr, "myriad eplb: %s\n", std::string(loads.status().message()).c_str());
    return 2;
  }
  auto placement = policy::RebalanceExperts(
      loads->values, loads->layers, loads->experts, replicas_, groups_, nodes_, gpus_,
      ties_ == "std-sort" ? policy::EplbTies::kStdSort : policy::EplbTies::kStable);
  if (!placement.ok()) {
    // The policy names its parameters; the user knows them by their flags.
    const std::string file_experts = fmt::format("the experts per layer in {}", loads_path_);
    const std::string message = absl::StrReplaceAll(std::string(placement.status().message()),
                                                    {{"num_replicas", "--replicas"},
                                                     {"num_groups", "--groups"},
                                                     {"num_nodes", "--nodes"},
                                                     {"num_gpus", "--gpus"},
                                                     {"logical_experts", file_experts}});
    std::fprintf(stderr, "myriad eplb: %s\n", message.c_str());
    return 2;
  }
  std::optional<Moves> moves;
  if (!from_loads_path_.empty()) {
    auto from = ReadLoads(from_loads_path_);
    if (from.ok() && (from->layers != loads->layers || from->experts != loads->experts)) {
      from = Bad(fmt::format("{} has {} x {} loads, {} has {} x {}", from_loads_path_, from->layers, from->experts,
                             loads_path_, loads->layers, loads->experts));
    }
    if (!from.ok()) {
      std::fprintf(stderr, "myriad eplb: %s\n", std::string(from.status().message()).c_str());
      return 2;
    }
    auto current = policy::RebalanceExperts(from->values, from->layers, from->experts, replicas_, groups_, nodes_, gpus_,
                                            ties_ == "std-sort" ? policy::EplbTies::kStdSort : policy::EplbTies::kStable);
    auto fresh_imbalance = policy::MeasureImbalance(loads->values, *placement);
    auto inc = current.ok() ? policy::ReplaceIncrementally(loads->values, *current, {}, *placement,
                                                           policy::IncrementalOptions{.tolerance = tolerance_})
                            : absl::StatusOr<policy::IncrementalReplacement>(current.status());
    if (!inc.ok() || !fresh_imbalance.ok()) {
      std::fprintf(stderr, "myriad eplb: %s\n",
                   std::string((inc.ok() ? fresh_imbalance.status() : inc.status()).message()).c_str());
      return 1;
    }
    moves = Moves{.incremental = inc->moved_slots,
                  .fresh = policy::CountFetchedSlots(*current, *placement),
                  .fresh_imbalance = fresh_imbalance->mean_after};
    *placement = std::move(inc->placement);
  }
  auto imbalance = policy::MeasureImbalance(loads->values, *placement);
  if (!imbalance.ok()) {
    std::fprintf(stderr, "myriad eplb: %s\n", std::string(imbalance.status().message()).c_str());
    return 1;
  }
  if (format_ == "json") {
    std::printf("%s\n", ToJson(*placement, *imbalance, groups_, nodes_, ties_, moves).dump(2).c_str());
  } else {
    PrintTable(*placement, *imbalance, groups_, nodes_, moves);
  }
  return 0;
}

}  // namespace myriad::cli
