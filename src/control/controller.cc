#include "control/controller.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>

#include <nlohmann/json.hpp>

#include "control/exec_hook.h"
#include "net/json_text.h"
#include "net/prometheus.h"
#include "net/openai_request.h"
#include "net/url_path.h"
#include "net/vllm_metrics.h"

namespace myriad::control {

using json = nlohmann::json;
using policy::ActionKind;

namespace {

// Ranks and engines on the radar, at the admin endpoint and as metrics.
constexpr size_t kRadarTop = 10;
constexpr int kProbeSeed = 0;

}  // namespace

absl::StatusOr<std::unique_ptr<Controller>> Controller::Create(ControlConfig config, std::shared_ptr<Clock> clock,
                                                              std::shared_ptr<LocalActuator> local) {
  if (!net::ParseHostPort(config.listen).ok()) {
    return absl::InvalidArgumentError(fmt::format("listen: '{}' is not HOST:PORT", config.listen));
  }
  return std::unique_ptr<Controller>(
      new Controller(std::move(config), OrDefaultClock(std::move(clock)), std::move(local)));
}

Controller::Controller(ControlConfig config, std::shared_ptr<Clock> clock, std::shared_ptr<LocalActuator> local)
    : config_(std::move(config)), clock_(std::move(clock)), local_(std::move(local)), policy_(config_.policy) {
  for (const EngineConfig& ec : config_.engines) {
    auto e = std::make_unique<Engine>();
    e->config = ec;
    e->index = policy_.AddEngine();
    engines_.push_back(std::move(e));
  }
  if (!config_.gateway_url.empty()) {
    auto c = net::HttpClient::FromUrl(config_.gateway_url, {.timeout = config_.scrape_timeout});
    if (c.ok()) gateway_ = *std::move(c);
  }
  if (config_.pd_ratio.enabled || !config_.autoscale.pools.empty()) {
    elastic_ = std::make_unique<ElasticDriver>(config_.signals, config_.autoscale, config_.pd_ratio);
  }
  if (!config_.rollout.model.empty()) {
    // A probe waits one scrape interval at most, as a serving engine's periodic probe does.
    const Nanos probe_timeout = std::min(config_.probe_timeout, config_.scrape_interval);
    rollout_ = std::make_unique<RolloutDriver>(
        config_.rollout, config_.gateway_admin_token, config_.dry_run,
        [this, probe_timeout](const std::string& url) { return Probe(url, config_.probe_max_tokens, probe_timeout); },
        [this](const std::string& action, const std::string& line) {
          {
            std::lock_guard l(mu_);
            ++actions_[action];
          }
          if (log_) log_(line);
        });
  }
}

Controller::~Controller() { Stop(); }

absl::Status Controller::Start() {
  auto hp = net::ParseHostPort(config_.listen);
  if (!hp.ok()) return hp.status();
  net::HttpServerOptions o;
  o.address = hp->host;
  o.port = hp->port;
  o.server_name = "myriad-control";
  http_ = std::make_unique<net::HttpServer>(o, [this](const net::HttpRequest& r) { return Handle(r); });
  if (absl::Status st = http_->Start(); !st.ok()) return st;
  sleeper_ = clock_->NewSleeper();
  if (!config_.ha.etcd.empty()) {
    net::EtcdElectionHooks hooks;
    hooks.on_step_down = [this](const std::string& why) {
      if (log_) {
        log_(net::JsonText(json{{"t_s", NanosToSeconds(clock_->Now())}, {"event", "step_down"}, {"reason", why}}));
      }
    };
    net::EtcdElectionOptions eo;
    eo.etcd = config_.ha.etcd;
    eo.key = config_.ha.prefix + "/leader";
    eo.value = config_.ha.id.empty() ? fmt::format("http://{}:{}", hp->host, http_->port()) : config_.ha.id;
    eo.lease_ttl_seconds = config_.ha.lease_ttl / kSecond;
    // Half a second short of the lease: a leader stops acting before a follower can win.
    eo.fence_margin = std::min<Nanos>(500 * kMillisecond, config_.ha.lease_ttl / 2);
    eo.poll_interval = std::min<Nanos>(200 * kMillisecond, config_.scrape_interval);
    eo.etcd_timeout = config_.scrape_timeout;
    election_ = std::make_unique<net::EtcdElection>(std::move(eo), clock_, std::move(hooks));
    election_->Start();
  }
  loop_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void Controller::Stop() {
  {
    std::lock_guard l(mu_);
    stopping_ = true;
  }
  if (sleeper_) sleeper_->Wake();
  if (loop_.joinable()) loop_.join();
  if (election_) election_->Stop(/*resign=*/true);
  if (http_) http_->Stop();
}

void Controller::Loop() {
  while (true) {
    {
      std::lock_guard l(mu_);
      if (stopping_) return;
    }
    const Nanos began = clock_->Now();
    RunRound();
    sleeper_->SleepUntil(began + config_.scrape_interval);
  }
}

std::optional<json> Controller::GatewayBackends() {
  if (!gateway_) return std::nullopt;
  net::Headers h;
  if (!config_.gateway_admin_token.empty()) h.emplace_back("Authorization", "Bearer " + config_.gateway_admin_token);
  auto r = gateway_->Request("GET", "/admin/backends", "", {}, h);
  if (!r.ok() || r->status != 200) return std::nullopt;  // the next round asks again
  json j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("backends") || !j["backends"].is_array()) return std::nullopt;
  return j;
}

void Controller::RefreshEngines(const std::optional<json>& backends) {
  if (!config_.engines.empty() || !backends) return;
  const json& j = *backends;
  std::lock_guard l(mu_);
  for (const json& b : j["backends"]) {
    if (!b.is_object() || !b.contains("name") || !b["name"].is_string() || !b.contains("url") ||
        !b["url"].is_string()) {
      continue;
    }
    const std::string name = b["name"];
    if (engines_.size() >= kMaxEngines ||
        std::any_of(engines_.begin(), engines_.end(), [&](const auto& e) { return e->config.name == name; })) {
      continue;
    }
    auto e = std::make_unique<Engine>();
    e->config = {name, b["url"].get<std::string>()};
    if (b.contains("role") && b["role"].is_string()) e->config.role = b["role"];
    e->index = policy_.AddEngine();
    UseKnownAnswer(*e);
    engines_.push_back(std::move(e));
  }
}

policy::EngineObservation Controller::Scrape(Engine& e) {
  policy::EngineObservation obs;
  if (!e.client) {
    auto c = net::HttpClient::FromUrl(e.config.url, {.timeout = config_.scrape_timeout});
    if (!c.ok()) return obs;
    e.client = *std::move(c);
  }
  auto r = e.client->Get("/metrics");
  if (!r.ok() || r->status != 200) return obs;
  const net::VllmScrape s = net::ParseVllmMetrics(r->body);
  obs.reachable = true;
  obs.running = s.running;
  obs.waiting = s.waiting;
  obs.progress = s.generation_tokens;
  e.kv_usage = s.kv_usage;
  e.finished = s.finished;
  // The window's mean step time per rank: the inter-token histogram's deltas since last time.
  bool complete = !s.ranks.empty() && e.step_sums.size() == s.ranks.size();
  std::vector<double> times;
  for (size_t i = 0; complete && i < s.ranks.size(); ++i) {
    const double dn = s.ranks[i].step_count - e.step_sums[i].second;
    const double ds = s.ranks[i].step_seconds_sum - e.step_sums[i].first;
    if (!(dn > 0) || !(ds >= 0)) complete = false;
    else times.push_back(ds / dn);
  }
  if (complete) obs.rank_step_times = std::move(times);
  e.step_sums.clear();
  for (const auto& rank : s.ranks) e.step_sums.emplace_back(rank.step_seconds_sum, rank.step_count);
  return obs;
}

absl::Status Controller::ConnectEtcd() {
  if (etcd_) return absl::OkStatus();
  auto c = net::EtcdClient::Connect(config_.ha.etcd, config_.scrape_timeout);
  if (!c.ok()) return c.status();
  etcd_ = *std::move(c);
  return absl::OkStatus();
}

bool Controller::Leading() {
  bool lead = !election_ || election_->leading();
  if (lead && election_ && election_->term() != term_) {
    // A new term: decide afresh from what this controller sees, skipping what was recorded.
    const std::string dir = config_.ha.prefix + "/actions/", answers_dir = config_.ha.prefix + "/answers/";
    const absl::Status connected = ConnectEtcd();
    absl::StatusOr<std::vector<net::EtcdKv>> recorded =
        connected.ok() ? etcd_->GetPrefix(dir) : absl::StatusOr<std::vector<net::EtcdKv>>(connected);
    absl::StatusOr<std::vector<net::EtcdKv>> answers =
        recorded.ok() ? etcd_->GetPrefix(answers_dir) : absl::StatusOr<std::vector<net::EtcdKv>>(recorded.status());
    if (recorded.ok() && !answers.ok()) recorded = answers.status();
    if (!recorded.ok()) {
      etcd_.reset();
      if (log_) {
        log_(net::JsonText(json{{"t_s", NanosToSeconds(clock_->Now())}, {"event", "journal_unreadable"},
                                {"error", std::string(recorded.status().message())}}));
      }
      lead = false;
    } else {
      std::vector<std::string> ids;
      for (const net::EtcdKv& kv : *recorded) ids.push_back(kv.key.substr(dir.size()));
      std::lock_guard l(mu_);
      known_answers_.clear();
      for (const net::EtcdKv& kv : *answers) known_answers_[kv.key.substr(answers_dir.size())] = kv.value;
      policy_ = policy::FleetController(config_.policy);
      if (elastic_) elastic_ = std::make_unique<ElasticDriver>(config_.signals, config_.autoscale, config_.pd_ratio);
      for (auto& e : engines_) {
        e->index = policy_.AddEngine();
        e->answer.clear();
        e->step_sums.clear();
        UseKnownAnswer(*e);
      }
      journal_.emplace(ids);
      term_ = election_->term();
      if (log_) {
        log_(net::JsonText(json{{"t_s", NanosToSeconds(clock_->Now())}, {"event", "leading"}, {"term", term_},
                                {"recorded_actions", ids.size()}}));
      }
    }
  }
  std::lock_guard l(mu_);
  leading_ = lead;
  return lead;
}

absl::StatusOr<bool> Controller::Record(const std::string& id, const std::string& line) {
  if (absl::Status st = ConnectEtcd(); !st.ok()) return st;
  auto r = etcd_->CreateIfAbsent(config_.ha.prefix + "/actions/" + id, line, /*lease=*/0);
  if (!r.ok()) {
    etcd_.reset();
    return r.status();
  }
  return r->created;
}

absl::Status Controller::StoreAnswer(const Engine& e) {
  if (absl::Status st = ConnectEtcd(); !st.ok()) return st;
  absl::Status st = etcd_->Put(config_.ha.prefix + "/answers/" + e.config.name, e.answer);
  if (!st.ok()) etcd_.reset();
  return st;
}

void Controller::UseKnownAnswer(Engine& e) {
  const auto it = known_answers_.find(e.config.name);
  if (it == known_answers_.end()) return;
  e.answer = it->second;
  policy_.AnswerKnown(e.index);
}

bool Controller::leader() const {
  std::lock_guard l(mu_);
  return leading_;
}

absl::Status Controller::Request(OperatorRequest request) {
  std::lock_guard l(mu_);
  if (std::none_of(engines_.begin(), engines_.end(),
                   [&](const auto& e) { return e->config.name == request.engine && !e->stopped; })) {
    return absl::NotFoundError(fmt::format("no engine named '{}'", request.engine));
  }
  if (requests_.size() >= kMaxEngines) return absl::ResourceExhaustedError("too many requests waiting for a round");
  requests_.push_back(std::move(request));
  return absl::OkStatus();
}

absl::Status Controller::RequestRoleChange(const std::string& engine, const std::string& role) {
  if (!IsEngineRole(role)) {
    return absl::InvalidArgumentError(fmt::format("role '{}' is not prefill, decode or colocated", role));
  }
  return Request({engine, OperatorRequest::Kind::kRole, role});
}

absl::Status Controller::RequestMaintenance(const std::string& engine) {
  return Request({engine, OperatorRequest::Kind::kMaintain, ""});
}

absl::Status Controller::RequestRepair(const std::string& engine) {
  return Request({engine, OperatorRequest::Kind::kRepair, ""});
}

void Controller::RunRound() {
  const bool acting = Leading();
  const std::optional<json> backends = GatewayBackends();
  RefreshEngines(backends);
  // The gateway is a second witness of a crash: a backend it ejected for errors on real traffic,
  // or whose active health checks fail, is out in its eyes too. FleetController then acts at the
  // first failed scrape (EngineObservation::gateway_ejected).
  std::map<std::string, bool> out_in_gateway;
  if (backends) {
    for (const json& b : (*backends)["backends"]) {
      if (!b.is_object() || !b.contains("name") || !b["name"].is_string()) continue;
      const auto flag = [&](const char* key, bool absent) {
        return b.contains(key) && b[key].is_boolean() ? b[key].get<bool>() : absent;
      };
      out_in_gateway[b["name"].get<std::string>()] = flag("ejected", false) || !flag("healthy", true);
    }
  }
  std::vector<Engine*> list;
  std::vector<std::pair<Engine*, std::vector<policy::FleetAction>>> changes;
  {
    std::lock_guard l(mu_);
    ++rounds_;
    for (auto& e : engines_) {
      if (!e->stopped) list.push_back(e.get());
    }
    if (acting) {
      for (const OperatorRequest& rq : requests_) {
        for (auto& e : engines_) {
          if (e->config.name != rq.engine || e->stopped) continue;
          switch (rq.kind) {
            case OperatorRequest::Kind::kRole:
              changes.emplace_back(e.get(), policy_.ChangeRole(e->index, clock_->Now(), rq.role));
              break;
            case OperatorRequest::Kind::kMaintain:
              changes.emplace_back(e.get(), policy_.Maintain(e->index, clock_->Now()));
              break;
            case OperatorRequest::Kind::kRepair:
              policy_.Repaired(e->index, clock_->Now());
              break;
          }
        }
      }
      requests_.clear();
    }
  }
  for (auto& [e, actions] : changes) Carry(*e, std::move(actions));
  for (Engine* e : list) {
    policy::EngineObservation obs = Scrape(*e);
    if (auto it = out_in_gateway.find(e->config.name); it != out_in_gateway.end()) obs.gateway_ejected = it->second;
    std::vector<policy::FleetAction> actions;
    {
      std::lock_guard l(mu_);
      scrape_failures_ += obs.reachable ? 0 : 1;
      e->last_ok = obs.reachable;
      if (obs.reachable) {
        e->running = obs.running;
        e->waiting = obs.waiting;
        e->progress = obs.progress;
      }
      // A retiring engine is the scale-in's: a drain the fleet policy did not make is not its to undo.
      if (acting && !e->retiring) actions = policy_.Observe(e->index, clock_->Now(), obs);
    }
    Carry(*e, std::move(actions));
  }
  if (acting) RestartRound();
  if (acting && elastic_) Elastic();
  if (acting && rollout_ && gateway_) rollout_->Round(*gateway_);
}

absl::StatusOr<std::string> Controller::Probe(const std::string& url, int max_tokens, Nanos timeout) {
  auto c = net::HttpClient::FromUrl(url, {.timeout = timeout});
  if (!c.ok()) return c.status();
  // Fields both vLLM and llama.cpp's llama-server read on /v1/completions (llama-server maps
  // max_tokens to its n_predict); greedy decoding, and a fixed seed for engines that sample anyway.
  json body = {{"prompt", config_.probe_prompt}, {"max_tokens", max_tokens}, {"temperature", 0},
               {"seed", kProbeSeed},           {"stream", false}};
  if (!config_.probe_model.empty()) body["model"] = config_.probe_model;
  auto r = (*c)->Post("/v1/completions", net::JsonText(body));
  if (!r.ok()) return r.status();
  if (r->status != 200) return absl::UnavailableError(fmt::format("status {}", r->status));
  const json j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() || j["choices"].empty() ||
      !j["choices"][0].is_object() || !j["choices"][0].contains("text") || !j["choices"][0]["text"].is_string()) {
    return absl::UnavailableError("no choices[0].text in the answer");
  }
  return j["choices"][0]["text"].get<std::string>();
}

