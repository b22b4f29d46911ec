#include "emu/store_metrics.h"

#include <string>

namespace myriad::emu {

void WriteStoreMetrics(net::PrometheusWriter& w, std::string_view model, const std::vector<EngineStats>& stats) {
  using net::MetricType;
  std::vector<std::string> ids;
  for (size_t i = 0; i < stats.size(); ++i) ids.push_back(std::to_string(i));
  auto family = [&](std::string_view name, std::string_view help, MetricType type, auto value) {
    w.Family(name, help, type);
    for (size_t i = 0; i < stats.size(); ++i) w.Sample(name, {{"model_name", model}, {"engine", ids[i]}}, value(stats[i]));
  };
  // Offloads (HBM to the store) and loads (the store to HBM), as vLLM's transfer_type says.
  auto both = [&](std::string_view name, std::string_view help, auto offload, auto load) {
    w.Family(name, help, MetricType::kCounter);
    for (size_t i = 0; i < stats.size(); ++i) {
      w.Sample(name, {{"model_name", model}, {"engine", ids[i]}, {"transfer_type", "GPU_to_CPU"}}, offload(stats[i].store));
      w.Sample(name, {{"model_name", model}, {"engine", ids[i]}, {"transfer_type", "CPU_to_GPU"}}, load(stats[i].store));
    }
  };
  both("vllm:kv_offload_total_bytes_total", "Number of bytes offloaded by KV connector",
       [](const StoreTierStats& s) { return s.offloaded_bytes; }, [](const StoreTierStats& s) { return s.loaded_bytes; });
  both("vllm:kv_offload_total_time_total", "Total time measured by all KV offloading operations",
       [](const StoreTierStats& s) { return s.offload_seconds; }, [](const StoreTierStats& s) { return s.load_seconds; });
  both("myriad_emu_kv_store_blocks_total", "KV blocks moved between HBM and the KV store tier.",
       [](const StoreTierStats& s) { return s.offloaded_blocks; }, [](const StoreTierStats& s) { return s.loaded_blocks; });
  family("vllm:external_prefix_cache_queries_total",
         "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.",
         MetricType::kCounter, [](const EngineStats& s) { return s.external_queries; });
  family("vllm:external_prefix_cache_hits_total",
         "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.",
         MetricType::kCounter, [](const EngineStats& s) { return s.external_hits; });
  family("myriad_emu_kv_store_offload_dropped_total",
         "HBM evictions not offered to the store: the offload queue was full, or the store had just failed.",
         MetricType::kCounter, [](const EngineStats& s) { return s.store.offload_dropped; });
  family("myriad_emu_kv_store_offload_failures_total", "Blocks whose put to the store failed.", MetricType::kCounter,
         [](const EngineStats& s) { return s.store.offload_failures; });
  family("myriad_emu_kv_store_lookups_total", "Requests that asked the store for the blocks past their HBM prefix.",
         MetricType::kCounter, [](const EngineStats& s) { return s.store.lookups; });
  family("myriad_emu_kv_store_load_failures_total",
         "Store lookups or reads that failed; their blocks were recomputed.", MetricType::kCounter,
         [](const EngineStats& s) { return s.store.load_failures; });
  family("myriad_emu_kv_store_declined_blocks_total",
         "Blocks the store held that were recomputed because that was cheaper than loading them.",
         MetricType::kCounter, [](const EngineStats& s) { return s.store.declined_blocks; });
  family("myriad_emu_kv_store_offload_queue_blocks", "Blocks waiting to be offloaded.", MetricType::kGauge,
         [](const EngineStats& s) { return s.store.queued; });
}

}  // namespace myriad::emu
