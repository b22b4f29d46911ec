#include "cli/local_engines.h"

#include <fmt/format.h>

#include <chrono>
#include <optional>
#include <thread>

#include "net/http_client.h"

namespace myriad::cli {

std::vector<gateway::BackendRole> LocalRoles(int colocated, int prefill, int decode) {
  std::vector<gateway::BackendRole> roles;
  if (prefill > 0) {
    roles.assign(static_cast<size_t>(prefill), gateway::BackendRole::kPrefill);
    roles.insert(roles.end(), static_cast<size_t>(decode), gateway::BackendRole::kDecode);
  } else {
    roles.assign(static_cast<size_t>(colocated), gateway::BackendRole::kColocated);
  }
  return roles;
}

namespace {

// Engine i of `lo`, on `port` and the KV-event endpoints given (0 and "": any free one).
absl::StatusOr<std::unique_ptr<emu::EmuServer>> StartEngine(const LocalEngineOptions& lo, size_t i, uint16_t port,
                                                             const std::string& kv_events,
                                                             const std::string& kv_replay) {
  emu::EmuOptions o;
  o.http.address = "127.0.0.1";
  o.http.port = port;
  o.served_model_name = lo.served_model;
  o.role = std::string(gateway::RoleName(lo.roles[i]));
  o.engine.model = lo.perf_model;
  o.engine.gpu = lo.gpu;
  o.engine.speed = lo.speed;
  o.dp_ranks = lo.dp_ranks;
  if (lo.block_size > 0) o.engine.block_size = lo.block_size;
  o.engine.seed = lo.seed + i;
  o.engine.kv_blocks = lo.kv_blocks;
  o.engine.kv_store = lo.kv_store;
  o.engine.kv_store_namespace = lo.kv_store_namespace;
  o.engine.kv_store_gbps = lo.kv_store_gbps;
  o.engine.kv_block_bytes = lo.kv_block_bytes;
  o.engine_id = fmt::format("engine-{}", i);
  o.kv_events = kv_events.empty() ? "tcp://127.0.0.1:*" : kv_events;
  o.kv_replay = kv_replay.empty() ? "tcp://127.0.0.1:*" : kv_replay;
  o.encoder = lo.encoder;
  auto s = emu::EmuServer::Create(o);
  if (!s.ok()) return s.status();
  if (absl::Status st = (*s)->Start(); !st.ok()) {
    return absl::Status(st.code(), fmt::format("engine {}: {}", i, std::string(st.message())));
  }
  return s;
}

// The gateway's entry for engine i of `lo`, started as `s`.
gateway::BackendConfig BackendOf(const LocalEngineOptions& lo, size_t i, const emu::EmuServer& s) {
  gateway::BackendConfig b;
  b.name = fmt::format("engine-{}", i);
  b.url = fmt::format("http://127.0.0.1:{}", s.port());
  b.role = lo.roles[i];
  b.model = lo.served_model;
  b.kv_events = s.kv_events_endpoint();
  b.kv_replay = s.kv_replay_endpoint();
  return b;
}

// Real time: the engine answers on the network, whatever clock the controller runs on.
absl::Status AwaitHealth(const std::string& target, uint16_t port, Nanos timeout) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout);
  net::HttpClient c(net::HostPort{"127.0.0.1", port}, net::HttpClientOptions{.timeout = timeout});
  while (true) {
    auto r = c.Get("/health");
    if (r.ok() && r->status == 200) return absl::OkStatus();
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          fmt::format("{} started on port {} but /health did not answer 200 within {} ms", target, port,
                      timeout / kMillisecond));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::optional<gateway::BackendRole> RoleNamed(const std::string& role) {
  for (auto r : {gateway::BackendRole::kColocated, gateway::BackendRole::kPrefill, gateway::BackendRole::kDecode}) {
    if (gateway::RoleName(r) == role) return r;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<LocalEngines> StartLocalEngines(const LocalEngineOptions& lo) {
  LocalEngines out;
  out.options = lo;
  for (size_t i = 0; i < lo.roles.size(); ++i) {
    auto s = StartEngine(lo, i, 0, "", "");
    if (!s.ok()) return s.status();
    out.backends.push_back(BackendOf(lo, i, **s));
    out.servers.push_back(*std::move(s));
  }
  return out;
}

absl::Status LocalEnginesActuator::Restart(const std::string& target, Nanos timeout) {
  size_t i = 0;
  while (i < engines_.backends.size() && engines_.backends[i].name != target) ++i;
  if (i == engines_.backends.size()) return absl::NotFoundError(fmt::format("no local engine '{}'", target));
  const uint16_t port = engines_.servers[i]->port();
  engines_.servers[i]->Stop();
  // The same port and KV-event endpoints: the gateway and its subscribers find it where it was.
  auto s = StartEngine(engines_.options, i, port, engines_.backends[i].kv_events, engines_.backends[i].kv_replay);
  if (!s.ok()) return s.status();
  engines_.servers[i] = *std::move(s);
  return AwaitHealth(target, port, timeout);
}

absl::Status LocalEnginesActuator::ChangeRole(const std::string& target, const std::string& role, Nanos timeout) {
  size_t i = 0;
  while (i < engines_.backends.size() && engines_.backends[i].name != target) ++i;
  if (i == engines_.backends.size()) return absl::NotFoundError(fmt::format("no local engine '{}'", target));
  const std::optional<gateway::BackendRole> to = RoleNamed(role);
  if (!to) return absl::InvalidArgumentError(fmt::format("role '{}' is not prefill, decode or colocated", role));
  const gateway::BackendRole from = engines_.options.roles[i];
  engines_.options.roles[i] = *to;
  if (absl::Status st = Restart(target, timeout); !st.ok()) {
    engines_.options.roles[i] = from;
    return st;
  }
  engines_.backends[i].role = *to;
  return reregister_ ? reregister_(engines_.backends[i]) : absl::OkStatus();
}

absl::StatusOr<control::EngineConfig> LocalEnginesActuator::AddEngine(const std::string& role, Nanos timeout) {
  const std::optional<gateway::BackendRole> to = RoleNamed(role);
  if (!to) return absl::InvalidArgumentError(fmt::format("role '{}' is not prefill, decode or colocated", role));
  // A new index: names, seeds and ports of stopped engines are never reused.
  const size_t i = engines_.servers.size();
  engines_.options.roles.push_back(*to);
  auto s = StartEngine(engines_.options, i, 0, "", "");
  if (!s.ok()) {
    engines_.options.roles.pop_back();
    return s.status();
  }
  engines_.backends.push_back(BackendOf(engines_.options, i, **s));
  engines_.servers.push_back(*std::move(s));
  const gateway::BackendConfig& b = engines_.backends.back();
  absl::Status st = AwaitHealth(b.name, engines_.servers.back()->port(), timeout);
  if (st.ok() && reregister_) st = reregister_(b);
  if (!st.ok()) {
    engines_.servers.back()->Stop();
    return st;
  }
  return control::EngineConfig{b.name, b.url, role};
}

absl::Status LocalEnginesActuator::StopEngine(const std::string& target) {
  size_t i = 0;
  while (i < engines_.backends.size() && engines_.backends[i].name != target) ++i;
  if (i == engines_.backends.size()) return absl::NotFoundError(fmt::format("no local engine '{}'", target));
  // Out of the gateway first: it must not route to an engine that is going away.
  if (deregister_) deregister_(target);
  engines_.servers[i]->Stop();
  return absl::OkStatus();
}

}  // namespace myriad::cli