absl::Status Controller::GatewayAdmin(const std::string& engine, const char* verb) {
  net::Headers h;
  if (!config_.gateway_admin_token.empty()) h.emplace_back("Authorization", "Bearer " + config_.gateway_admin_token);
  const std::string target = fmt::format("/admin/backends/{}/{}", net::PathSegment(engine), verb);
  auto r = gateway_->Request("POST", target, "", {}, h);
  if (!r.ok()) return r.status();
  if (r->status != 200) return absl::UnavailableError(fmt::format("gateway {}: status {}", target, r->status));
  return absl::OkStatus();
}

absl::Status Controller::Actuate(const policy::FleetAction& a, const Engine& e) {
  if (config_.dry_run) return absl::OkStatus();
  absl::Status result = absl::OkStatus();
  const auto gateway = [&](const char* verb) { return GatewayAdmin(e.config.name, verb); };
  if ((a.kind == ActionKind::kDrain || a.kind == ActionKind::kReadmit) && gateway_ && config_.drain_in_gateway) {
    result = gateway(a.kind == ActionKind::kDrain ? "drain" : "undrain");
  }
  if (a.kind == ActionKind::kRestart && local_) {
    absl::Status st = local_->Restart(e.config.name, config_.probe_timeout);
    if (result.ok()) result = st;
  }
  const auto hook = config_.exec.find(std::string(policy::ActionName(a.kind)));
  if (a.kind == ActionKind::kChangeRole) {
    absl::Status st = absl::OkStatus();
    if (local_) {
      st = local_->ChangeRole(e.config.name, a.role, config_.probe_timeout);
      // An actuator without roles leaves the change to the hook.
      if (absl::IsUnimplemented(st) && hook != config_.exec.end()) st = absl::OkStatus();
      // Registered anew, the backend would take requests before the gate: drained again.
      else if (st.ok() && gateway_ && config_.drain_in_gateway) st = gateway("drain");
    } else if (hook == config_.exec.end()) {
      st = absl::FailedPreconditionError("no actuator changes roles here: set actuators.exec.change_role");
    }
    if (result.ok()) result = st;
  }
  if (hook != config_.exec.end()) {
    absl::Status st = RunHook({hook->second, std::string(policy::ActionName(a.kind)), e.config.name, e.config.url,
                               a.reason, a.role},
                              config_.exec_timeout);
    if (result.ok()) result = st;
  }
  return result;
}

