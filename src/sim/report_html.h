#pragma once
// `myriad sim --report FILE`: one self-contained HTML page (its data and the script that draws
// its SVG charts inline; nothing fetched) showing a run, or several runs of `--compare`
// overlaid on the same axes: latency percentiles, SLO attainment, goodput and cost within SLO
// over time with faults and controller actions marked, per-pool utilisation and queues, KV
// and store traffic, the controller's counters, and the slow-node radar.
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/timeseries.h"

namespace myriad::sim {

struct ReportRun {
  const nlohmann::ordered_json* report;  // Cluster::Report()
  const TimeSeries* series;
};

// The same runs give the same bytes (no clock, no host name).
std::string FormatHtmlReport(std::span<const ReportRun> runs);

// Markers beyond this many per run are left out of the page (the CSV still counts them).
inline constexpr size_t kMaxHtmlMarkers = 2000;

}  // namespace myriad::sim
