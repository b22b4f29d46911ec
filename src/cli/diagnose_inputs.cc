#include "cli/diagnose_inputs.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/config_file.h"
#include "net/http.h"
#include "net/http_client.h"
#include "net/vllm_metrics.h"

namespace myriad::cli {
namespace {

using nlohmann::json;

// A field of the results: absent or null is unknown; present with another type is an error.
struct Results {
  const std::string& path;
  absl::Status error;

  std::optional<double> Number(const json& at, std::initializer_list<std::string_view> keys, const std::string& where) {
    const json* v = &at;
    std::string name = where;
    for (std::string_view k : keys) {
      if (!name.empty()) name += '.';
      name += k;
      if (!v->is_object()) return std::nullopt;
      const auto it = v->find(std::string(k));
      if (it == v->end() || it->is_null()) return std::nullopt;
      v = &*it;
    }
    if (!v->is_number()) {
      Fail(name, "expected a number");
      return std::nullopt;
    }
    return v->get<double>();
  }
  std::string String(const json& at, std::string_view key, const std::string& where) {
    const auto it = at.find(std::string(key));
    if (it == at.end() || it->is_null()) return "";
    if (!it->is_string()) {
      Fail(where + "." + std::string(key), "expected a string");
      return "";
    }
    return it->get<std::string>();
  }
  void Fail(const std::string& field, std::string_view what) {
    if (error.ok()) error = absl::InvalidArgumentError(fmt::format("{}: field '{}': {}", path, field, what));
  }
};

}  // namespace

absl::StatusOr<policy::DiagnoseInput> ReadSimulationResults(const std::string& path) {
  auto text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  json r;
  try {
    r = json::parse(*text);
  } catch (const json::parse_error& e) {
    // nlohmann's message says "parse error at line L, column C: ..." after its own tag.
    std::string_view what = e.what();
    if (const size_t tag = what.find("] "); tag != std::string_view::npos) what.remove_prefix(tag + 2);
    return absl::InvalidArgumentError(fmt::format("{}: not JSON: {}", path, what));
  }
  if (!r.is_object() || !r.contains("scenario") || !r["scenario"].is_object()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: not a simulation's results (no 'scenario' object; write them with myriad sim -o FILE)", path));
  }
  Results g{path, {}};
  policy::DiagnoseInput in;
  if (r.contains("pools") && !r["pools"].is_array()) g.Fail("pools", "expected an array");
  if (r.contains("pools") && r["pools"].is_array()) {
    for (size_t i = 0; i < r["pools"].size(); ++i) {
      const json& p = r["pools"][i];
      const std::string where = fmt::format("pools[{}]", i);
      if (!p.is_object()) {
        g.Fail(where, "expected an object");
        break;
      }
      policy::DiagnoseUnit u{.name = fmt::format("pool {}", g.String(p, "name", where))};
      u.expert_imbalance = g.Number(p, {"moe", "expert_imbalance"}, where).value_or(0);
      u.rank_busy_max_over_mean = g.Number(p, {"moe", "rank_busy_max_over_mean"}, where).value_or(0);
      if (p.contains("moe") && p["moe"].is_object()) u.expert_placement = g.String(p["moe"], "placement", where + ".moe");
      in.units.push_back(std::move(u));
    }
  }
  if (r.contains("failures") && r["failures"].is_object()) {
    const json& radar = r["failures"].value("slow_node_radar", json::array());
    if (!radar.is_array()) g.Fail("failures.slow_node_radar", "expected an array");
    for (size_t i = 0; radar.is_array() && i < radar.size(); ++i) {
      const std::string where = fmt::format("failures.slow_node_radar[{}]", i);
      const json& e = radar[i];
      const auto unit = g.Number(e, {"unit"}, where), rank = g.Number(e, {"rank"}, where),
                 excess = g.Number(e, {"step_time_excess"}, where);
      if (!unit || !rank || !excess) continue;
      in.radar.push_back({fmt::format("unit {} ({})", *unit, g.String(e, "pool", where)), static_cast<int>(*rank),
                          *excess});
    }
  }
  if (r.contains("router") && r["router"].is_object()) in.router = g.String(r["router"], "policy", "router");
  if (in.router.empty()) in.router = g.String(r["scenario"], "router", "scenario");
  in.prefix_hit_rate = g.Number(r, {"tokens", "prefix_hit_rate"}, "").value_or(-1);
  in.requests = g.Number(r, {"requests", "arrived"}, "").value_or(-1);
  in.preempted = g.Number(r, {"requests", "preempted"}, "").value_or(-1);
  in.ttft_p99_s = g.Number(r, {"latency_s", "ttft", "p99"}, "").value_or(-1);
  in.kv_transfer_p99_s = g.Number(r, {"kv_transfer", "time_s", "p99"}, "").value_or(-1);
  if (r.contains("requests") && r["requests"].is_object()) {
    const json& rq = r["requests"];
    if (rq.contains("rejected_by_reason") && rq["rejected_by_reason"].is_object()) {
      for (const auto& [reason, n] : rq["rejected_by_reason"].items()) {
        if (!n.is_number()) {
          g.Fail("requests.rejected_by_reason." + reason, "expected a number");
          continue;
        }
        in.rejections.emplace_back(reason, n.get<double>());
      }
    } else if (const auto n = g.Number(rq, {"rejected"}, "requests"); n && *n > 0) {
      in.rejections.emplace_back("rejected", *n);
    }
  }
  if (!g.error.ok()) return g.error;
  return in;
}

policy::DiagnoseInput FromExpositions(const std::vector<Exposition>& expositions) {
  policy::DiagnoseInput in;
  double hits = 0, queries = 0, answered = 0, gateway_responses = 0, preempted = 0;
  bool any_engine = false, any_gateway = false;
  std::map<std::string, double> rejections;
  for (const Exposition& e : expositions) {
    const net::VllmScrape s = net::ParseVllmMetrics(e.text);
    if (s.any) {
      any_engine = true;
      preempted += s.preemptions;
      policy::DiagnoseUnit u{.name = "engine " + e.source};
      bool timed = !s.ranks.empty();
      for (const auto& rank : s.ranks) {
        timed = timed && rank.step_count > 0;
        u.rank_load.push_back(rank.running);
        if (rank.step_count > 0) u.rank_step_s.push_back(rank.step_seconds_sum / rank.step_count);
      }
      // A rank that has not stepped has no step time: the ranks' order would no longer be theirs.
      if (!timed) u.rank_step_s.clear();
      in.units.push_back(std::move(u));
    }
    net::ForEachPrometheusSample(e.text, [&](std::string_view name, std::string_view labels, double v) {
      if (name == "vllm:prefix_cache_hits_total") hits += v;
      if (name == "vllm:prefix_cache_queries_total") queries += v;
      if (name == "vllm:request_success_total") answered += v;
      if (name == "myriad_gateway_responses_total") {
        any_gateway = true;
        gateway_responses += v;
      }
      if (name == "myriad_gateway_rejections_total") {
        rejections[std::string(net::PrometheusLabelValue(labels, "reason"))] += v;
      }
      if (name == "myriad_control_radar_step_time_excess") {
        const std::string rank(net::PrometheusLabelValue(labels, "rank"));
        if (rank.empty() || !std::isdigit(static_cast<unsigned char>(rank[0]))) return;
        in.radar.push_back({fmt::format("engine {}", std::string(net::PrometheusLabelValue(labels, "engine"))),
                            std::stoi(rank), v});
      }
    });
  }
  if (queries > 0) in.prefix_hit_rate = hits / queries;
  // The gateway sees every request, refused ones included; the engines only those they ran.
  if (any_gateway) {
    in.requests = gateway_responses;
  } else if (any_engine) {
    in.requests = answered;
  }
  if (any_engine) in.preempted = preempted;
  for (const auto& [reason, n] : rejections) in.rejections.emplace_back(reason, n);
  return in;
}

namespace {

struct SplitUrl {
  net::HostPort server;
  std::string path;
};

absl::StatusOr<SplitUrl> Split(const std::string& url, std::string_view default_path) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) {
    return absl::InvalidArgumentError(fmt::format("'{}': expected http://HOST:PORT[/PATH]", url));
  }
  const size_t slash = url.find('/', kScheme.size());
  auto server = net::ParseHttpUrl(url.substr(0, slash));
  if (!server.ok()) {
    return absl::InvalidArgumentError(fmt::format("'{}': {}", url, std::string(server.status().message())));
  }
  std::string path = slash == std::string::npos ? "/" : url.substr(slash);
  if (path == "/") path = std::string(default_path);
  return SplitUrl{*server, path};
}

