#include "emu/llama_api.h"

#include <fmt/format.h>

#include <algorithm>

#include "net/prometheus.h"

namespace myriad::emu::llama {

using json = nlohmann::json;

namespace {
// llama-server divides unguarded (an empty part gives inf or nan); JSON has neither.
double Ratio(double a, double b) { return b > 0 ? a / b : 0; }
}  // namespace

json Timings(const Usage& u) {
  const double prompt_n = static_cast<double>(u.prompt_tokens - u.cached_tokens);
  const double predicted_n = static_cast<double>(u.completion_tokens);
  return json{{"cache_n", u.cached_tokens},
              {"prompt_n", u.prompt_tokens - u.cached_tokens},
              {"prompt_ms", u.prompt_ms},
              {"prompt_per_token_ms", Ratio(u.prompt_ms, prompt_n)},
              {"prompt_per_second", Ratio(1e3 * prompt_n, u.prompt_ms)},
              {"predicted_n", u.completion_tokens},
              {"predicted_ms", u.predicted_ms},
              {"predicted_per_token_ms", Ratio(u.predicted_ms, predicted_n)},
              {"predicted_per_second", Ratio(1e3 * predicted_n, u.predicted_ms)}};
}

json Props(std::string_view model, const SlotProfile& p, int64_t default_max_tokens) {
  return json{{"default_generation_settings",
               {{"n_ctx", p.n_ctx}, {"params", {{"n_predict", default_max_tokens}, {"cache_prompt", true}}}}},
              {"total_slots", p.slots},
              {"model_alias", model},
              {"model_path", fmt::format("/models/{}.gguf", model)},
              {"modalities", {{"vision", false}, {"audio", false}}},
              {"endpoint_slots", true},
              {"endpoint_props", false},
              {"endpoint_metrics", true},
              {"chat_template", ""},
              {"bos_token", "<s>"},
              {"eos_token", "</s>"},
              {"build_info", "myriad-emu"},
              {"is_sleeping", false}};
}

json Slots(const EngineStats& s, const SlotProfile& p) {
  json out = json::array();
  for (size_t i = 0; i < s.slots.size(); ++i) {
    const EngineStats::Slot& slot = s.slots[i];
    json j = {{"id", i}, {"n_ctx", p.n_ctx}, {"speculative", false}, {"is_processing", slot.processing}};
    if (slot.task != 0) {
      j["id_task"] = slot.task;
      j["n_prompt_tokens"] = slot.tokens;
      j["n_prompt_tokens_processed"] = slot.prompt_processed;
      j["n_prompt_tokens_cache"] = slot.prompt_cached;
      // llama-server's metrics-only params (what /slots shows unless LLAMA_SERVER_SLOTS_DEBUG is
      // set, so never the prompt's text): of them, the one the emulator has.
      j["params"] = {{"n_predict", slot.max_tokens}};
      j["next_token"] = json::array({json{{"has_next_token", slot.processing},
                                          {"has_new_line", false},
                                          {"n_remain", slot.max_tokens < 0 ? -1 : slot.max_tokens - slot.decoded},
                                          {"n_decoded", slot.decoded}}});
    }
    out.push_back(std::move(j));
  }
  return out;
}

std::string Metrics(const EngineStats& s) {
  using net::MetricType;
  net::PrometheusWriter w;
  int processing = 0;
  for (const EngineStats::Slot& slot : s.slots) processing += slot.processing ? 1 : 0;
  w.Family("llamacpp:prompt_tokens_total", "Number of prompt tokens processed.", MetricType::kCounter);
  w.Sample("llamacpp:prompt_tokens_total", {}, s.prompt_tokens);
  w.Family("llamacpp:tokens_predicted_total", "Number of generation tokens processed.", MetricType::kCounter);
  w.Sample("llamacpp:tokens_predicted_total", {}, s.generation_tokens);
  w.Family("llamacpp:n_decode_total", "Total number of llama_decode() calls", MetricType::kCounter);
  w.Sample("llamacpp:n_decode_total", {}, s.steps);
  w.Family("llamacpp:requests_processing", "Number of requests processing.", MetricType::kGauge);
  w.Sample("llamacpp:requests_processing", {}, static_cast<uint64_t>(processing));
  w.Family("llamacpp:requests_deferred", "Number of requests deferred.", MetricType::kGauge);
  // A request holds a slot from the start of its prompt: every other one waits for a slot.
  w.Sample("llamacpp:requests_deferred", {}, static_cast<uint64_t>(std::max(s.waiting, 0)));
  w.Family("myriad_emu_prompt_cache_queried_tokens_total",
           "Prompt tokens looked up in the slots (the emulator's own count; llama-server has none).",
           MetricType::kCounter);
  w.Sample("myriad_emu_prompt_cache_queried_tokens_total", {}, s.prefix_queries);
  w.Family("myriad_emu_prompt_cache_hit_tokens_total",
           "Prompt tokens reused from a slot's cache (the emulator's own count; llama-server has none).",
           MetricType::kCounter);
  w.Sample("myriad_emu_prompt_cache_hit_tokens_total", {}, s.prefix_hits);
  return w.Take();
}

absl::StatusOr<std::string> NativeToOpenAi(std::string_view body) {
  json in = json::parse(body, nullptr, false);
  if (in.is_discarded() || !in.is_object()) return absl::InvalidArgumentError("body is not a JSON object");
  json out = json::object();
  if (!in.contains("prompt")) return absl::InvalidArgumentError("'prompt' is required");
  out["prompt"] = in["prompt"];
  if (in.contains("n_predict")) {
    const json& n = in["n_predict"];
    if (!n.is_number_integer()) return absl::InvalidArgumentError("'n_predict' must be an integer");
    // -1: until the context is full; the emulator has no end of text, so it needs a bound.
    if (n.get<int64_t>() < 0) return absl::InvalidArgumentError("'n_predict' must be >= 0 here (no end of text)");
    out["max_tokens"] = std::max<int64_t>(n.get<int64_t>(), 1);
  }
  if (in.contains("stream")) out["stream"] = in["stream"];
  if (in.contains("model")) out["model"] = in["model"];
  return out.dump();
}

json NativeFinal(std::string_view model, std::string_view content, const Usage& u, bool stream) {
  return json{{"index", 0},
              {"content", stream ? std::string_view() : content},
              {"tokens", json::array()},
              {"id_slot", u.slot},
              {"stop", true},
              {"model", model},
              {"tokens_predicted", u.completion_tokens},
              {"tokens_evaluated", u.prompt_tokens},
              {"generation_settings", {{"n_predict", u.completion_tokens}}},
              {"prompt", ""},
              {"has_new_line", false},
              {"truncated", false},
              {"stop_type", "limit"},
              {"stopping_word", ""},
              {"tokens_cached", u.prompt_tokens + u.completion_tokens},
              {"timings", Timings(u)}};
}

json NativePartial(std::string_view content, int index, int64_t prompt_tokens) {
  return json{{"index", 0},
              {"content", content},
              {"tokens", json::array()},
              {"stop", false},
              {"id_slot", -1},
              {"tokens_predicted", index + 1},
              {"tokens_evaluated", prompt_tokens}};
}

}  // namespace myriad::emu::llama