void Controller::Carry(Engine& e, std::vector<policy::FleetAction> actions) {
  std::deque<policy::FleetAction> todo(actions.begin(), actions.end());
  while (!todo.empty()) {
    const policy::FleetAction a = std::move(todo.front());
    todo.pop_front();
    json line = {{"t_s", NanosToSeconds(clock_->Now())}, {"action", policy::ActionName(a.kind)},
                 {"target", e.config.name}, {"url", e.config.url}, {"reason", a.reason}};
    if (!a.role.empty()) line["role"] = a.role;
    std::vector<policy::FleetAction> more;
    if (a.kind == ActionKind::kRecordAnswer || a.kind == ActionKind::kWarmup || a.kind == ActionKind::kProbe) {
      // A serving engine's periodic probe waits one scrape interval at most: the round waits
      // for it, and an engine that hung since the last scrape would hold every other engine's
      // scrape for the gate's whole timeout. No answer in time is tried again next period.
      const Nanos timeout = a.kind == ActionKind::kProbe ? std::min(config_.probe_timeout, config_.scrape_interval)
                                                         : config_.probe_timeout;
      auto answer = Probe(e.config.url, config_.probe_max_tokens, timeout);
      if (a.kind == ActionKind::kRecordAnswer) {
        if (answer.ok() && election_) {
          // Before the policy hears of it: an answer the next leader cannot read is recorded
          // again at the next scrape.
          {
            std::lock_guard l(mu_);
            e.answer = *answer;
          }
          const absl::Status stored = StoreAnswer(e);
          if (!stored.ok()) {
            answer = absl::UnavailableError(
                fmt::format("answer not stored in etcd: {}", std::string(stored.message())));
          }
        }
        std::lock_guard l(mu_);
        if (answer.ok()) e.answer = *answer;
        more = policy_.AnswerRecorded(e.index, answer.ok());
        line["ok"] = answer.ok();
      } else {
        const policy::ProbeOutcome outcome = !answer.ok()          ? policy::ProbeOutcome::kNoAnswer
                                             : *answer == e.answer ? policy::ProbeOutcome::kMatch
                                                                   : policy::ProbeOutcome::kMismatch;
        int completed = 0;
        if (outcome == policy::ProbeOutcome::kMatch && a.kind == ActionKind::kWarmup) {
          for (int i = 0; i < config_.policy.warmup_requests; ++i) {
            completed += Probe(e.config.url, config_.probe_max_tokens, config_.probe_timeout).ok();
          }
        }
        line["probe"] = outcome == policy::ProbeOutcome::kMatch      ? "match"
                        : outcome == policy::ProbeOutcome::kMismatch ? "mismatch"
                                                                     : "no_answer";
        std::lock_guard l(mu_);
        if (a.kind == ActionKind::kProbe) {
          more = policy_.ProbeDone(e.index, clock_->Now(), outcome);
        } else {
          line["warmup_completed"] = completed;
          more = policy_.WarmupDone(e.index, clock_->Now(), outcome, completed);
        }
      }
      if (!answer.ok()) line["error"] = std::string(answer.status().message());
    } else {
      line["dry_run"] = config_.dry_run;
      absl::Status st = absl::OkStatus();
      bool run = true;
      if (election_ && !config_.dry_run && policy::ActionJournal::Journaled(a.kind)) {
        // Recorded before it is carried out, so that a leader after this one skips it.
        const policy::ActionJournal::Entry entry = journal_->Next(e.config.name, a.kind);
        line["id"] = entry.id;
        if (entry.taken) {
          run = false;
          line["skipped"] = "recorded by an earlier leader";
        } else if (!election_->leading()) {
          run = false;
          st = absl::UnavailableError("no longer the leader");
        } else {
          json rec = line;
          rec["leader_term"] = term_;
          auto created = Record(entry.id, net::JsonText(rec));
          if (!created.ok()) {
            run = false;
            st = absl::UnavailableError(fmt::format("not recorded in etcd: {}", std::string(created.status().message())));
          } else if (!*created) {
            run = false;
            line["skipped"] = "recorded by an earlier leader";
          }
        }
        if (line.contains("skipped")) {
          std::lock_guard l(mu_);
          ++skipped_;
        }
      }
      if (run) st = Actuate(a, e);
      if (run && st.ok() && !config_.dry_run && a.kind == ActionKind::kChangeRole) {
        std::lock_guard l(mu_);
        e.config.role = a.role;  // its pool from now on
      }
      line["ok"] = st.ok();
      if (!st.ok()) line["error"] = std::string(st.message());
    }
    {
      std::lock_guard l(mu_);
      ++actions_[std::string(policy::ActionName(a.kind))];
    }
    if (log_) log_(net::JsonText(line));
    todo.insert(todo.end(), more.begin(), more.end());
  }
}

