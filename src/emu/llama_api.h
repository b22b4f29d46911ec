#pragma once
// What `myriad emu --profile llama-server` answers where llama.cpp's llama-server answers
// differently from vLLM: GET /props, GET /slots, /health, the native POST /completion, the
// `timings` object of every completion, and its llamacpp: metrics. Field names follow
// llama.cpp's tools/server (server-context.cpp: get_props, server_slot::to_json, the metrics
// handler; server-task.cpp: result_timings::to_json, usage_json_oaicompat), so that a router
// written against a real llama-server reads the emulator alike.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "emu/engine.h"

namespace myriad::emu::llama {

// result_timings: cache_n, prompt_n, prompt_ms, ..., predicted_per_second.
nlohmann::json Timings(const Usage& u);
// GET /props: total_slots, default_generation_settings.n_ctx, model_path, ...
nlohmann::json Props(std::string_view model, const SlotProfile& p, int64_t default_max_tokens);
// GET /slots as llama-server since 2025 answers it by default (server_slot::to_json with
// only_metrics): per slot id, n_ctx, speculative, is_processing and, once it took a task,
// id_task, n_prompt_tokens (what its cache holds), n_prompt_tokens_processed and _cache,
// params and next_token (an array of one); never the prompt's text.
nlohmann::json Slots(const EngineStats& s, const SlotProfile& p);
// GET /metrics: llama-server's llamacpp: families (what the emulator can count), plus the
// emulator's own prompt-cache counters, which llama-server does not have.
std::string Metrics(const EngineStats& s);

// The native /completion body (prompt, n_predict, stream) as an OpenAI completions body for
// the shared request parser; an error names the field.
absl::StatusOr<std::string> NativeToOpenAi(std::string_view body);
// The native answer, whole (stream: the last event's object).
nlohmann::json NativeFinal(std::string_view model, std::string_view content, const Usage& u, bool stream);
// A native stream event for one token.
nlohmann::json NativePartial(std::string_view content, int index, int64_t prompt_tokens);

}  // namespace myriad::emu::llama
