#include "cli/calibrate_inputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <string_view>
#include <nlohmann/json.hpp>

#include "core/config_file.h"

namespace myriad::cli {
namespace {

using nlohmann::json;

class FileErrors {
 public:
  explicit FileErrors(std::string path) : path_(std::move(path)) {}
  absl::Status operator()(const std::string& field, const std::string& what) const {
    return absl::InvalidArgumentError(fmt::format("{}: {}: {}", path_, field, what));
  }

  // A finite number within [lo, hi].
  absl::StatusOr<double> Number(const json& v, const std::string& field, double lo, double hi) const {
    if (!v.is_number()) return (*this)(field, fmt::format("expected a number, got {}", v.type_name()));
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) return (*this)(field, fmt::format("must be between {} and {} (got {})", lo, hi, v.dump()));
    return x;
  }
  absl::StatusOr<int64_t> Integer(const json& v, const std::string& field, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer() && !(v.is_number_float() && v.get<double>() == std::floor(v.get<double>()))) {
      return (*this)(field, fmt::format("expected an integer, got {}", v.is_number() ? v.dump() : v.type_name()));
    }
    auto x = Number(v, field, static_cast<double>(lo), static_cast<double>(hi));
    if (!x.ok()) return x.status();
    return static_cast<int64_t>(*x);
  }
  absl::StatusOr<const json*> List(const json& root, const char* key) const {
    auto it = root.find(key);
    if (it == root.end()) {
      return (*this)(key, "missing (benchmark_serving writes the per-request lists with --save-result --save-detailed)");
    }
    if (!it->is_array()) return (*this)(key, fmt::format("expected a list, got {}", it->type_name()));
    if (it->empty()) return (*this)(key, "is empty");
    if (it->size() > static_cast<size_t>(kMaxCalibrationRequests)) {
      return (*this)(key, fmt::format("has {} entries, more than the {} allowed", it->size(), kMaxCalibrationRequests));
    }
    return &*it;
  }

 private:
  std::string path_;
};

#define MYRIAD_ASSIGN_OR_RETURN(lhs, expr) \
  auto lhs##_or = (expr);                  \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *lhs##_or

// How many requests were in flight: max_concurrency when the run capped it; every request at
// once for an unpaced run (request_rate "inf"); else Little's law over the run's throughput.
absl::StatusOr<int64_t> Concurrency(const json& root, const FileErrors& err, int64_t requests, double mean_e2e_s) {
  if (auto it = root.find("max_concurrency"); it != root.end() && !it->is_null()) {
    MYRIAD_ASSIGN_OR_RETURN(c, err.Integer(*it, "max_concurrency", 1, kMaxCalibrationConcurrency));
    return std::min(c, requests);
  }
  auto rate = root.find("request_rate");
  if (rate == root.end()) return err("request_rate", "missing (and max_concurrency is not set either)");
  if (rate->is_string() && rate->get<std::string>() == "inf") return std::min(requests, kMaxCalibrationConcurrency);
  if (!rate->is_number()) return err("request_rate", fmt::format("expected a number or \"inf\", got {}", rate->dump()));
  auto tput = root.find("request_throughput");
  if (tput == root.end()) return err("request_throughput", "missing (needed for a paced run without max_concurrency)");
  MYRIAD_ASSIGN_OR_RETURN(x, err.Number(*tput, "request_throughput", 1e-9, 1e9));
  return std::clamp<int64_t>(std::llround(x * mean_e2e_s), 1, std::min(requests, kMaxCalibrationConcurrency));
}