absl::StatusOr<std::string> Get(const SplitUrl& u, const std::string& url, const std::string& target) {
  net::HttpClient client(u.server, net::HttpClientOptions{.timeout = 10 * kSecond});
  auto r = client.Get(target);
  if (!r.ok()) return absl::UnavailableError(fmt::format("{}: {}", url, std::string(r.status().message())));
  if (r->status != 200) return absl::UnavailableError(fmt::format("{}: HTTP {}", url, r->status));
  return std::move(r->body);
}

std::string PercentEncode(std::string_view s) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Exposition> Scrape(const std::string& url) {
  auto u = Split(url, "/metrics");
  if (!u.ok()) return u.status();
  auto body = Get(*u, url, u->path);
  if (!body.ok()) return body.status();
  return Exposition{url, *std::move(body)};
}

absl::StatusOr<std::vector<Exposition>> QueryPrometheus(const std::string& url) {
  auto u = Split(url, "");
  if (!u.ok()) return u.status();
  const std::string base = u->path == "/" || u->path.empty() ? "" : u->path;
  const std::string query = R"({__name__=~"vllm:.+|myriad_.+"})";
  auto body = Get(*u, url, base + "/api/v1/query?query=" + PercentEncode(query));
  if (!body.ok()) return body.status();
  const json r = json::parse(*body, nullptr, false);
  if (r.is_discarded() || r.value("status", "") != "success" || !r.contains("data") ||
      !r["data"].is_object() || !r["data"].value("result", json()).is_array()) {
    return absl::UnavailableError(fmt::format("{}: not a Prometheus query answer", url));
  }
  // Back to exposition lines, one text per scraped instance, so both kinds of source are read
  // by the same code.
  std::map<std::string, std::string> by_instance;
  for (const json& s : r["data"]["result"]) {
    if (!s.is_object() || !s.contains("metric") || !s["metric"].is_object() || !s.contains("value") ||
        !s["value"].is_array() || s["value"].size() != 2 || !s["value"][1].is_string()) {
      continue;
    }
    const json& m = s["metric"];
    std::string labels;
    for (const auto& [k, v] : m.items()) {
      if (k == "__name__" || !v.is_string()) continue;
      labels += fmt::format("{}{}={}", labels.empty() ? "" : ",", k, json(v).dump());
    }
    std::string& text = by_instance[m.value("instance", std::string("?"))];
    text += fmt::format("{}{{{}}} {}\n", m.value("__name__", std::string()), labels, s["value"][1].get<std::string>());
  }
  std::vector<Exposition> out;
  for (auto& [instance, text] : by_instance) out.push_back({instance, std::move(text)});
  return out;
}

}  // namespace myriad::cli
