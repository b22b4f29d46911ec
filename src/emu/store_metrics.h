#pragma once
// The store tier's part of the emulator's /metrics, under vLLM's names where vLLM has them:
// its offloading connector's vllm:kv_offload_total_bytes / _total_time (counters, label
// transfer_type GPU_to_CPU for offloads, CPU_to_GPU for loads) and the connector's
// vllm:external_prefix_cache_queries / _hits (tokens). What vLLM does not report (blocks,
// drops, failures) is named myriad_emu_kv_store_*.
#include <string_view>
#include <vector>

#include "emu/engine.h"
#include "net/prometheus.h"

namespace myriad::emu {

// One sample per DP rank (labels model_name, engine), as the rest of /metrics.
void WriteStoreMetrics(net::PrometheusWriter& w, std::string_view model, const std::vector<EngineStats>& stats);

}  // namespace myriad::emu
