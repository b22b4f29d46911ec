#include "gateway/engine_cache_probe.h"

#include <charconv>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace myriad::gateway {

namespace {

using json = nlohmann::json;

// A positive integer within `max`, or nothing: an engine's report is input like any other.
std::optional<int64_t> PositiveInt(const json& j, int64_t max) {
  if (!j.is_number_integer()) return std::nullopt;
  const int64_t v = j.get<int64_t>();
  if (v <= 0 || v > max) return std::nullopt;
  return v;
}

std::optional<int64_t> LabelInt(std::string_view labels, std::string_view name) {
  for (size_t at = labels.find(name); at != std::string_view::npos; at = labels.find(name, at + 1)) {
    const bool starts = at == 0 || labels[at - 1] == '{' || labels[at - 1] == ',';
    const size_t value = at + name.size();
    if (!starts || labels.substr(value, 2) != "=\"") continue;
    const std::string_view v = labels.substr(value + 2, labels.find('"', value + 2) - (value + 2));
    int64_t out = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    if (ec != std::errc() || end != v.data() + v.size() || out <= 0) return std::nullopt;
    return out;
  }
  return std::nullopt;
}

}  // namespace

std::optional<policy::EngineCacheCapacity> ParseLlamaCppProps(std::string_view body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto slots = j.contains("total_slots") ? PositiveInt(j["total_slots"], policy::kMaxEngineSlots) : std::nullopt;
  if (!slots) return std::nullopt;
  policy::EngineCacheCapacity c{.kind = policy::EngineCacheKind::kSlots, .slots = static_cast<int>(*slots),
                                .source = policy::CapacitySource::kEngine};
  if (auto s = j.find("default_generation_settings"); s != j.end() && s->is_object() && s->contains("n_ctx")) {
    c.tokens = PositiveInt((*s)["n_ctx"], policy::kMaxEngineCacheTokens).value_or(0);
  }
  return c;
}

std::optional<std::vector<policy::SlotObservation>> ParseLlamaCppSlots(std::string_view body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array() || j.size() > static_cast<size_t>(policy::kMaxEngineSlots)) return std::nullopt;
  std::vector<policy::SlotObservation> out;
  for (const json& s : j) {
    if (!s.is_object() || !s.contains("id") || !s["id"].is_number_integer()) continue;
    const int64_t id = s["id"].get<int64_t>();
    if (id < 0 || id >= policy::kMaxEngineSlots) continue;
    policy::SlotObservation o;
    o.id = static_cast<int>(id);
    if (auto p = s.find("is_processing"); p != s.end() && p->is_boolean()) {
      o.processing = p->get<bool>();
    } else if (auto st = s.find("state"); st != s.end() && st->is_number_integer()) {
      o.processing = st->get<int64_t>() != 0;
    } else {
      continue;
    }
    if (auto t = s.find("id_task"); t != s.end() && t->is_number_integer() && t->get<int64_t>() >= 0) {
      o.task = t->get<int64_t>();
    }
    if (auto n = s.find("n_prompt_tokens"); n != s.end() && n->is_number_integer()) {
      const int64_t v = n->get<int64_t>();
      if (v >= 0 && v <= policy::kMaxEngineCacheTokens) o.tokens = v;
    }
    out.push_back(o);
  }
  return out;
}

std::optional<policy::EngineCacheCapacity> ParseSglangServerInfo(std::string_view body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  std::optional<int64_t> tokens;
  if (j.contains("max_total_num_tokens")) tokens = PositiveInt(j["max_total_num_tokens"], policy::kMaxEngineCacheTokens);
  if (!tokens) {
    auto states = j.find("internal_states");
    if (states != j.end() && states->is_array() && !states->empty() && (*states)[0].is_object() &&
        (*states)[0].contains("max_total_num_tokens")) {
      tokens = PositiveInt((*states)[0]["max_total_num_tokens"], policy::kMaxEngineCacheTokens);
    }
  }
  if (!tokens) return std::nullopt;
  return policy::EngineCacheCapacity{
      .kind = policy::EngineCacheKind::kPaged, .tokens = *tokens, .source = policy::CapacitySource::kEngine};
}

std::optional<policy::EngineCacheCapacity> ParseVllmCacheConfig(std::string_view text) {
  constexpr std::string_view kName = "vllm:cache_config_info{";
  for (size_t at = text.find(kName); at != std::string_view::npos; at = text.find(kName, at + 1)) {
    if (at != 0 && text[at - 1] != '\n') continue;  // a name inside a comment or label
    const size_t open = at + kName.size() - 1;
    const size_t close = text.find('}', open);
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view labels = text.substr(open, close - open + 1);
    const auto blocks = LabelInt(labels, "num_gpu_blocks");
    const auto block_size = LabelInt(labels, "block_size");
    if (!blocks || !block_size || *block_size > (int64_t{1} << 20) ||
        *blocks > policy::kMaxEngineCacheTokens / *block_size) {
      continue;
    }
    return policy::EngineCacheCapacity{.kind = policy::EngineCacheKind::kPaged,
                                       .tokens = *blocks * *block_size,
                                       .source = policy::CapacitySource::kEngine};
  }
  return std::nullopt;
}

std::optional<policy::EngineCacheCapacity> ProbeEngineCache(net::HttpClient& client, std::string metrics) {
  if (metrics.empty()) {
    if (auto m = client.Get("/metrics"); m.ok() && m->status == 200) metrics = std::move(m->body);
  }
  if (auto c = ParseVllmCacheConfig(metrics)) return c;
  if (auto p = client.Get("/props"); p.ok() && p->status == 200) {
    if (auto c = ParseLlamaCppProps(p->body)) return c;
  }
  if (auto p = client.Get("/get_server_info"); p.ok() && p->status == 200) {
    if (auto c = ParseSglangServerInfo(p->body)) return c;
  }
  return std::nullopt;
}

}  // namespace myriad::gateway