std::string Controller::StateName(const Engine& e) const {
  if (e.stopped) return "stopped";
  if (e.retiring) return "retiring";
  return std::string(policy::EngineStateName(policy_.state(e.index)));
}

std::string Controller::StateOf(const std::string& engine) const {
  std::lock_guard l(mu_);
  std::string state;
  for (const auto& e : engines_) {
    if (e->config.name == engine) state = StateName(*e);  // the last of a name: a new engine under an old name
  }
  return state;
}

net::HttpResponse Controller::Handle(const net::HttpRequest& req) {
  const std::string_view path = req.path();
  if (req.method == "POST" && path.starts_with("/admin/engines/")) return AdminRequest(req);
  if (req.method == "POST" && path.starts_with("/admin/pools/")) return AdminPoolRequest(req);
  if (req.method != "GET") {
    return net::JsonError(405, "MethodNotAllowed",
                          "only GET is served, and POST /admin/engines/NAME/... and /admin/pools/ROLE/restart");
  }
  if (path == "/health") return {200, "text/plain", "", {}};
  if (path == "/metrics") return Metrics();
  if (path == "/admin/engines") return AdminEngines();
  return net::JsonError(404, "NotFoundError", fmt::format("no route for GET {}", std::string(path)));
}

std::optional<net::HttpResponse> Controller::OperatorRefusal(const net::HttpRequest& req) const {
  if (config_.admin_token.empty()) {
    return net::JsonError(403, "forbidden", "operator requests are disabled (no admin_token set)");
  }
  if (net::BearerToken(req.headers) != config_.admin_token) {
    return net::JsonError(401, "unauthorized", "operator requests need Authorization: Bearer <admin_token>");
  }
  return std::nullopt;
}

