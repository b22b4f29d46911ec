#pragma once
// The controller's decisions over a fleet of real engines: observations in (what each engine's
// /metrics said at `now`, or that it could not be reached), actions out (drain, restart, run
// the warmup gate, re-admit, cordon). The detection itself is the simulator's: a crash is
// BackendHealth's failed checks in a row (the scrape is the heartbeat), a straggler is
// StragglerDetector's verdict over the engine's per-rank step times, a hang is the watchdog's
// timeout (DetectionOptions) measured as no progress while requests are in flight, silent
// corruption is a known-answer probe that differs. Three drivers: `myriad control` against real
// engines, and in the simulator sim::FleetDriver (`myriad incident`) and the 10k-GPU failure
// model (sim/failures). Pure: time is the `now` argument.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"
#include "policy/backend_health.h"
#include "policy/health.h"
#include "policy/straggler.h"

namespace myriad::policy {

struct FleetControllerOptions {
  // No progress for this long while requests are in flight is a hang: the watchdog's timeout.
  Nanos hang_after = DetectionOptions{}.watchdog_timeout;
  // Failed scrapes in a row (refused, timed out, not 200) that make a crash.
  int crash_after_failed_probes = BackendHealthOptions{}.unhealthy_after_failed_checks;
  // Warmup requests that must complete, after the known-answer probe passed, to re-admit.
  int warmup_requests = 3;
  // A restarted engine that is still unreachable (or stuck, or failing the gate) after this
  // long is restarted again.
  Nanos restart_timeout = 5 * kMinute;
  // How often a serving engine gets the known-answer probe (silent corruption while serving);
  // 0: only at admission and in the warmup gate.
  Nanos probe_period = 0;
  StragglerOptions straggler;
  // false: stragglers are ranked on the radar but never evicted.
  bool evict_stragglers = true;
};
// The options that decide as a health checker with `d`'s schedule does: scrapes every
// heartbeat_interval, a crash after heartbeat_timeout's worth of failed ones, a hang after the
// watchdog's timeout, a probe every probe_interval. The simulator's `faults.detection`.
FleetControllerOptions ControllerOptionsFor(const DetectionOptions& d);
// Upper bounds of the options (docs/controller.md).
inline constexpr Nanos kMaxHangAfter = kHour;
inline constexpr int kMaxWarmupRequests = 1000;

// One engine as its /metrics showed it at one scrape.
struct EngineObservation {
  bool reachable = false;
  double running = 0, waiting = 0;
  // A counter that moves whenever the engine makes progress (vllm:generation_tokens_total).
  double progress = 0;
  // Mean step time per DP rank over the window since the last scrape; empty when the window
  // had no steps on some rank (nothing to compare).
  std::vector<double> rank_step_times;
  // The gateway ejected it for errors in a row (passive ejection, its admin API's view): a
  // failed scrape of such an engine is a crash at once, without waiting for more of them.
  bool gateway_ejected = false;
};

enum class EngineState {
  kAdmitting,   // not yet seen reachable: the probe's answer is recorded when it is
  kServing,
  kRecovering,  // drained and restarted: waiting for it to come back
  kWarmup,      // back: the warmup gate is running
  kCordoned,    // failed its gate: out until an operator acts
};
std::string_view EngineStateName(EngineState s);

enum class ActionKind {
  kRecordAnswer,  // run the known-answer probe and record its answer (admission)
  kDrain,         // no new requests in the gateway
  kRestart,
  kWarmup,        // run the known-answer probe against the recorded answer, then the warmups
  kReadmit,       // undrain
  kCordon,
  kProbe,         // run the known-answer probe on a serving engine (every probe_period)
  kChangeRole,    // restart it with another role (FleetAction::role) and register it anew
};
std::string_view ActionName(ActionKind k);

// The known-answer probe of the warmup gate: the engine's answer against the one recorded at
// admission; kNoAnswer when it did not answer at all (not ready yet, or down again).
enum class ProbeOutcome { kMatch, kMismatch, kNoAnswer };

struct FleetAction {
  ActionKind kind;
  int engine;
  std::string reason;  // "hang", "crash", "straggler rank 2", "answer mismatch", ...
  std::string role = "";  // kChangeRole: the role it takes (prefill, decode, colocated)
  int rank = -1;          // a straggler's drain and restart: the slow rank (its node is suspect)
};

class FleetController {
 public:
  explicit FleetController(FleetControllerOptions options) : o_(options) {}

