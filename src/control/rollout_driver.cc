#include "control/rollout_driver.h"

#include <fmt/format.h>

#include "net/json_text.h"
#include "net/url_path.h"

namespace myriad::control {

using json = nlohmann::json;

RolloutDriver::RolloutDriver(RolloutJudgeConfig config, std::string admin_token, bool dry_run, ProbeFn probe,
                             LogFn log)
    : config_(std::move(config)),
      admin_token_(std::move(admin_token)),
      dry_run_(dry_run),
      probe_(std::move(probe)),
      log_(std::move(log)) {}

absl::StatusOr<json> RolloutDriver::Get(net::HttpClient& gateway, const std::string& target) {
  net::Headers h;
  if (!admin_token_.empty()) h.emplace_back("Authorization", "Bearer " + admin_token_);
  auto r = gateway.Request("GET", target, "", {}, h);
  if (!r.ok()) return r.status();
  if (r->status != 200) return absl::UnavailableError(fmt::format("gateway {}: status {}", target, r->status));
  json j = json::parse(r->body, nullptr, false);
  if (!j.is_object()) return absl::UnavailableError(fmt::format("gateway {}: not a JSON object", target));
  return j;
}

namespace {

policy::VersionWindow WindowOf(const json& versions, const std::string& version) {
  policy::VersionWindow w;
  if (!versions.is_object() || !versions.contains(version) || !versions[version].is_object()) return w;
  const json& v = versions[version];
  w.requests = v.value("requests", int64_t{0});
  w.slo_met = v.value("slo_met", int64_t{0});
  w.errors = v.value("errors", int64_t{0});
  return w;
}

}  // namespace

void RolloutDriver::ProbeCanary(net::HttpClient& gateway, const std::string& stable,
                                const std::string& canary_version, policy::VersionWindow* canary) {
  auto list = Get(gateway, "/admin/backends");
  if (!list.ok() || !(*list)["backends"].is_array()) return;
  std::string reference;
  std::vector<std::string> canaries;
  for (const json& b : (*list)["backends"]) {
    if (!b.is_object() || b.value("model", "") != config_.model || !b.value("available", false)) continue;
    const std::string version = b.value("version", ""), url = b.value("url", "");
    if (version == canary_version) canaries.push_back(url);
    if (version == stable && reference.empty()) {
      // The known answer is what the stable version says: greedy decoding of one prompt.
      if (auto a = probe_(url); a.ok()) reference = *a;
    }
  }
  if (reference.empty()) return;  // no stable answer to compare with: no verdict this round
  for (const std::string& url : canaries) {
    auto a = probe_(url);
    if (!a.ok()) continue;  // an engine that does not answer is the fleet controller's to judge
    ++canary->probes;
    canary->probe_mismatches += *a != reference;
  }
}

void RolloutDriver::Round(net::HttpClient& gateway) {
  auto all = Get(gateway, "/admin/rollouts");
  if (!all.ok() || !(*all)["rollouts"].is_array()) return;
  const json* ro = nullptr;
  for (const json& r : (*all)["rollouts"]) {
    if (r.is_object() && r.value("model", "") == config_.model) ro = &r;
  }
  if (!ro || !(*ro)["share"].is_number()) return;
  const std::string stable = ro->value("stable", ""), canary = ro->value("canary", "");
  const double share = (*ro)["share"].get<double>();
  const json& versions = (*ro)["versions"];
  // A change (ours, an operator's, a restart's) starts a new window.
  window_.Observe(fmt::format("{}/{}/{}", stable, canary, share), WindowOf(versions, stable), WindowOf(versions, canary));
  const policy::VersionWindow s = window_.stable();
  policy::VersionWindow c = window_.canary();
  if (config_.probe && share > 0 && stable != canary) ProbeCanary(gateway, stable, canary, &c);
  const policy::Judgement j = policy::Judge(config_.judge, share, s, c);
  if (j.verdict == policy::Verdict::kHold) return;
  const std::string action = fmt::format("rollout_{}", policy::VerdictName(j.verdict));
  json line = {{"action", action},
               {"model", config_.model},
               {"stable", stable},
               {"canary", canary},
               {"from_share", share},
               {"share", j.share},
               {"reason", j.reason},
               {"window", {{"stable_requests", s.requests}, {"canary_requests", c.requests},
                           {"canary_probes", c.probes}, {"canary_probe_mismatches", c.probe_mismatches}}},
               {"dry_run", dry_run_}};
  if (!dry_run_) {
    const json change = j.verdict == policy::Verdict::kPromote    ? json{{"action", "promote"}}
                        : j.verdict == policy::Verdict::kRollback ? json{{"action", "rollback"}}
                                                                  : json{{"share", j.share}};
    net::Headers h;
    if (!admin_token_.empty()) h.emplace_back("Authorization", "Bearer " + admin_token_);
    auto r = gateway.Request("POST", "/admin/rollouts/" + net::PathSegment(config_.model), net::JsonText(change), "application/json", h);
    line["ok"] = r.ok() && r->status == 200;
    if (!r.ok()) line["error"] = std::string(r.status().message());
    else if (r->status != 200) line["error"] = fmt::format("gateway status {}: {}", r->status, r->body);
  }
  if (log_) log_(action, net::JsonText(line));
}

}  // namespace myriad::control
