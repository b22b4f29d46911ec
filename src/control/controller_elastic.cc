// Controller's round of the elasticity policies (control/elastic_driver.h) and the actuators
// of its scale-out, scale-in and stop; the failure policy's actions are in controller.cc.
#include <fmt/format.h>

#include "control/controller.h"
#include "control/exec_hook.h"
#include "net/json_text.h"

namespace myriad::control {

using json = nlohmann::json;

void Controller::LogAction(const std::string& action, json line) {
  {
    std::lock_guard l(mu_);
    ++actions_[action];
  }
  if (log_) log_(net::JsonText(line));
}

void Controller::Elastic() {
  using Phase = ElasticEngine::Phase;
  // Drained engines leave first: what they free is counted before anything is asked for.
  std::vector<Engine*> idle;
  {
    std::lock_guard l(mu_);
    for (auto& e : engines_) {
      if (e->retiring && !e->stopped && (!e->last_ok || e->running + e->waiting == 0)) idle.push_back(e.get());
    }
  }
  for (Engine* e : idle) StopRetired(*e);
  std::vector<ElasticEngine> seen;
  {
    std::lock_guard l(mu_);
    for (const auto& e : engines_) {
      if (e->stopped) continue;
      ElasticEngine v{.name = e->config.name, .role = e->config.role, .reachable = e->last_ok, .running = e->running,
                      .waiting = e->waiting, .kv_usage = e->kv_usage, .finished = e->finished};
      switch (policy_.state(e->index)) {
        case policy::EngineState::kServing: v.phase = e->last_ok ? Phase::kServing : Phase::kOut; break;
        case policy::EngineState::kAdmitting: v.phase = Phase::kStarting; break;
        case policy::EngineState::kRecovering:
        case policy::EngineState::kWarmup: v.phase = Phase::kChanging; break;
        case policy::EngineState::kCordoned: v.phase = Phase::kOut; break;
      }
      if (e->retiring) v.phase = Phase::kRetiring;
      seen.push_back(std::move(v));
    }
  }
  for (const ElasticAction& a : elastic_->Round(clock_->Now(), seen)) {
    Engine* e = nullptr;
    {
      std::lock_guard l(mu_);
      for (auto& x : engines_) {
        if (x->config.name == a.engine && !x->stopped) e = x.get();
      }
    }
    json line = {{"t_s", NanosToSeconds(clock_->Now())}, {"reason", a.reason}, {"dry_run", config_.dry_run}};
    switch (a.kind) {
      case ElasticAction::Kind::kScaleOut: ScaleOut(a); break;
      case ElasticAction::Kind::kKeep: {
        // A retiring engine serves again: the cheapest scale-out there is.
        line.update({{"action", "scale_out"}, {"target", a.engine}, {"role", a.role}, {"kept", true}});
        absl::Status st = absl::OkStatus();
        if (!config_.dry_run) {
          if (gateway_ && config_.drain_in_gateway) st = GatewayAdmin(a.engine, "undrain");
          std::lock_guard l(mu_);
          if (e) e->retiring = false;
        }
        line["ok"] = st.ok();
        if (!st.ok()) line["error"] = std::string(st.message());
        LogAction("scale_out", std::move(line));
        break;
      }
      case ElasticAction::Kind::kScaleIn: {
        if (!e) break;
        line.update({{"action", "scale_in"}, {"target", a.engine}, {"url", e->config.url}, {"role", a.role}});
        absl::Status st = absl::OkStatus();
        if (!config_.dry_run) {
          if (gateway_ && config_.drain_in_gateway) st = GatewayAdmin(a.engine, "drain");
          if (const auto hook = config_.exec.find("drain"); hook != config_.exec.end()) {
            const absl::Status ran =
                RunHook({hook->second, "drain", a.engine, e->config.url, "scale in: " + a.reason, ""}, config_.exec_timeout);
            if (st.ok()) st = ran;
          }
          // Retiring even when a drain failed: it is stopped once idle all the same.
          std::lock_guard l(mu_);
          e->retiring = true;
        }
        line["ok"] = st.ok();
        if (!st.ok()) line["error"] = std::string(st.message());
        LogAction("scale_in", std::move(line));
        break;
      }
      case ElasticAction::Kind::kSwitch: {
        if (!e) break;
        line.update({{"action", "switch_role"}, {"target", a.engine}, {"url", e->config.url}, {"role", a.role}});
        LogAction("switch_role", std::move(line));
        std::vector<policy::FleetAction> actions;
        {
          std::lock_guard l(mu_);
          actions = policy_.ChangeRole(e->index, clock_->Now(), a.role);
        }
        Carry(*e, std::move(actions));
        break;
      }
    }
  }
}

void Controller::ScaleOut(const ElasticAction& a) {
  const auto hook = config_.exec.find("scale_out");
  const auto line_for = [&](const std::string& target, const std::string& url, int count) {
    json line = {{"t_s", NanosToSeconds(clock_->Now())}, {"action", "scale_out"}, {"target", target}, {"url", url},
                 {"role", a.role}, {"count", count}, {"ready_by_s", NanosToSeconds(a.ready_by)},
                 {"reason", a.reason}, {"dry_run", config_.dry_run}};
    return line;
  };
  const auto finish = [&](json line, const absl::Status& st) {
    line["ok"] = st.ok();
    if (!st.ok()) line["error"] = std::string(st.message());
    LogAction("scale_out", std::move(line));
  };
  if (config_.dry_run) return finish(line_for("", "", a.count), absl::OkStatus());
  // The local actuator starts them one by one, each registered with the gateway when it is up.
  for (int i = 0; local_ && i < a.count; ++i) {
    auto started = local_->AddEngine(a.role, config_.probe_timeout);
    if (absl::IsUnimplemented(started.status()) && hook != config_.exec.end()) break;
    if (!started.ok()) return finish(line_for("", "", a.count - i), started.status());
    {
      std::lock_guard l(mu_);
      auto e = std::make_unique<Engine>();
      e->config = *started;
      e->index = policy_.AddEngine();
      engines_.push_back(std::move(e));
    }
    absl::Status st = absl::OkStatus();
    if (hook != config_.exec.end()) {
      st = RunHook({hook->second, "scale_out", started->name, started->url, a.reason, a.role, 1}, config_.exec_timeout);
    }
    finish(line_for(started->name, started->url, 1), st);
    if (i + 1 == a.count) return;
  }
  // The hook starts them, and they reach this controller through the gateway's backend list.
  if (hook == config_.exec.end()) {
    return finish(line_for("", "", a.count),
                  absl::FailedPreconditionError("no actuator starts engines here: set actuators.exec.scale_out"));
  }
  finish(line_for("", "", a.count),
         RunHook({hook->second, "scale_out", "", "", a.reason, a.role, a.count}, config_.exec_timeout));
}

void Controller::StopRetired(Engine& e) {
  json line = {{"t_s", NanosToSeconds(clock_->Now())}, {"action", "stop"}, {"target", e.config.name},
               {"url", e.config.url}, {"role", e.config.role}, {"reason", "drained for scale-in"}};
  const auto hook = config_.exec.find("stop");
  absl::Status st = absl::OkStatus();
  if (local_) st = local_->StopEngine(e.config.name);
  if (absl::IsUnimplemented(st) && hook != config_.exec.end()) st = absl::OkStatus();
  if (!local_ && hook == config_.exec.end()) {
    st = absl::FailedPreconditionError("no actuator stops engines here: set actuators.exec.stop; it stays drained");
  }
  if (hook != config_.exec.end()) {
    const absl::Status ran =
        RunHook({hook->second, "stop", e.config.name, e.config.url, "drained for scale-in", ""}, config_.exec_timeout);
    if (st.ok()) st = ran;
  }
  {
    // Out of the pool whatever happened: a drained engine takes no traffic.
    std::lock_guard l(mu_);
    e.stopped = true;
  }
  line["ok"] = st.ok();
  if (!st.ok()) line["error"] = std::string(st.message());
  LogAction("stop", std::move(line));
}

}  // namespace myriad::control
