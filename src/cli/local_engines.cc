#include "cli/local_engines.h"

#include <fmt/format.h>

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

absl::StatusOr<LocalEngines> StartLocalEngines(const LocalEngineOptions& lo) {
  LocalEngines out;
  for (size_t i = 0; i < lo.roles.size(); ++i) {
    emu::EmuOptions o;
    o.http.address = "127.0.0.1";
    o.http.port = 0;
    o.served_model_name = lo.served_model;
    o.role = std::string(gateway::RoleName(lo.roles[i]));
    o.engine.model = lo.perf_model;
    o.engine.gpu = lo.gpu;
    o.engine.speed = lo.speed;
    if (lo.block_size > 0) o.engine.block_size = lo.block_size;
    o.engine.seed = lo.seed + i;
    o.engine_id = fmt::format("engine-{}", i);
    o.kv_events = "tcp://127.0.0.1:*";
    o.kv_replay = "tcp://127.0.0.1:*";
    o.encoder = lo.encoder;
    auto s = emu::EmuServer::Create(o);
    if (!s.ok()) return s.status();
    if (absl::Status st = (*s)->Start(); !st.ok()) {
      return absl::Status(st.code(), fmt::format("engine {}: {}", i, std::string(st.message())));
    }
    gateway::BackendConfig b;
    b.name = o.engine_id;
    b.url = fmt::format("http://127.0.0.1:{}", (*s)->port());
    b.role = lo.roles[i];
    b.model = lo.served_model;
    b.kv_events = (*s)->kv_events_endpoint();
    b.kv_replay = (*s)->kv_replay_endpoint();
    out.backends.push_back(std::move(b));
    out.servers.push_back(*std::move(s));
  }
  return out;
}

}  // namespace myriad::cli
