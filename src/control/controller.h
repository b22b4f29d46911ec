#pragma once
// `myriad control`: the third driver of the failure policies the simulator runs. Each round it
// scrapes every engine's /metrics (vLLM's names), hands the observations to
// policy::FleetController, and carries out the actions it returns: drain and undrain through
// the gateway's admin API, the exec hooks, the warmup gate's probes. It decides nothing itself.
// Its own /metrics and GET /admin/engines (engines, states, the slow-node radar) are served on
// `listen`, and with `admin_token` the operators' requests (POST /admin/engines/NAME/maintain,
// repair, role). Rounds run on the clock it is given, so tests step virtual time.
// With `ha.etcd`, controllers elect a leader (net/etcd_election.h); a follower only scrapes, for
// its endpoints. A leader starts each term with a fresh policy::FleetController and the journal
// of the actions recorded in etcd (policy/action_journal.h): each action is recorded before it is
// carried out, and one recorded by an earlier leader is skipped.
// With `autoscale` or `pd_ratio`, each round also drives the elasticity policies
// (control/elastic_driver.h): a scale-out starts engines through the local actuator or the
// scale_out hook, a scale-in drains an engine in the gateway and stops it once idle, a P/D
// switch is a role change as RequestRoleChange makes one.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "control/config.h"
#include "control/elastic_driver.h"
#include "control/local_actuator.h"
#include "control/rollout_driver.h"
#include "core/clock.h"
#include "net/etcd_client.h"
#include "net/etcd_election.h"
#include "net/http.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "policy/action_journal.h"
#include "policy/fleet_controller.h"

namespace myriad::control {

class Controller {
 public:
  // Checks what the config cannot (the listen address binds at Start). Null clock: the real one.
  // `local`: restarts the engines this process runs (myriad up), before any exec hook.
  static absl::StatusOr<std::unique_ptr<Controller>> Create(ControlConfig config,
                                                            std::shared_ptr<Clock> clock = nullptr,
                                                            std::shared_ptr<LocalActuator> local = nullptr);
  ~Controller();

  // Serves /metrics and /admin/engines and starts the rounds (one at once, then every
  // scrape_interval of the clock).
  absl::Status Start();
  void Stop();
  // One round now, on the caller's thread (tests call it instead of Start's loop).
  void RunRound();

  // Each action as one JSON line (stdout in the CLI), dry run or not.
  void set_log(std::function<void(const std::string&)> log) { log_ = std::move(log); }
  uint16_t port() const { return http_ ? http_->port() : 0; }
  // Asks for a serving engine's role change (prefill, decode or colocated), carried out at the
  // next round through policy::FleetController::ChangeRole (drain, change_role, the warmup gate,
  // readmit). InvalidArgument for an unknown role, NotFound for an unknown engine.
  absl::Status RequestRoleChange(const std::string& engine, const std::string& role);
  // Asks for planned maintenance of a serving engine (FleetController::Maintain: drained,
  // restarted, re-admitted through the warmup gate) at the next round. NotFound for an
  // unknown engine.
  absl::Status RequestMaintenance(const std::string& engine);
  // Tells the controller an operator repaired a cordoned engine (FleetController::Repaired):
  // the next scrape that reaches it runs the warmup gate. NotFound for an unknown engine.
  absl::Status RequestRepair(const std::string& engine);
  // Asks for a rolling restart of the serving engines of `role` (a pool): each round,
  // policy::NextToRestart names those to take out within the buffer `options` keeps, and each is
  // maintained (FleetController::Maintain: drained, restarted, re-admitted through the warmup
  // gate) until every one has come back. InvalidArgument for an unknown role or options out of
  // bounds, NotFound when the pool has no serving engine, FailedPrecondition while one runs.
  absl::Status RequestPoolRestart(const std::string& role, policy::RestartOptions options);
  // The engine's state by name ("" when unknown).
  std::string StateOf(const std::string& engine) const;
  // Whether this controller acted in its last round (always, without HA).
  bool leader() const;

 private:
  struct Engine {
    EngineConfig config;
    int index = 0;
    std::unique_ptr<net::HttpClient> client;  // scrapes and probes (the round's thread only)
    std::string answer;  // the known answer recorded at admission
    // The previous scrape's per-rank step histogram, for the window's mean step time.
    std::vector<std::pair<double, double>> step_sums;
    bool last_ok = false;
    double running = 0, waiting = 0, progress = 0;
    double kv_usage = 0, finished = 0;  // for the elasticity policies
    bool retiring = false;  // drained for a scale-in: stopped once idle, no longer observed
    bool stopped = false;   // scaled in: neither scraped nor listed to the policies again
  };