  // Adds an engine (by index, in order); returns its index.
  int AddEngine();
  size_t engines() const { return engines_.size(); }

  // One scrape of one engine at `now`; the actions it calls for.
  std::vector<FleetAction> Observe(int engine, Nanos now, const EngineObservation& obs);
  // The engine's known answer was recorded earlier (by a leader before this one, kept in etcd):
  // it is serving, not admitting, and its first scrape that reaches it probes against that
  // answer instead of recording a new one from an engine that may already be corrupt. Call
  // before its first Observe.
  void AnswerKnown(int engine);
  // A role change asked for (by an operator, or the elasticity policy): a serving engine is
  // drained and restarted with `role`, then re-admitted through the warmup gate like any
  // restart. Nothing for an engine that is not serving (it is being handled already).
  std::vector<FleetAction> ChangeRole(int engine, Nanos now, const std::string& role);
  // Planned maintenance asked for by an operator: a serving engine is drained and restarted
  // (reason "maintenance"), then re-admitted through the warmup gate. Nothing for an engine
  // that is not serving.
  std::vector<FleetAction> Maintain(int engine, Nanos now);
  // An operator repaired a cordoned engine (its suspect hardware replaced): it is recovering,
  // and the next scrape that reaches it runs the warmup gate against the answer recorded at
  // admission. Nothing for an engine that is not cordoned.
  void Repaired(int engine, Nanos now);
  // The outcome of kRecordAnswer (ok: an answer was recorded). An engine that crashed before
  // it was ever admitted has no answer to check after its restart: recording one re-admits it.
  std::vector<FleetAction> AnswerRecorded(int engine, bool ok);
  // The outcome of kWarmup: the probe's, and how many warmup requests completed after it. A
  // mismatch cordons; no answer or too few completions leave it recovering (the gate runs
  // again at the next scrape that reaches it; restart_timeout after its restart, it is
  // restarted again); else it is re-admitted.
  std::vector<FleetAction> WarmupDone(int engine, Nanos now, ProbeOutcome probe, int completed);
  // The outcome of kProbe: a mismatch drains and cordons (a silent error while serving); no
  // answer is left to the crash and hang detection.
  std::vector<FleetAction> ProbeDone(int engine, Nanos now, ProbeOutcome probe);

  EngineState state(int engine) const { return At(engine).state; }
  // The slow-node radar over every engine's ranks (unit = engine index).
  std::vector<RadarEntry> Radar(size_t k) const;
  const FleetControllerOptions& options() const { return o_; }

 private:
  struct Engine {
    EngineState state = EngineState::kAdmitting;
    BackendHealth probes;
    bool seen = false;
    double progress = 0;
    Nanos progress_at = 0;  // last time it progressed or had nothing in flight
    Nanos restarted_at = 0;
    // Busy with this progress when evicted: seeing it so again means the restart has not
    // happened yet (a hung process still answers /metrics).
    bool stalled = false;
    double stalled_progress = 0;
    bool gate_pending = false;  // kRecordAnswer or kWarmup issued, outcome not yet back
    bool admitted = false;      // an answer is recorded
    bool drained = false;       // drained by this controller, not yet re-admitted
    Nanos probed_at = 0;        // the last known-answer probe that passed (or admission)
    bool probe_due = false;     // probe at the next scrape that reaches it (an answer from before)
    std::unique_ptr<StragglerDetector> detector;
  };
  Engine& At(int engine) { return engines_.at(static_cast<size_t>(engine)); }
  const Engine& At(int engine) const { return engines_.at(static_cast<size_t>(engine)); }
  // Drain and restart: the fail-fast path of a hang, a crash and a straggler alike.
  void Evict(int engine, Nanos now, std::string reason, std::vector<FleetAction>& out, int rank = -1);

  FleetControllerOptions o_;
  std::vector<Engine> engines_;
};

}  // namespace myriad::policy
