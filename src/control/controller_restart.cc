// Controller's rolling restarts of a pool (POST /admin/pools/ROLE/restart): the real path's
// driver of policy::NextToRestart, the decision the simulator drives for elastic.restarts
// (sim/elastic_restart.cc). Each round, after the scrapes, the pool's engines are classified
// (old, out, done), the policy names the old ones to take out within the buffer, and each is
// maintained through the fleet policy (drained, restarted, re-admitted through the warmup gate).
#include <fmt/format.h>

#include <algorithm>

#include "control/controller.h"
#include "net/json_text.h"
#include "net/url_path.h"

namespace myriad::control {

using json = nlohmann::json;

namespace {

// Finished restarts kept for GET /admin/engines.
constexpr size_t kMaxRestartsKept = 16;

}  // namespace

absl::Status Controller::RequestPoolRestart(const std::string& role, policy::RestartOptions options) {
  if (!IsEngineRole(role)) {
    return absl::InvalidArgumentError(fmt::format("pool '{}' is not prefill, decode or colocated", role));
  }
  if (absl::Status st = policy::ValidateRestartOptions(options); !st.ok()) return st;
  if (options.max_out > static_cast<int>(kMaxEngines)) {
    return absl::InvalidArgumentError(fmt::format("max_out: {} must be at most {}", options.max_out, kMaxEngines));
  }
  std::lock_guard l(mu_);
  for (const RollingRestart& r : restarts_) {
    if (r.role == role && r.done < 0) {
      return absl::FailedPreconditionError(fmt::format("a rolling restart of the {} pool is running", role));
    }
  }
  RollingRestart r{.role = role, .options = options, .engines = {}, .state = {}, .asked = clock_->Now(), .done = -1};
  for (const auto& e : engines_) {
    if (e->stopped || e->retiring || e->config.role != role) continue;
    if (policy_.state(e->index) != policy::EngineState::kServing) continue;
    r.engines.push_back(e->config.name);
  }
  if (r.engines.empty()) return absl::NotFoundError(fmt::format("no serving engine in the {} pool", role));
  r.state.assign(r.engines.size(), policy::UnitState::kOld);
  if (policy::NextToRestart(options, r.state).empty()) {
    return absl::InvalidArgumentError(fmt::format("min_serving_fraction {} of {} engines keeps every one serving: none could restart",
                                                  options.min_serving_fraction, r.engines.size()));
  }
  if (restarts_.size() >= kMaxRestartsKept) {
    const auto finished = std::find_if(restarts_.begin(), restarts_.end(), [](const RollingRestart& x) { return x.done >= 0; });
    if (finished != restarts_.end()) restarts_.erase(finished);
  }
  restarts_.push_back(std::move(r));
  return absl::OkStatus();
}

void Controller::RestartRound() {
  std::vector<std::pair<Engine*, std::vector<policy::FleetAction>>> changes;
  std::vector<json> lines;
  {
    std::lock_guard l(mu_);
    const Nanos now = clock_->Now();
    for (RollingRestart& r : restarts_) {
      if (r.done >= 0) continue;
      // The pool as the policy sees it: an engine scaled in or gone since has left it; an old
      // engine down for another reason counts against the buffer like one taken out.
      std::vector<policy::UnitState> view;
      std::vector<size_t> at;
      std::vector<Engine*> found;
      bool pending = false;
      for (size_t i = 0; i < r.engines.size(); ++i) {
        Engine* e = nullptr;
        for (auto& x : engines_) {
          if (x->config.name == r.engines[i] && !x->stopped) e = x.get();
        }
        if (!e || e->retiring) continue;
        const bool serving = e->last_ok && policy_.state(e->index) == policy::EngineState::kServing;
        if (r.state[i] == policy::UnitState::kOut && serving) {
          r.state[i] = policy::UnitState::kDone;
          lines.push_back({{"action", "rolling_restart"}, {"target", e->config.name}, {"pool", r.role},
                           {"event", "back"}, {"reason", "restarted and re-admitted"}});
        }
        const policy::UnitState v = r.state[i] == policy::UnitState::kOld && !serving ? policy::UnitState::kOut : r.state[i];
        pending |= r.state[i] != policy::UnitState::kDone;
        view.push_back(v);
        at.push_back(i);
        found.push_back(e);
      }
      if (!pending) {
        r.done = now;
        lines.push_back({{"action", "rolling_restart"}, {"target", r.role}, {"pool", r.role}, {"event", "done"},
                         {"reason", fmt::format("{} engines restarted", std::count(r.state.begin(), r.state.end(),
                                                                                   policy::UnitState::kDone))}});
        continue;
      }
      for (size_t v : policy::NextToRestart(r.options, view)) {
        std::vector<policy::FleetAction> actions = policy_.Maintain(found[v]->index, now);
        if (actions.empty()) continue;
        r.state[at[v]] = policy::UnitState::kOut;
        lines.push_back({{"action", "rolling_restart"}, {"target", found[v]->config.name}, {"pool", r.role},
                         {"event", "out"},
                         {"reason", fmt::format("rolling restart: at most {} out, {} of the pool serving",
                                                r.options.max_out, r.options.min_serving_fraction)}});
        changes.emplace_back(found[v], std::move(actions));
      }
    }
  }
  for (json& line : lines) {
    line["t_s"] = NanosToSeconds(clock_->Now());
    line["dry_run"] = config_.dry_run;
    LogAction("rolling_restart", std::move(line));
  }
  for (auto& [e, actions] : changes) Carry(*e, std::move(actions));
}

json Controller::RestartsJson() const {
  json list = json::array();
  for (const RollingRestart& r : restarts_) {
    json engines = json::array();
    for (size_t i = 0; i < r.engines.size(); ++i) {
      const policy::UnitState s = r.state[i];
      engines.push_back({{"name", r.engines[i]},
                         {"state", s == policy::UnitState::kOld ? "old" : s == policy::UnitState::kOut ? "out" : "done"}});
    }
    list.push_back({{"pool", r.role}, {"max_out", r.options.max_out},
                    {"min_serving_fraction", r.options.min_serving_fraction},
                    {"asked_s", NanosToSeconds(r.asked)}, {"done_s", r.done < 0 ? -1.0 : NanosToSeconds(r.done)},
                    {"engines", std::move(engines)}});
  }
  return list;
}

net::HttpResponse Controller::AdminPoolRequest(const net::HttpRequest& req) {
  if (auto refused = OperatorRefusal(req)) return *std::move(refused);
  constexpr std::string_view kPrefix = "/admin/pools/";
  const std::string_view rest = req.path().substr(kPrefix.size());
  const size_t slash = rest.find('/');
  const std::optional<std::string> role =
      slash == std::string_view::npos ? std::nullopt : net::PercentDecode(rest.substr(0, slash));
  if (!role || rest.substr(slash + 1) != "restart") {
    return net::JsonError(404, "NotFoundError", "expected POST /admin/pools/ROLE/restart");
  }
  policy::RestartOptions o;
  if (!req.body.empty()) {
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    const auto bad = [](const std::string& why) { return net::JsonError(400, "invalid_request_error", why); };
    if (!body.is_object()) return bad("body: expected {\"max_out\": N, \"min_serving_fraction\": F}");
    for (const auto& [key, value] : body.items()) {
      if (key == "max_out") {
        if (!value.is_number_integer()) return bad("max_out: expected an integer");
        const int64_t n = value.get<int64_t>();
        if (n < 1 || n > static_cast<int64_t>(kMaxEngines)) {
          return bad(fmt::format("max_out: {} is not in [1, {}]", n, kMaxEngines));
        }
        o.max_out = static_cast<int>(n);
      } else if (key == "min_serving_fraction") {
        if (!value.is_number()) return bad("min_serving_fraction: expected a number in [0, 1)");
        o.min_serving_fraction = value.get<double>();
      } else {
        return bad(fmt::format("{}: unknown field (max_out, min_serving_fraction)", key));
      }
    }
  }
  const absl::Status st = RequestPoolRestart(*role, o);
  if (absl::IsNotFound(st)) return net::JsonError(404, "NotFoundError", std::string(st.message()));
  if (absl::IsFailedPrecondition(st)) return net::JsonError(409, "conflict", std::string(st.message()));
  if (!st.ok()) return net::JsonError(400, "invalid_request_error", std::string(st.message()));
  std::lock_guard l(mu_);
  return {202, "application/json", net::JsonText(RestartsJson().back()), {}};
}

}  // namespace myriad::control