  Controller(ControlConfig config, std::shared_ptr<Clock> clock, std::shared_ptr<LocalActuator> local);
  // Whether this round acts: without HA always; with it, while leading. A new term resets the
  // policy and loads the journal.
  bool Leading();
  // Records a journaled action in etcd before it is carried out: true when this call recorded
  // it, false when it was there already.
  absl::StatusOr<bool> Record(const std::string& id, const std::string& line);
  // Stores the answer recorded at the engine's admission in etcd, for the leaders after this one.
  absl::Status StoreAnswer(const Engine& e);
  // An answer an earlier leader recorded for this engine (under mu_): the engine is serving, and
  // its first scrape probes against that answer.
  void UseKnownAnswer(Engine& e);
  absl::Status ConnectEtcd();
  // The gateway's backend list (GET /admin/backends), once a round; null when there is no
  // gateway or it did not answer.
  std::optional<nlohmann::json> GatewayBackends();
  // Adds the listed backends as engines when the config names none.
  void RefreshEngines(const std::optional<nlohmann::json>& backends);
  policy::EngineObservation Scrape(Engine& e);
  void Carry(Engine& e, std::vector<policy::FleetAction> actions);
  // Records the answer, or compares it; "" with ok=false when the engine did not answer within
  // `timeout`.
  absl::StatusOr<std::string> Probe(const std::string& url, int max_tokens, Nanos timeout);
  absl::Status Actuate(const policy::FleetAction& a, const Engine& e);
  // POST /admin/backends/NAME/VERB on the gateway (drain, undrain).
  absl::Status GatewayAdmin(const std::string& engine, const char* verb);
  // The elasticity policies' round (after every engine was scraped): stops the retiring engines
  // that went idle, then carries out what the policies decide.
  void Elastic();
  void ScaleOut(const ElasticAction& a);
  void StopRetired(Engine& e);
  // One action line for the log and the action counter.
  void LogAction(const std::string& action, nlohmann::json line);
  // "stopped", "retiring", or the fleet policy's state (under mu_).
  std::string StateName(const Engine& e) const;
  net::HttpResponse Handle(const net::HttpRequest& req);
  net::HttpResponse Metrics() const;
  net::HttpResponse AdminEngines() const;
  // POST /admin/engines/NAME/maintain | repair | role ({"role": ...}), with the admin token.
  net::HttpResponse AdminRequest(const net::HttpRequest& req);
  // 403 without an admin token configured, 401 without the right one; nullopt: allowed.
  std::optional<net::HttpResponse> OperatorRefusal(const net::HttpRequest& req) const;
  // POST /admin/pools/ROLE/restart ({"max_out": N, "min_serving_fraction": F}), with the token.
  net::HttpResponse AdminPoolRequest(const net::HttpRequest& req);
  // A round of each rolling restart (control/controller_restart.cc), after the scrapes.
  void RestartRound();
  nlohmann::json RestartsJson() const;  // under mu_
  void Loop();

  ControlConfig config_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<LocalActuator> local_;
  std::unique_ptr<Sleeper> sleeper_;
  std::function<void(const std::string&)> log_;
  std::unique_ptr<net::HttpServer> http_;
  std::unique_ptr<net::HttpClient> gateway_;  // the round's thread only
  std::unique_ptr<RolloutDriver> rollout_;    // null: no rollout section; the round's thread only
  std::unique_ptr<ElasticDriver> elastic_;    // null: no autoscale or pd_ratio; the round's thread only
  std::thread loop_;
  bool stopping_ = false;  // under mu_
  std::unique_ptr<net::EtcdElection> election_;  // null: no HA
  std::unique_ptr<net::EtcdClient> etcd_;         // the journal (the round's thread only)
  uint64_t term_ = 0;                             // the term policy_ and journal_ belong to
  std::optional<policy::ActionJournal> journal_;  // the round's thread only
  // With HA: each engine's known answer as recorded in etcd (ha.prefix + "/answers/" + name)
  // when this term began; an engine found later (the gateway's list) takes its answer from it.
  std::map<std::string, std::string> known_answers_;  // under mu_

  mutable std::mutex mu_;  // guards what follows: the handlers read it
  policy::FleetController policy_;
  std::vector<std::unique_ptr<Engine>> engines_;
  std::map<std::string, uint64_t> actions_;  // by action name, for /metrics
  uint64_t scrape_failures_ = 0;
  uint64_t rounds_ = 0;
  bool leading_ = false;
  uint64_t skipped_ = 0;  // actions an earlier leader had recorded
  // What operators asked for (the methods above, POST /admin/engines/NAME/...), carried out
  // at the next round.
  struct OperatorRequest {
    std::string engine;
    enum class Kind { kRole, kMaintain, kRepair } kind;
    std::string role;
  };
  absl::Status Request(OperatorRequest request);
  std::vector<OperatorRequest> requests_;
  // Rolling restarts (RequestPoolRestart): the pool's engines when it was asked for, by name,
  // each old, out (maintained, not back yet) or done.
  struct RollingRestart {
    std::string role;
    policy::RestartOptions options;
    std::vector<std::string> engines;
    std::vector<policy::UnitState> state;
    Nanos asked = 0, done = -1;
  };
  std::vector<RollingRestart> restarts_;
};

}  // namespace myriad::control
