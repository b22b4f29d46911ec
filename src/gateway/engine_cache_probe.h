#pragma once
// What an engine says about its prefix cache's capacity, read from the endpoints it already
// serves, for the approximate index's model of it (policy/engine_cache_model.h). The health
// checker asks (gateway_admin.cc), on its own thread: routing never waits for an engine.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/http_client.h"

#include "policy/engine_cache_model.h"

namespace myriad::gateway {

// llama.cpp's GET /props: `total_slots` and `default_generation_settings.n_ctx`, the context
// of one slot (llama.cpp's examples/server/README.md, "GET /props"; tools/server/ in newer
// trees); a slot cache.
std::optional<policy::EngineCacheCapacity> ParseLlamaCppProps(std::string_view body);
// SGLang's GET /get_server_info: `max_total_num_tokens`, at the top level or, in newer releases,
// in `internal_states[0]` (python/sglang/srt/entrypoints/http_server.py); a paged pool.
std::optional<policy::EngineCacheCapacity> ParseSglangServerInfo(std::string_view body);
// vLLM's /metrics: the gauge vllm:cache_config_info, whose labels num_gpu_blocks and block_size
// give the pool (an info gauge of value 1; num_gpu_blocks reads "None" until the engine has
// profiled its memory); a paged pool. With DP ranks each engine's line carries the same
// configuration: the first is taken.
std::optional<policy::EngineCacheCapacity> ParseVllmCacheConfig(std::string_view exposition);

// llama.cpp's GET /slots, a JSON array of server_slot::to_json (tools/server/server-context.cpp):
// `id`, `is_processing` (`state`, non-zero when busy, in 2024's servers), `id_task` once the
// slot took a task (-1 before in older servers) and, since 2025, `n_prompt_tokens`. Entries that
// do not parse are skipped; a body that is not an array of at most policy::kMaxEngineSlots
// entries is nothing.
std::optional<std::vector<policy::SlotObservation>> ParseLlamaCppSlots(std::string_view body);

// Asks the engine behind `client` in turn: vLLM's cache_config_info in `metrics` (its /metrics
// body; fetched when empty), llama.cpp's /props, SGLang's /get_server_info. Nothing when none
// answers; each call is bounded by the client's timeout.
std::optional<policy::EngineCacheCapacity> ProbeEngineCache(net::HttpClient& client, std::string metrics);

}  // namespace myriad::gateway