net::HttpResponse Controller::AdminRequest(const net::HttpRequest& req) {
  if (auto refused = OperatorRefusal(req)) return *std::move(refused);
  constexpr std::string_view kPrefix = "/admin/engines/";
  const std::string_view rest = req.path().substr(kPrefix.size());
  const size_t slash = rest.find('/');
  const std::optional<std::string> name =
      slash == std::string_view::npos ? std::nullopt : net::PercentDecode(rest.substr(0, slash));
  if (!name) return net::JsonError(404, "NotFoundError", "expected /admin/engines/NAME/maintain, repair or role");
  const std::string_view verb = rest.substr(slash + 1);
  absl::Status st;
  std::string role;
  if (verb == "maintain") {
    st = RequestMaintenance(*name);
  } else if (verb == "repair") {
    st = RequestRepair(*name);
  } else if (verb == "role") {
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object() || !body.contains("role") || !body["role"].is_string()) {
      return net::JsonError(400, "invalid_request_error", "body: expected {\"role\": \"prefill|decode|colocated\"}");
    }
    role = body["role"].get<std::string>();
    st = RequestRoleChange(*name, role);
  } else {
    return net::JsonError(404, "NotFoundError", fmt::format("no operator request '{}': maintain, repair or role", std::string(verb)));
  }
  if (absl::IsNotFound(st)) return net::JsonError(404, "NotFoundError", std::string(st.message()));
  if (!st.ok()) return net::JsonError(400, "invalid_request_error", std::string(st.message()));
  json out = {{"engine", *name}, {"request", std::string(verb)}, {"state", StateOf(*name)}};
  if (!role.empty()) out["role"] = role;
  return {202, "application/json", net::JsonText(out), {}};
}