absl::StatusOr<BenchmarkFile> ParseServing(const json& root, const FileErrors& err, BenchmarkFile out) {
  out.format = "benchmark_serving";
  MYRIAD_ASSIGN_OR_RETURN(ins, err.List(root, "input_lens"));
  MYRIAD_ASSIGN_OR_RETURN(outs, err.List(root, "output_lens"));
  MYRIAD_ASSIGN_OR_RETURN(ttfts, err.List(root, "ttfts"));
  MYRIAD_ASSIGN_OR_RETURN(itls, err.List(root, "itls"));
  const size_t n = ins->size();
  for (auto [key, list] : {std::pair{"output_lens", outs}, std::pair{"ttfts", ttfts}, std::pair{"itls", itls}}) {
    if (list->size() != n) return err(key, fmt::format("has {} entries but input_lens has {}", list->size(), n));
  }
  struct Request {
    int64_t in, out;
    double ttft, itl;
    bool has_itl;
  };
  std::vector<Request> reqs;
  double e2e_sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string at = fmt::format("[{}]", i);
    MYRIAD_ASSIGN_OR_RETURN(in, err.Integer((*ins)[i], "input_lens" + at, 1, kMaxCalibrationTokens));
    MYRIAD_ASSIGN_OR_RETURN(o, err.Integer((*outs)[i], "output_lens" + at, 0, kMaxCalibrationTokens));
    MYRIAD_ASSIGN_OR_RETURN(ttft, err.Number((*ttfts)[i], "ttfts" + at, 0, 86'400));
    const json& gaps = (*itls)[i];
    if (!gaps.is_array()) return err("itls" + at, fmt::format("expected a list of seconds, got {}", gaps.type_name()));
    double sum = 0;
    for (size_t j = 0; j < gaps.size(); ++j) {
      MYRIAD_ASSIGN_OR_RETURN(g, err.Number(gaps[j], fmt::format("itls{}[{}]", at, j), 0, 86'400));
      sum += g;
    }
    // vLLM records a failed request with no output and a TTFT of 0.
    if (o == 0 || ttft <= 0) {
      ++out.skipped_failed;
      continue;
    }
    const bool has_itl = !gaps.empty() && sum > 0;
    reqs.push_back({in, o, ttft, has_itl ? sum / static_cast<double>(gaps.size()) : 0, has_itl});
    e2e_sum += ttft + sum;
  }
  if (reqs.empty()) return err("ttfts", "no successful request (every one has output_lens 0 or ttfts 0)");
  MYRIAD_ASSIGN_OR_RETURN(c, Concurrency(root, err, static_cast<int64_t>(reqs.size()), e2e_sum / static_cast<double>(reqs.size())));
  for (const Request& r : reqs) {
    out.samples.push_back({.metric = perf::FitMetric::kTtft, .input_tokens = r.in, .output_tokens = r.out,
                           .concurrency = c, .measured_s = r.ttft});
    if (r.has_itl) {
      out.samples.push_back({.metric = perf::FitMetric::kItl, .input_tokens = r.in, .output_tokens = r.out,
                             .concurrency = c, .measured_s = r.itl});
    }
  }
  return out;
}

absl::StatusOr<BenchmarkFile> ParseLatency(const json& root, const FileErrors& err, const LatencyShape& shape,
                                           BenchmarkFile out) {
  out.format = "benchmark_latency";
  auto avg = root.find("avg_latency");
  if (avg == root.end()) return err("avg_latency", "missing");
  MYRIAD_ASSIGN_OR_RETURN(latency, err.Number(*avg, "avg_latency", 1e-9, 86'400));
  if (auto l = root.find("latencies"); l != root.end()) {
    if (!l->is_array()) return err("latencies", fmt::format("expected a list, got {}", l->type_name()));
    if (l->empty()) return err("latencies", "is empty");
  }
  auto dim = [&](const char* key, const char* flag, const std::optional<int64_t>& given, int64_t lo,
                 int64_t hi) -> absl::StatusOr<int64_t> {
    if (auto it = root.find(key); it != root.end()) return err.Integer(*it, key, lo, hi);
    if (given) return *given;
    return err(key, fmt::format("missing: benchmark_latency's JSON does not record its {} argument; pass {} "
                                "(or add \"{}\" to the file)", flag, flag, key));
  };
  MYRIAD_ASSIGN_OR_RETURN(batch, dim("batch_size", "--batch-size", shape.batch_size, 1, kMaxCalibrationConcurrency));
  MYRIAD_ASSIGN_OR_RETURN(in, dim("input_len", "--input-len", shape.input_len, 1, kMaxCalibrationTokens));
  MYRIAD_ASSIGN_OR_RETURN(o, dim("output_len", "--output-len", shape.output_len, 1, kMaxCalibrationTokens));
  out.samples.push_back({.metric = perf::FitMetric::kLatency, .input_tokens = in, .output_tokens = o,
                         .concurrency = batch, .measured_s = latency});
  return out;
}

std::vector<std::string> SplitCsvLine(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<std::string> cells;
  size_t start = 0;
  for (size_t comma; (comma = line.find(',', start)) != std::string_view::npos; start = comma + 1) {
    cells.emplace_back(line.substr(start, comma - start));
  }
  cells.emplace_back(line.substr(start));
  return cells;
}

absl::StatusOr<double> CsvNumber(const std::string& path, int line, const std::string& column, const std::string& cell,
                                 double lo, double hi, bool integer) {
  double v = 0;
  size_t used = 0;
  try {
    v = std::stod(cell, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != cell.size() || !std::isfinite(v) || (integer && v != std::floor(v))) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}: expected {}, got '{}'", path, line, column,
                                                  integer ? "an integer" : "a number", cell));
  }
  if (v < lo || v > hi) {
    return absl::InvalidArgumentError(
        fmt::format("{}:{}: {}: must be between {} and {} (got {})", path, line, column, lo, hi, cell));
  }
  return v;
}

// The GEMMs of a layer that the step model has: QKV, the output projection, and the gated MLP.
constexpr const char* kVidurTimes[] = {"time_stats.attn_pre_proj.median", "time_stats.attn_post_proj.median",
                                       "time_stats.mlp_up_proj.median", "time_stats.mlp_down_proj.median"};

// Vidur's per-operator profile of one layer's linear operators (its mlp.csv): one row per token
// count and TP size, times in milliseconds.
absl::StatusOr<BenchmarkFile> ParseVidurMlp(const std::string& text, const std::string& path) {
  BenchmarkFile out;
  out.path = path;
  out.format = "vidur_mlp_csv";
  size_t pos = 0;
  int line_no = 0;
  std::vector<std::string> header;
  std::map<std::string, size_t> column;
  auto bad = [&](int line, const std::string& field, const std::string& what) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}: {}", path, line, field, what));
  };
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.empty() || line == "\r") continue;
    std::vector<std::string> cells = SplitCsvLine(line);
    if (header.empty()) {
      header = std::move(cells);
      for (size_t i = 0; i < header.size(); ++i) column[header[i]] = i;
      for (const char* need : {"n_embd", "n_expanded_embd", "n_head", "n_kv_head", "num_tokens",
                               "num_tensor_parallel_workers", "use_gated_mlp"}) {
        if (!column.count(need)) return bad(line_no, need, "missing column");
      }
      for (const char* need : kVidurTimes) {
        if (!column.count(need)) return bad(line_no, need, "missing column (a profile with its timings: Vidur's profiling output)");
      }
      continue;
    }
    if (cells.size() != header.size()) {
      return bad(line_no, "row", fmt::format("has {} cells but the header has {}", cells.size(), header.size()));
    }
    if (out.samples.size() >= static_cast<size_t>(kMaxCalibrationRequests)) {
      return bad(line_no, "row", fmt::format("more than {} rows", kMaxCalibrationRequests));
    }
    auto get = [&](const char* name, double lo, double hi, bool integer) {
      return CsvNumber(path, line_no, name, cells[column[name]], lo, hi, integer);
    };
    perf::FitSample s{.metric = perf::FitMetric::kLinearOps};
    MYRIAD_ASSIGN_OR_RETURN(hidden, get("n_embd", 1, 1'000'000, true));
    MYRIAD_ASSIGN_OR_RETURN(ffn, get("n_expanded_embd", 1, 10'000'000, true));
    MYRIAD_ASSIGN_OR_RETURN(heads, get("n_head", 1, 4096, true));
    MYRIAD_ASSIGN_OR_RETURN(kv_heads, get("n_kv_head", 1, 4096, true));
    MYRIAD_ASSIGN_OR_RETURN(tokens, get("num_tokens", 1, static_cast<double>(kMaxCalibrationTokens), true));
    MYRIAD_ASSIGN_OR_RETURN(tp, get("num_tensor_parallel_workers", 1, 1024, true));
    const std::string& gated = cells[column["use_gated_mlp"]];
    if (gated != "True" && gated != "true") {
      return bad(line_no, "use_gated_mlp", fmt::format("'{}': only gated MLPs (True) are modelled", gated));
    }
    if (static_cast<int64_t>(hidden) % static_cast<int64_t>(heads) != 0) {
      return bad(line_no, "n_head", fmt::format("{} does not divide n_embd {}", heads, hidden));
    }
    if (static_cast<int64_t>(heads) % static_cast<int64_t>(kv_heads) != 0 ||
        static_cast<int64_t>(kv_heads) % static_cast<int64_t>(std::min(tp, kv_heads)) != 0) {
      return bad(line_no, "n_kv_head", fmt::format("{} KV heads do not fit {} heads at TP {}", kv_heads, heads, tp));
    }
    double ms = 0;
    for (const char* t : kVidurTimes) {
      MYRIAD_ASSIGN_OR_RETURN(x, get(t, 0, 86'400'000, false));
      ms += x;
    }
    if (ms <= 0) return bad(line_no, kVidurTimes[0], "the row's GEMM times add up to 0");
    s.input_tokens = static_cast<int64_t>(tokens);
    s.layer = {.hidden = static_cast<int>(hidden), .ffn = static_cast<int>(ffn), .heads = static_cast<int>(heads),
               .kv_heads = static_cast<int>(kv_heads), .tp = static_cast<int>(tp)};
    s.measured_s = ms / 1e3;
    out.samples.push_back(s);
  }
  if (header.empty()) return absl::InvalidArgumentError(fmt::format("{}: empty file", path));
  if (out.samples.empty()) return bad(line_no, "rows", "none after the header");
  return out;
}

}  // namespace

