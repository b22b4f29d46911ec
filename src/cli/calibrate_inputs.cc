#include "cli/calibrate_inputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
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
  return ParseBenchmarkJson(*text, path, shape);
}

}  // namespace myriad::cli