net::HttpResponse Controller::AdminEngines() const {
  std::lock_guard l(mu_);
  json list = json::array();
  for (const auto& e : engines_) {
    list.push_back({{"name", e->config.name}, {"url", e->config.url}, {"role", e->config.role},
                    {"state", StateName(*e)}, {"reachable", e->last_ok},
                    {"running", e->running}, {"waiting", e->waiting}, {"progress", e->progress}});
  }
  json radar = json::array();
  for (const policy::RadarEntry& r : policy_.Radar(kRadarTop)) {
    radar.push_back({{"engine", engines_[static_cast<size_t>(r.unit)]->config.name}, {"rank", r.rank},
                     {"step_time_excess", r.excess}});
  }
  return {200, "application/json",
          net::JsonText(json({{"leader", leading_}, {"term", term_}, {"engines", list}, {"radar", radar},
                              {"restarts", RestartsJson()}})),
          {}};
}

net::HttpResponse Controller::Metrics() const {
  net::PrometheusWriter w;
  std::lock_guard l(mu_);
  w.Counter("myriad_control_rounds_total", "Scrape rounds run.", rounds_);
  w.Gauge("myriad_control_leader", "1 while this controller leads (acts), 0 while it follows.", leading_ ? 1 : 0);
  w.Counter("myriad_control_actions_skipped_total",
            "Actions decided but not carried out: an earlier leader had recorded them in etcd.", skipped_);
  w.Counter("myriad_control_scrape_failures_total", "Engine scrapes that failed (refused, timed out, not 200).",
            scrape_failures_);
  w.Family("myriad_control_actions_total", "Actions taken (or logged, in a dry run), by kind.", net::MetricType::kCounter);
  for (const auto& [name, n] : actions_) w.Sample("myriad_control_actions_total", {{"action", name}}, n);
  std::map<std::string_view, int64_t> by_state;
  for (const auto s : {policy::EngineState::kAdmitting, policy::EngineState::kServing, policy::EngineState::kRecovering,
                       policy::EngineState::kWarmup, policy::EngineState::kCordoned}) {
    by_state[policy::EngineStateName(s)] = 0;
  }
  by_state["retiring"] = 0;
  for (const auto& e : engines_) {
    if (e->stopped) continue;
    ++by_state[e->retiring ? std::string_view("retiring") : policy::EngineStateName(policy_.state(e->index))];
  }
  w.Family("myriad_control_engines", "Engines by the controller's state.", net::MetricType::kGauge);
  for (const auto& [state, n] : by_state) w.Sample("myriad_control_engines", {{"state", state}}, n);
  w.Family("myriad_control_radar_step_time_excess",
           "The slow-node radar's top ranks: smoothed step time over the engine's median, minus 1.",
           net::MetricType::kGauge);
  for (const policy::RadarEntry& r : policy_.Radar(kRadarTop)) {
    const std::string rank = std::to_string(r.rank);
    w.Sample("myriad_control_radar_step_time_excess",
             {{"engine", engines_[static_cast<size_t>(r.unit)]->config.name}, {"rank", rank}}, r.excess);
  }
  return {200, std::string(net::kPrometheusContentType), w.Take(), {}};
}

}  // namespace myriad::control
