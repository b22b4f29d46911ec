// The two sides of the twin check: the simulator in-process, and a live gateway in front of
// emulated engines driven by the trace replay.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "cli/trace_replay.h"
#include "cli/twin.h"
#include "cli/local_engines.h"
#include "gateway/gateway.h"
#include "sim/runner.h"
#include "sim/scenario.h"

namespace myriad::cli {

namespace {

// What the gateway's 429 message names: "rejected: REASON (tenant ...)"; else the error's type.
std::string ReasonOf(const ReplayEntry& e) {
  const std::string& err = e.error;
  if (const size_t at = err.find("rejected: "); at != std::string::npos) {
    const size_t from = at + 10;
    const size_t to = err.find(' ', from);
    return err.substr(from, to == std::string::npos ? std::string::npos : to - from);
  }
  if (e.status != 0 && e.status != 200) return fmt::format("http_{}", e.status);
  const size_t colon = err.find(':');
  return err.empty() ? "unknown" : err.substr(0, colon);
}

int EngineIndex(const std::string& backend) {
  constexpr std::string_view kPrefix = "engine-";
  if (backend.rfind(kPrefix, 0) != 0) return -1;
  try {
    return std::stoi(backend.substr(kPrefix.size()));
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

absl::StatusOr<TwinSide> RunSimTwin(const TwinDescription& d, const std::string& trace_path,
                                    const std::vector<sim::TraceRecord>& records, std::string* scenario_out) {
  const Nanos span = records.empty() ? 0 : records.back().offset;
  const std::string yaml = TwinScenarioYaml(d, trace_path, span);
  if (scenario_out) *scenario_out = yaml;
  auto scenario = sim::ParseScenario(yaml, "twin scenario");
  if (!scenario.ok()) return scenario.status();
  TwinSide side;
  side.requests.resize(records.size());
  const bool pd = d.prefill > 0;
  auto sink = [&side, pd](const sim::RequestOutcome& o) {
    if (o.id >= side.requests.size()) return;
    TwinRequest& r = side.requests[o.id];
    r.served = o.reason.empty();
    r.reason = std::string(o.reason);
    r.entry = o.unit;
    r.decode = pd ? o.decode_unit : -1;
    r.ttft_s = o.first_token >= 0 ? NanosToSeconds(o.first_token - o.arrival) : -1;
    r.prompt_tokens = o.input_tokens;
    r.cached_tokens = std::max(o.cached_tokens, 0);
  };
  auto report = sim::RunScenario(*scenario, nullptr, sink);
  if (!report.ok()) return report.status();
  if (report->contains("failures")) {
    for (const auto& e : (*report)["failures"]["events"]) {
      if (e["unit"] == d.fail_engine && e["detected_s"].is_number()) {
        side.eject_s = e["detected_s"].get<double>() - e["at_s"].get<double>();
        break;
      }
    }
  }
  return side;
}

absl::StatusOr<TwinSide> RunLiveTwin(const TwinDescription& d, const std::vector<sim::TraceRecord>& records) {
  const std::string model = "twin-model";
  gateway::GatewayConfig gc;
  gc.listen = "127.0.0.1:0";
  gc.policy = d.policy;
  gc.learn_cost = d.learn_cost;
  gc.perf_model = d.model;
  gc.perf_gpu = d.gpu;
  gc.kv_block_size = d.kv_block_tokens;
  gc.ttft_slo = d.ttft_slo;
  gc.access_log = "";
  gc.seed = d.seed;
  // The simulator's heartbeat (1 s emulated) stands for the gateway's active health checks.
  gc.health_interval = std::max<Nanos>(static_cast<Nanos>(static_cast<double>(kSecond) / d.speed), 10 * kMillisecond);
  gc.health_timeout = gc.health_interval;
  std::vector<std::string> keys;
  for (size_t t = 0; t < d.tenants.size(); ++t) {
    gateway::TenantEntry e;
    e.config.name = d.tenants[t].name;
    e.config.weight = d.tenants[t].weight;
    e.config.priority = d.tenants[t].priority;
    // The gateway's token buckets run on real time, the workload on emulated time.
    e.config.quota_tokens_per_s = d.tenants[t].quota_tokens_per_s * d.speed;
    e.config.burst_tokens = d.tenants[t].burst_tokens;
    keys.push_back(fmt::format("twin-key-{}", t));
    e.api_keys = {keys.back()};
    gc.tenants.push_back(std::move(e));
  }
  LocalEngineOptions lo;
  lo.roles = LocalRoles(d.colocated, d.prefill, d.decode);
  lo.served_model = model;
  lo.perf_model = d.model;
  lo.gpu = d.gpu;
  lo.speed = d.speed;
  lo.block_size = d.kv_block_tokens;
  lo.seed = d.seed;
  auto engines = StartLocalEngines(lo);
  if (!engines.ok()) return engines.status();
  gc.backends = engines->backends;
  // Each role's engines learn one cost model, as each simulated pool does.
  for (gateway::BackendConfig& b : gc.backends) b.cost_class = std::string(gateway::RoleName(b.role));
  auto gw = gateway::Gateway::Create(gc);
  if (!gw.ok()) return gw.status();
  if (absl::Status st = (*gw)->Start(); !st.ok()) return st;
  // Let the gateway subscribe to every engine's events before the first request.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  ReplayOptions ro;
  ro.url = fmt::format("http://127.0.0.1:{}", (*gw)->port());
  ro.model = model;
  ro.concurrency = 4096;
  ro.time_scale = d.speed;
  ro.threads = 2;
  ro.tenant_keys = keys;
  ro.timeout = 600 * kSecond;

  // The failure: the engine's server stops at its emulated time; the ejection is when the
  // gateway's ejection count first moves.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  double eject_s = -1;
  std::thread failer;
  const auto start = std::chrono::steady_clock::now();
  if (d.fail_engine >= 0) {
    failer = std::thread([&] {
      const auto fail_at = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(NanosToSeconds(d.fail_at) / d.speed));
      std::unique_lock l(mu);
      if (cv.wait_until(l, fail_at, [&] { return done; })) return;
      l.unlock();
      const uint64_t before = (*gw)->stats().ejections;
      engines->servers[static_cast<size_t>(d.fail_engine)]->Stop();
      const auto stopped = std::chrono::steady_clock::now();
      l.lock();
      while (!done) {
        if ((*gw)->stats().ejections > before) {
          eject_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count() * d.speed;
          return;
        }
        cv.wait_for(l, std::chrono::milliseconds(2));
      }
    });
  }
  auto report = RunReplay(records, ro);
  {
    std::lock_guard l(mu);
    done = true;
  }
  cv.notify_all();
  if (failer.joinable()) failer.join();
  (*gw)->Stop();
  engines->Stop();
  if (!report.ok()) return report.status();

  TwinSide side;
  side.eject_s = eject_s;
  side.requests.resize(records.size());
  for (const ReplayEntry& e : report->entries) {
    if (e.index >= side.requests.size()) continue;
    TwinRequest& r = side.requests[e.index];
    r.served = e.status == 200 && e.error.empty();
    r.reason = r.served ? "" : ReasonOf(e);
    // P/D: the prompt was computed by the prefill engine, the answer streamed by the decode one.
    if (!e.prefill_backend.empty()) {
      r.entry = EngineIndex(e.prefill_backend);
      r.decode = EngineIndex(e.backend);
    } else {
      r.entry = EngineIndex(e.backend);
    }
    r.ttft_s = e.ttft_s >= 0 ? e.ttft_s * d.speed : -1;
    r.prompt_tokens = std::max<int64_t>(e.prompt_tokens, 0);
    r.cached_tokens = std::max<int64_t>(e.cached_tokens, 0);
  }
  return side;
}

}  // namespace myriad::cli