absl::StatusOr<BenchmarkFile> ParseBenchmarkJson(const std::string& text, const std::string& path,
                                                 const LatencyShape& shape) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    const size_t pos = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n');
    return absl::InvalidArgumentError(fmt::format("{}:{}: not valid JSON", path, line));
  }
  const FileErrors err(path);
  BenchmarkFile out;
  out.path = path;
  if (!root.is_object()) {
    return absl::InvalidArgumentError(fmt::format("{}: expected a JSON object at the top, got {}", path, root.type_name()));
  }
  if (root.contains("ttfts") || root.contains("input_lens") || root.contains("itls")) return ParseServing(root, err, out);
  if (root.contains("avg_latency") || root.contains("latencies")) return ParseLatency(root, err, shape, out);
  if (root.contains("mean_ttft_ms")) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: input_lens: missing: a benchmark_serving result without its per-request lists (rerun with "
        "--save-result --save-detailed)", path));
  }
  return absl::InvalidArgumentError(fmt::format(
      "{}: unknown benchmark format: expected vLLM benchmark_serving --save-result (input_lens, output_lens, "
      "ttfts, itls) or benchmark_latency --output-json (avg_latency)", path));
}

absl::StatusOr<BenchmarkFile> ReadBenchmarkFile(const std::string& path, const LatencyShape& shape) {
  auto text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  const size_t first = text->find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (*text)[first] != '{' && (*text)[first] != '[') return ParseVidurMlp(*text, path);
  return ParseBenchmarkJson(*text, path, shape);
}

}  // namespace myriad::cli
